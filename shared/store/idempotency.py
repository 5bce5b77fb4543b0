"""Idempotency keys of submissions: one workflow per (user, key), whichever gateway replica
answers (docs/api.md, "Retrying a submission").

A key is taken by inserting its document: the unique index on (user, key) lets exactly one
insert win, atomically, on MongoDB and nx-27017 alike, so two replicas given the same key
at once never both plan a workflow. The winner holds it (``token``) while it plans the
workflow whose id it recorded (``workflow_id``), then stores the answer it gave. A key
whose planner ended without a workflow is released (deleted) so that a retry can take it.

``user`` is the owner's name, or "" while users are off: nx-27017 (SQLite) counts every
null as distinct in a unique index, so a null would not be unique there.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from bson import Binary
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from shared.store.client import Store
from shared.store.records import KeyRecord

PENDING, DONE = "pending", "done"


def keys(store: Store) -> AsyncCollection:
    """``{user, key, fingerprint, token, workflow_id, state, created_at, taken_at, expires_at, answer}``."""
    return store.db["idempotency_keys"]


def user_of(owner: str | None) -> str:
    return owner or ""


@dataclass(frozen=True)
class Held:
    """This request holds the key: it plans ``workflow_id``."""

    user: str
    key: str
    token: str
    workflow_id: str


async def take(
    store: Store, owner: str | None, key: str, fingerprint: str, workflow_id: str, now: float, retention: float
) -> Held | KeyRecord:
    """Take ``key`` for ``owner``'s submission of ``workflow_id``: ``Held`` if taken, else
    the document of whoever took it first (within ``retention`` seconds; an older one is
    replaced, guarded by its token, so that two late retries still take it only once)."""
    user = user_of(owner)
    token = uuid.uuid4().hex
    doc = {
        "user": user,
        "key": key,
        "fingerprint": fingerprint,
        "token": token,
        "workflow_id": workflow_id,
        "state": PENDING,
        "created_at": now,
        "taken_at": now,  # when its holder took it (a take-over renews it)
        # A date, so that MongoDB's TTL index removes it after the retention.
        "expires_at": datetime.fromtimestamp(now + retention, UTC),
    }
    while True:
        try:
            await keys(store).insert_one(dict(doc))
            return Held(user, key, token, workflow_id)
        except DuplicateKeyError:
            found = await keys(store).find_one({"user": user, "key": key})
        if found is None:
            continue  # released or expired between the two: take it again
        if float(found.get("created_at") or 0) + retention > now:
            return KeyRecord.of(found)
        await keys(store).delete_one({"_id": found["_id"], "token": found.get("token")})


async def take_over(store: Store, found: KeyRecord, workflow_id: str, now: float) -> Held | None:
    """Take a key whose holder ended without a workflow (it died before writing one, or its
    workflow was undone): guarded by the token it had, so only one retry takes it."""
    token = uuid.uuid4().hex
    won = await keys(store).update_one(
        {"_id": found.id, "token": found.token, "state": PENDING},
        {"$set": {"token": token, "workflow_id": workflow_id, "taken_at": now}},
    )
    return Held(found.user, found.key, token, workflow_id) if won.modified_count else None


def holder(found: KeyRecord) -> Held:
    """The holder of a key as its record names it (to record the answer for it)."""
    return Held(found.user, found.key, found.token or "", found.workflow_id)


async def answered(store: Store, held: Held, status: int, location: str, body: bytes | None) -> None:
    """Record the answer given for the key (``body`` compressed, or None when too large to keep)."""
    answer = {"status": status, "location": location, "body": Binary(body) if body is not None else None}
    await keys(store).update_one({"user": held.user, "key": held.key, "token": held.token},
                                 {"$set": {"state": DONE, "answer": answer}})  # fmt: skip


async def release(store: Store, held: Held) -> None:
    """Give the key back: this request made no workflow, a retry may."""
    await keys(store).delete_one({"user": held.user, "key": held.key, "token": held.token})
