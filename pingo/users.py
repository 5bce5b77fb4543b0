"""``pingo users add|list|revoke|token``: the operator's commands for users and their tokens.

They write the store directly, as the services read it (PINGO_MONGO_URL, or the embedded
store of PINGO_DATA_DIR): they are run where Pingo runs (``kubectl exec`` into a pod on a
cluster), not through the gateway, so that the first admin needs no token to be made.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from shared.config import Settings
    from shared.store.client import Store


def fail(message: str) -> NoReturn:
    print(f"pingo users: {message}", file=sys.stderr)
    raise SystemExit(1)


@contextlib.asynccontextmanager
async def store_of(settings: Settings) -> AsyncIterator[Store]:
    from shared.store.client import UNREACHABLE
    from shared.store.embedded import store_for

    try:
        async with store_for(settings) as store:
            yield store
    except UNREACHABLE as exc:
        fail(f"cannot reach the store ({exc})")


def show_token(name: str, token: str) -> None:
    print(token)
    print(
        f"the token of {name}: shown this once, only its digest is kept. "
        "Give it to them for PINGO_TOKEN (or ~/.config/pingo/token, mode 0600).",
        file=sys.stderr,
    )


def authentication_turned_on(settings: Settings) -> str:
    """What the first active user changes (docs/users.md, "Turning it on"): said when it
    happens, since every client without a token is refused from then on."""
    if settings.auth == "off":
        return "the first user: authentication stays off here (PINGO_AUTH=off), tokens are not asked for"
    if settings.auth == "required" or settings.oidc_issuer:
        return "the first user: authentication was already on (PINGO_AUTH=required or an OIDC issuer)"
    return (
        "the first user: authentication is now ON, and stays on while any user is active. Every "
        "request (CLI, web page, API) needs a token from now on, within seconds; only PINGO_AUTH=off "
        "(one person on one machine) turns it off"
    )


async def run(args: argparse.Namespace) -> int:
    from shared.config import Settings
    from shared.store import users

    now = time.time()
    settings = Settings()
    async with store_of(settings) as store:
        if args.users_command == "add":
            first = not await users.any_active(store)
            try:
                token = await users.add(store, args.name, args.admin, now)
            except ValueError as exc:
                fail(str(exc))
            except users.UserExists:
                fail(f"user {args.name!r} exists (pingo users token {args.name} makes another token)")
            show_token(args.name, token)
            if first:
                print(authentication_turned_on(settings), file=sys.stderr)
        elif args.users_command == "token":
            try:
                token = await users.issue_token(store, args.name, now)
            except users.NoSuchUser:
                fail(f"no user {args.name!r} (or revoked)")
            show_token(args.name, token)
        elif args.users_command == "revoke":
            if not await users.revoke(store, args.name, now):
                fail(f"no user {args.name!r} (or already revoked)")
            print(f"revoked {args.name}: every token of theirs stops working within seconds", file=sys.stderr)
        else:
            found = await users.all_users(store)
            if args.json:
                print(json.dumps([
                    {"name": u.name, "admin": u.admin, "created_at": u.created_at, "revoked_at": u.revoked_at}
                    for u in found
                ]))  # fmt: skip
            elif not found:
                print("no users: authentication is off while there are none (PINGO_AUTH=auto)", file=sys.stderr)
            for u in [] if args.json else found:
                role = "admin" if u.admin else "user"
                revoked = u.revoked_at
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(revoked)) if revoked else ""
                print(f"{u.name:<32} {role:<5} {'revoked ' + when if revoked else 'active'}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    u = sub.add_parser("users", help="add, list and revoke users and their API tokens (run where Pingo runs)")
    verbs = u.add_subparsers(dest="users_command", required=True)
    a = verbs.add_parser("add", help="a new user; prints their token once")
    a.add_argument("name", help="lower-case letters, digits, _ and -; at most 32 (a Hadoop user name)")
    a.add_argument("--admin", action="store_true", help="may see and kill every user's workflows")
    t = verbs.add_parser("token", help="another token for a user; prints it once")
    t.add_argument("name")
    r = verbs.add_parser("revoke", help="a user and all their tokens stop working")
    r.add_argument("name")
    ls = verbs.add_parser("list", help="every user: role, active or revoked")
    ls.add_argument("--json", action="store_true", help="print the raw JSON")
    u.set_defaults(run=run)
