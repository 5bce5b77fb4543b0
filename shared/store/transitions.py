"""The one way a document changes state: a guarded ``find_one_and_update``.

The filter names every state the table allows the move from (or the caller's narrower
list); the update sets the new state and appends ``{state, at, by}`` to the document's
history in the same write. ``None`` back means someone else moved it first: normal.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pymongo import ReturnDocument, UpdateOne
from pymongo.asynchronous.collection import AsyncCollection

from shared import logs
from shared.metrics import TRANSITIONS
from shared.states import IllegalTransition, check, sources_for

log = logging.getLogger(__name__)


async def transition(
    coll: AsyncCollection,
    table: dict,
    doc_id: Any,
    target: str,
    *,
    by: str,
    sources: list[str] | None = None,
    where: dict[str, Any] | None = None,
    set: dict[str, Any] | None = None,
    unset: list[str] | None = None,
    add_to_set: dict[str, list[Any]] | None = None,
    pull: dict[str, list[Any]] | None = None,
    inc: dict[str, float] | None = None,
    push: dict[str, Any] | None = None,
    max: dict[str, float] | None = None,
    note: str | None = None,
) -> dict[str, Any] | None:
    allowed = sources_for(table, target)
    if not allowed:
        raise IllegalTransition(f"no state may move to {target!r}")
    for s in sources or allowed:
        check(table, s, target)
    now = time.time()
    entry: dict[str, Any] = {"state": str(target), "at": now, "by": by}
    if note:
        entry["note"] = note
    update: dict[str, Any] = {
        "$set": {"state": str(target), "updated_at": now, **(set or {})},
        "$push": {"history": entry, **(push or {})},
    }
    if unset:
        update["$unset"] = dict.fromkeys(unset, "")
    if add_to_set:
        update["$addToSet"] = {k: {"$each": v} for k, v in add_to_set.items()}
    if pull:
        update["$pull"] = {k: {"$in": v} for k, v in pull.items()}
    if inc:
        update["$inc"] = inc
    if max:
        update["$max"] = max
    query = {"_id": doc_id, "state": {"$in": [str(s) for s in (sources or allowed)]}, **(where or {})}
    doc = decode(await coll.find_one_and_update(query, update, return_document=ReturnDocument.AFTER))
    if doc is not None:
        # The state moved from is the history entry before the one just written.
        history = doc.get("history") or []
        source = history[-2].get("state", "") if len(history) >= 2 else ""
        TRANSITIONS.labels(coll.name, source, str(target)).inc()
        with logs.about(*subject(coll.name, doc)):
            log.debug("%s %s: %s -> %s by %s%s", coll.name, doc_id, source, target, by, f" ({note})" if note else "")
    return doc


def subject(collection: str, doc: dict[str, Any]) -> tuple[Any, Any]:
    """The workflow and action a document of ``collection`` is about, for log lines."""
    if collection == "workflows":
        return doc.get("_id"), None
    if collection == "actions":
        return doc.get("workflow_id"), doc.get("_id")
    return None, None


async def transition_many(
    coll: AsyncCollection,
    table: dict,
    where: dict[str, Any],
    target: str,
    *,
    by: str,
    sources: list[str],
    set: dict[str, Any] | None = None,
    pull: dict[str, list[Any]] | None = None,
    note: str | None = None,
) -> int:
    """The bulk form of ``transition``: every document matching ``where`` in one of
    ``sources`` moves to ``target``, with its history entry, in one write per source
    state. Each document's move is still atomic and guarded by its state; the count of
    documents moved comes back. Callers that need the moved documents tag them in
    ``set`` (a batch token) and read them back by it."""
    for s in sources:
        check(table, s, target)
    now = time.time()
    entry: dict[str, Any] = {"state": str(target), "at": now, "by": by}
    if note:
        entry["note"] = note
    update: dict[str, Any] = {
        "$set": {"state": str(target), "updated_at": now, **(set or {})},
        "$push": {"history": entry},
    }
    if pull:
        update["$pull"] = {k: {"$in": v} for k, v in pull.items()}
    moved = 0
    # One equality on state per write, not $in: equality is index-served on every store we run on.
    for s in sources:
        res = await coll.update_many({**where, "state": str(s)}, update)
        moved += res.modified_count
        if res.modified_count:
            TRANSITIONS.labels(coll.name, str(s), str(target)).inc(res.modified_count)
    return moved


async def transition_each(
    coll: AsyncCollection,
    table: dict,
    moves: list[tuple[Any, dict[str, Any], dict[str, Any]]],
    target: str,
    *,
    by: str,
    source: str,
    token: str,
    note: str | None = None,
    more: dict[Any, dict[str, dict[str, Any]]] | None = None,
) -> int:
    """Many ``transition``s from one ``source`` state, each with its own guard and fields
    (``moves``: ``_id``, ``where``, ``set``), in one write: every document's move is atomic
    and guarded as ``transition``'s is. Each moved document is tagged with ``token``
    (``move_batch``), by which the caller learns which moved; the count comes back.
    ``more``: a document's other update operators (``$push``, ``$pull``, ``$inc``,
    ``$unset``), by ``_id``, beside the state's."""
    if not moves:
        return 0
    check(table, source, target)
    now = time.time()
    entry: dict[str, Any] = {"state": str(target), "at": now, "by": by}
    if note:
        entry["note"] = note

    def update(doc_id: Any, fields: dict[str, Any]) -> dict[str, Any]:
        ops: dict[str, dict[str, Any]] = {
            "$set": {"state": str(target), "updated_at": now, **fields, "move_batch": token},
            "$push": {"history": entry},
        }
        for op, values in ((more or {}).get(doc_id) or {}).items():
            ops[op] = {**ops.get(op, {}), **values}
        return ops

    ops = [
        # The state as ``transition`` names it: nx-27017 answers a ``$ne`` on a field a
        # document lacks (``kill_requested``) only beside an ``$in``, not an equality.
        UpdateOne({"_id": doc_id, "state": {"$in": [str(source)]}, **where}, update(doc_id, fields))
        for doc_id, where, fields in moves
    ]
    moved = (await coll.bulk_write(ops, ordered=False)).modified_count
    if moved:
        TRANSITIONS.labels(coll.name, str(source), str(target)).inc(moved)
    return moved


def history_entry(state: str, by: str, note: str | None = None, at: float | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"state": str(state), "at": at if at is not None else time.time(), "by": by}
    if note:
        entry["note"] = note
    return entry


# The lists of subdocuments that writers append to with ``$push``.
PUSHED = ("history", "attempt_log")


def decode(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    """Read a document's history (and an action's attempt log) back as dicts.

    Some wire-compatible servers (nx-27017) keep ``$push``ed subdocuments as JSON
    text; real MongoDB keeps them as documents. Both read back the same here.
    """
    if doc is None:
        return None
    for key in PUSHED:
        items = doc.get(key)
        if items and any(isinstance(h, str) for h in items):
            doc[key] = [json.loads(h) if isinstance(h, str) else h for h in items]
    return doc
