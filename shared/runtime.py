"""What every service runs on: settings, store, bus, storage and executor, opened once.

``python -m services.<name>`` and ``pingo serve <name>`` call ``run_service``; ``pingo dev``
opens one ``Context`` and starts all five services on it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from shared.bus import Bus, make_bus
from shared.config import Settings
from shared.executors.base import Executor
from shared.executors.factory import make_executor
from shared.outcomes import Outcomes
from shared.storage import Storage, make_storage
from shared.store import Store, connect
from shared.store.embedded import EmbeddedMongo

log = logging.getLogger(__name__)


@dataclass
class Context:
    settings: Settings
    store: Store
    bus: Bus
    storage: Storage
    executor: Executor
    embedded: EmbeddedMongo | None = None
    closers: list = field(default_factory=list)

    def outcomes(self, by: str) -> Outcomes:
        return Outcomes(self.store, self.storage, self.bus, self.executor, by)

    @classmethod
    async def open(cls, settings: Settings) -> Context:
        embedded = None
        url = settings.mongo_url
        if url is None:
            embedded = EmbeddedMongo(settings.data_dir, settings.embedded_mongo_port)
            url = await embedded.start()
        store = await connect(url, settings.mongo_db)
        bus = make_bus(settings)
        await bus.start()
        return cls(settings, store, bus, make_storage(settings), make_executor(settings), embedded)

    async def close(self) -> None:
        for closer in reversed(self.closers):
            await closer()
        await self.executor.close()
        await self.storage.close()
        await self.bus.close()
        await self.store.close()
        if self.embedded is not None:
            self.embedded.stop()


async def health(_: web.Request) -> web.Response:
    """``GET /healthz`` of the services that serve HTTP."""
    return web.json_response({"ok": True})


class Service(Protocol):
    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aio_pika").setLevel(logging.WARNING)
    logging.getLogger("aiormq").setLevel(logging.WARNING)


async def serve(services_of, settings: Settings | None = None) -> None:
    """Open a context, start the given services on it and run until SIGINT/SIGTERM."""
    settings = settings or Settings()
    ctx = await Context.open(settings)
    services = services_of(ctx)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        for s in services:
            await s.start()
            log.info("%s started", s.name)
        await stop.wait()
    finally:
        for s in reversed(services):
            await s.stop()
        await ctx.close()


def run_service(factory) -> None:
    configure_logging()
    asyncio.run(serve(lambda ctx: [factory(ctx)]))
