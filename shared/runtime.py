"""What every service runs on: settings, store, bus, storage and executor, opened once.

``python -m services.<name>`` and ``pingo serve <name>`` call ``run_service``; ``pingo dev``
opens one ``Context`` and starts all five services on it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiohttp import web
from pydantic import ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential_jitter

from shared import logs
from shared.bus import Bus, make_bus
from shared.bus.base import BrokerUnreachable
from shared.config import Settings
from shared.errors import CannotStart
from shared.executors.base import Executor
from shared.executors.factory import make_executor
from shared.lifecycle.ending import Outcomes
from shared.lifecycle.moves import Mover
from shared.logs import configure_logging
from shared.ops import OpsServer
from shared.storage import Storage, make_storage
from shared.storage.identity import StorageIdentity
from shared.store import Store, budget, catalogue, connect
from shared.store.catalogue import StorageMismatch, bind_storage
from shared.store.client import UNREACHABLE as STORE_UNREACHABLE
from shared.store.embedded import EmbeddedMongo

log = logging.getLogger(__name__)
T = TypeVar("T")
# Backoff between attempts to reach the store or the broker at startup, seconds.
REACH_INITIAL, REACH_MAX = 0.5, 5.0


def redact(url: str | None) -> str:
    """A URL fit for a log line: its password replaced."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url or "")


def catalogue_name(settings: Settings) -> str:
    """The catalogue the settings name, as a message shows it."""
    if settings.mongo_url is None:
        return f"the catalogue of PINGO_DATA_DIR={settings.data_dir.resolve()}"
    return f"the catalogue in database {settings.mongo_db} of {redact(settings.mongo_url)}"


async def until_reachable(
    what: str, attempt: Callable[[], Awaitable[T]], transient: tuple[type[BaseException], ...]
) -> T:
    """``attempt()`` until it does not raise one of ``transient`` (the server is down or
    booting), with exponential backoff and one log line per failed attempt. A service
    started before its store or broker stays up and starts when they appear."""

    def waiting(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "waiting for %s (%s: %s); attempt %d, next in %.1f s",
            what,
            type(exc).__name__,
            str(exc)[:200],
            state.attempt_number,
            state.next_action.sleep if state.next_action else 0.0,
        )

    tries = 0
    async for tried in AsyncRetrying(
        retry=retry_if_exception_type(transient),
        wait=wait_exponential_jitter(multiplier=REACH_INITIAL, max=REACH_MAX, jitter=REACH_INITIAL),
        before_sleep=waiting,
        reraise=True,
    ):
        tries = tried.retry_state.attempt_number
        with tried:
            result = await attempt()
    if tries > 1:
        log.warning("%s reached after %d attempts", what, tries)
    return result


@dataclass
class Context:
    settings: Settings
    store: Store
    bus: Bus
    storage: Storage
    executor: Executor
    embedded: EmbeddedMongo | None = None
    closers: list = field(default_factory=list)
    # What callback tokens are signed with (``shared.callback_tokens``): PINGO_CALLBACK_KEY,
    # else the catalogue's own; empty: URLs carry the actions' stored secrets.
    callback_key: bytes = b""

    def mover(self, by: str) -> Mover:
        """The guarded writer with its effects, publishing as service ``by``."""
        return Mover(self.store, self.bus, by)

    def outcomes(self, by: str) -> Outcomes:
        return Outcomes(
            self.store, self.storage, self.mover(by), self.executor, by, self.settings.stale_after,
            self.settings.takeover_retries, self.settings.input_fingerprint == "checksum",
            self.settings.input_max_files,
        )  # fmt: skip

    @classmethod
    async def open(cls, settings: Settings) -> Context:
        """Connect to the store, then the broker, waiting (with backoff, logging what it
        waits for) while either cannot be reached yet."""
        embedded = None
        store: Store | None = None
        try:
            url = settings.mongo_url
            if url is None:
                embedded = EmbeddedMongo(settings.data_dir)
                url = await embedded.start()
            store = await until_reachable(
                f"the store at {redact(url)}",
                lambda: connect(url, settings.mongo_db, timeout=settings.store_timeout),
                STORE_UNREACHABLE,
            )
            try:
                await bind_storage(store, StorageIdentity.of(settings), catalogue_name(settings))
            except StorageMismatch as exc:
                raise CannotStart(str(exc)) from None
            await budget.document(store)
            key = settings.callback_key
            callback_key = key.get_secret_value().encode() if key is not None else await catalogue.callback_key(store)
            bus = make_bus(settings)
            await until_reachable(f"the broker at {redact(settings.amqp_url)}", bus.start, (BrokerUnreachable,))
        except BaseException:
            if store is not None:
                await store.close()
            if embedded is not None:
                embedded.stop()
            raise
        return cls(
            settings, store, bus, make_storage(settings), make_executor(settings), embedded, callback_key=callback_key
        )

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


@asynccontextmanager
async def running(ctx: Context, services_of: Callable[[Context], list[Service]]) -> AsyncIterator[list[Service]]:
    """The services ``services_of(ctx)``, started in order; on leaving (or if one fails to
    start) each is stopped, in reverse order, and ``ctx`` closed. ``pingo dev``, ``pingo
    serve``, ``python -m services.<name>``, the demo and the tests all start services so."""
    try:
        services = services_of(ctx)
        if ctx.settings.metrics_port is not None:
            # Last to start, first to stop: ready means every service of the process is up.
            services.append(OpsServer(ctx.store, ctx.bus, ctx.settings.metrics_host, ctx.settings.metrics_port))
        try:
            for s in services:
                # The tasks a service starts inherit its name for their log lines.
                with logs.serving(s.name):
                    await s.start()
                    log.info("%s started", s.name)
            yield services
        finally:
            for s in reversed(services):
                await s.stop()
    finally:
        await ctx.close()


async def serve(services_of, settings: Settings | None = None) -> None:
    """Open a context, start the given services on it and run until SIGINT/SIGTERM."""
    settings = settings or Settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Opening may wait long for the store and the broker: a signal meanwhile ends it cleanly.
    opening = asyncio.create_task(Context.open(settings))
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({opening, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not opening.done():
        opening.cancel()
        result = (await asyncio.gather(opening, return_exceptions=True))[0]
        if isinstance(result, Context):
            await result.close()
        log.info("stopped before the store and the broker could be reached")
        return
    try:
        async with running(opening.result(), services_of):
            await stop.wait()
    except CannotStart as exc:  # opening (the catalogue's storage) or a service's start refused
        log.error("not starting: %s", exc)
        raise SystemExit(2) from None


def load_settings(**overrides: Any) -> Settings:
    """The settings from ``PINGO_*`` variables (and ``overrides``); a bad value stops the
    process with exit status 2 and one line per wrong setting, naming its variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        for error in exc.errors():
            where = "PINGO_" + "__".join(str(p) for p in error["loc"]).upper() if error["loc"] else "settings"
            print(f"pingo: {where}={error['input']!r}: {error['msg']}", file=sys.stderr)
        raise SystemExit(2) from None


def run_service(factory, argv: list[str] | None = None) -> None:
    """``python -m services.<name>``: run one service until SIGINT/SIGTERM. It takes no
    arguments (``--help`` says so and exits); every setting is a ``PINGO_*`` variable."""
    import argparse

    argparse.ArgumentParser(
        prog=f"python -m services.{factory.name}",
        description=f"Run Pingo's {factory.name} service until SIGINT/SIGTERM. Every setting is a PINGO_* "
        "environment variable (shared/config.py).",
    ).parse_args(argv)
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format, factory.name)
    asyncio.run(serve(lambda ctx: [factory(ctx)], settings))
