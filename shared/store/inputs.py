"""The last fingerprint seen of each external input (docs/planning.md, "External inputs"):
what a dry run compares an input with, to say how it changed since it was last used.

One document per input path of the catalogue's storage, ``_id`` the path: read and
written by equality on ``_id``.
"""

from __future__ import annotations

import time
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from shared.store.client import Store


def _inputs(store: Store) -> AsyncCollection:
    return store.db["inputs"]


async def last_seen(store: Store, paths: list[str]) -> dict[str, dict[str, Any]]:
    """The fingerprint last recorded for each of ``paths`` that has one."""
    out: dict[str, dict[str, Any]] = {}
    for path in dict.fromkeys(paths):  # a workflow names few inputs: one read each
        doc = await _inputs(store).find_one({"_id": path})
        if doc is not None:
            out[path] = doc["print"]
    return out


async def remember(store: Store, prints: dict[str, dict[str, Any]]) -> None:
    """Record the fingerprint each input path had when a workflow was planned on it."""
    now = time.time()
    for path, print_ in prints.items():
        await _inputs(store).update_one({"_id": path}, {"$set": {"print": print_, "at": now}}, upsert=True)
