"""Users and their API tokens (docs/users.md).

A token is shown once, when it is made; the store keeps only its SHA-256 digest, as the
``_id`` of its document, so a request's token is found by one ``_id`` lookup (index-served
on every store) and a stolen database holds nothing that authenticates. Tokens are 256
random bits: a digest without salt or stretching is enough for them (unlike passwords,
they cannot be guessed from a dictionary).

A revoked user keeps their document (their workflows still name them as owner) and loses
every token at once: a token counts only while its user is not revoked.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, TypedDict

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from shared.errors import PingoError
from shared.store.client import Store
from shared.store.records import UserRecord

# Names are Hadoop user names (Oozie's doAs, HDFS owners) and a word of event routing keys
# (``<type>.<owner>.<workflow>``): lower case, no dot, as POSIX user names are usually made.
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
NAME_RULE = "1-32 characters: lower-case letters, digits, '_' and '-', not starting with a digit or '-'"
TOKEN_PREFIX = "pingo_"


class UserDoc(TypedDict):
    _id: str  # the name
    admin: bool
    created_at: float
    revoked_at: float | None


class TokenDoc(TypedDict):
    _id: str  # SHA-256 of the token, hex
    user: str
    created_at: float
    revoked_at: float | None


class UserExists(PingoError):
    pass


class NoSuchUser(PingoError):
    pass


def users(store: Store) -> AsyncCollection:
    return store.db["users"]


def tokens(store: Store) -> AsyncCollection:
    return store.db["api_tokens"]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str) -> str | None:
    """Why ``name`` cannot be a user's name, or None if it can."""
    if not NAME.match(name):
        return f"{name!r} is not a valid user name ({NAME_RULE})"
    return None


async def add(store: Store, name: str, admin: bool, now: float) -> str:
    """A new user and their first token (returned: the only time it is seen)."""
    if (why := check_name(name)) is not None:
        raise ValueError(why)
    doc: UserDoc = {"_id": name, "admin": admin, "created_at": now, "revoked_at": None}
    try:
        await users(store).insert_one(dict(doc))
    except DuplicateKeyError:
        raise UserExists(name) from None
    return await issue_token(store, name, now)


async def issue_token(store: Store, name: str, now: float) -> str:
    """Another token for an existing, not revoked user."""
    user = await get(store, name)
    if user is None or not user.active:
        raise NoSuchUser(name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    doc: TokenDoc = {"_id": digest(token), "user": name, "created_at": now, "revoked_at": None}
    await tokens(store).insert_one(dict(doc))
    return token


async def get(store: Store, name: str) -> UserRecord | None:
    doc = await users(store).find_one({"_id": name})
    return UserRecord.of(doc) if doc is not None else None


async def all_users(store: Store) -> list[UserRecord]:
    """Every user, by name (a team's worth: read whole)."""
    return [UserRecord.of(d) async for d in users(store).find({}).sort("_id", 1)]


async def revoke(store: Store, name: str, now: float) -> bool:
    """Revoke a user and so every token of theirs; False if no such user (or already revoked)."""
    done = await users(store).update_one({"_id": name, "revoked_at": None}, {"$set": {"revoked_at": now}})
    return done.modified_count == 1


async def any_active(store: Store) -> bool:
    """Whether at least one user may sign in (what turns authentication on by default)."""
    return await users(store).find_one({"revoked_at": None}, {"_id": 1}) is not None


async def holder(store: Store, token: str) -> UserRecord | None:
    """The user a token authenticates, or None (unknown, revoked, or its user revoked)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    found: dict[str, Any] | None = await tokens(store).find_one({"_id": digest(token)})
    if found is None or found.get("revoked_at") is not None:
        return None
    user = await get(store, found["user"])
    if user is None or not user.active:
        return None
    return user
