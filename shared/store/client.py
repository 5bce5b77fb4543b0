"""The MongoDB connection (PyMongo's async API) and the indexes every hot query uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from pymongo import ASCENDING, AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import ConnectionFailure

from shared.metrics import StoreLatency

# What ``connect`` raises while the server cannot be reached (down, restarting, no
# primary): worth waiting for, unlike a bad URL or refused credentials.
UNREACHABLE: tuple[type[BaseException], ...] = (ConnectionFailure, OSError)

# Documents per insert command. nx-27017 serves one command at a time: a big workflow's
# documents go in several short commands, and other requests are answered between them
# (docs/performance.md, "A big workflow").
INSERT_CHUNK = 250

# nx-27017 serves an equality on a field from a single-field index on it, but not always
# from a compound index that starts with it (500 ms against 18 ms for one workflow's
# actions among 100 k; benchmarks/history.py): so the fields asked by equality alone
# have an index of their own besides the compound ones (redundant on MongoDB, and cheap).
INDEXES: dict[str, list[tuple[list[tuple[str, int]], dict]]] = {
    "datasets": [
        ([("hash", ASCENDING)], {"unique": True}),
        ([("state", ASCENDING)], {}),
        ([("state", ASCENDING), ("updated_at", ASCENDING)], {}),
        ([("updated_at", ASCENDING)], {}),  # GET /api/v1/datasets, most recently changed first
        # The expiry and retention sweeps of the dataset manager (docs/api.md, "Datasets by hand").
        ([("state", ASCENDING), ("expires_at", ASCENDING)], {}),
        ([("state", ASCENDING), ("last_used_at", ASCENDING)], {}),
    ],
    "actions": [
        # scraper (READY / stale PROCESSING), poller (SUBMITTED/RUNNING due), settle, window.
        ([("state", ASCENDING), ("updated_at", ASCENDING)], {}),
        ([("state", ASCENDING), ("next_poll_at", ASCENDING)], {}),
        # A workflow's actions, and those in one state (kill, settle): both index-served.
        ([("workflow_id", ASCENDING)], {}),
        ([("workflow_id", ASCENDING), ("state", ASCENDING)], {}),
        ([("created_at", ASCENDING)], {}),
        # The followers of a producer (docs/state-machines.md, "Following").
        ([("follows", ASCENDING)], {}),
        # The actions that computed or reused a dataset (GET /api/v1/datasets/{hash}). Not
        # ``claims``: nx-27017 answers an equality on an indexed array field with nothing.
        ([("hash", ASCENDING)], {}),
    ],
    "api_tokens": [([("user", ASCENDING)], {})],
    # One submission per user and Idempotency-Key, whichever replica answers (docs/api.md);
    # MongoDB removes expired keys itself (a TTL index), others are replaced when reused.
    "idempotency_keys": [
        ([("user", ASCENDING), ("key", ASCENDING)], {"unique": True}),
        ([("expires_at", ASCENDING)], {"expireAfterSeconds": 0}),
    ],
    "history_buckets": [([("res", ASCENDING), ("start", ASCENDING)], {})],
    "history_buckets_by_user": [([("res", ASCENDING), ("start", ASCENDING)], {}), ([("res", ASCENDING)], {})],
    "workflows": [
        ([("state", ASCENDING), ("created_at", ASCENDING)], {}),
        # A user's workflows, newest first (docs/users.md).
        ([("owner", ASCENDING)], {}),
        ([("owner", ASCENDING), ("created_at", ASCENDING)], {}),
        ([("created_at", ASCENDING)], {}),
        # Ended workflows whose webhooks are not yet in the outbox (docs/webhooks.md).
        ([("webhooks_due", ASCENDING)], {}),
        # The earlier workflows of a name: what a computed action is compared with (docs/planning.md).
        ([("name", ASCENDING)], {}),
        ([("name", ASCENDING), ("created_at", ASCENDING)], {}),
    ],
    "webhook_deliveries": [
        ([("state", ASCENDING), ("next_try_at", ASCENDING)], {}),
        ([("workflow_id", ASCENDING)], {}),
    ],
}


@dataclass
class Store:
    client: AsyncMongoClient
    db: AsyncDatabase
    # The collections every walk of a workflow writes, made once: read as plain attributes.
    workflows: AsyncCollection = field(init=False)
    actions: AsyncCollection = field(init=False)
    datasets: AsyncCollection = field(init=False)
    locks: AsyncCollection = field(init=False)
    budget: AsyncCollection = field(init=False)

    def __post_init__(self) -> None:
        self.workflows, self.actions, self.datasets = self.db["workflows"], self.db["actions"], self.db["datasets"]
        self.locks, self.budget = self.db["locks"], self.db["budget"]

    async def ensure_indexes(self) -> None:
        for name, specs in INDEXES.items():
            for keys, opts in specs:
                await self.db[name].create_index(keys, **opts)

    async def close(self) -> None:
        await self.client.close()


async def connect(url: str, db_name: str, *, indexes: bool = True, timeout: float = 10.0) -> Store:
    """A connected store. Raises one of ``UNREACHABLE`` (after the server selection
    timeout, ``timeout`` seconds) if the server cannot be reached; the caller decides
    whether to wait. Every later operation waits as long for an unreachable server."""
    client: AsyncMongoClient = AsyncMongoClient(
        url, serverSelectionTimeoutMS=int(timeout * 1000), tz_aware=True, event_listeners=[StoreLatency()]
    )
    try:
        await client.admin.command("ping")
        store = Store(client=client, db=client[db_name])
        if indexes:
            await store.ensure_indexes()
    except BaseException:
        await client.close()
        raise
    return store
