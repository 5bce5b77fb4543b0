"""Counting the commands a client sends the store, as PyMongo's own command monitoring
sees them: a test that a step's cost does not grow with what it works on."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pymongo import AsyncMongoClient, monitoring

from shared.bus.memory import MemoryBus
from shared.config import Settings
from shared.executors.factory import make_executor
from shared.lifecycle.ending import Outcomes
from shared.lifecycle.moves import Mover
from shared.storage import make_storage
from shared.store.client import Store


class Commands(monitoring.CommandListener):
    """The commands a client sent the store."""

    def __init__(self) -> None:
        self.sent = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@dataclass
class Counted:
    commands: Commands
    store: Store
    outcomes: Outcomes


@contextlib.asynccontextmanager
async def counted_outcomes(settings: Settings, mongo_url: str, prefix: str) -> AsyncIterator[Counted]:
    """An ``Outcomes`` on a database of its own (dropped after), whose client's commands
    are counted."""
    commands = Commands()
    client: AsyncMongoClient = AsyncMongoClient(mongo_url, event_listeners=[commands])
    store = Store(client=client, db=client[f"{prefix}_{uuid.uuid4().hex[:8]}"])
    await store.ensure_indexes()
    executor = make_executor(settings)
    try:
        yield Counted(
            commands,
            store,
            Outcomes(store, make_storage(settings), Mover(store, MemoryBus(), "test"), executor, "test"),
        )
    finally:
        await executor.close()
        await client.drop_database(store.db.name)
        await client.close()
