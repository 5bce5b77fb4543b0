"""Leases held in the ``locks`` collection: one document per lease, named by its ``_id``.

The decision service holds one (``decision``) so that one replica decides at a time
(docs/architecture.md, "Leases").
"""

from __future__ import annotations

import time

from pymongo.errors import DuplicateKeyError

from shared.store.client import Store


async def take(store: Store, name: str, owner: str, seconds: float) -> bool:
    """Take or renew the lease ``name`` for ``owner`` for ``seconds``: True if it is ours
    now (it was free, expired, or already ours), False if another holds it."""
    now = time.time()
    res = await store.locks.find_one_and_update(
        {"_id": name, "$or": [{"until": {"$lt": now}}, {"owner": owner}]},
        {"$set": {"owner": owner, "until": now + seconds}},
    )
    if res is not None:
        return True
    try:
        await store.locks.insert_one({"_id": name, "owner": owner, "until": now + seconds})
        return True
    except DuplicateKeyError:
        return False
