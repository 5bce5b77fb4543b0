"""Fixtures over real components: nx-27017 through PyMongo, RabbitMQ at 127.0.0.1:5672,
the services in process (in-process bus) or as separate OS processes (RabbitMQ)."""

from __future__ import annotations

import asyncio
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pingo.dev import all_services
from shared.config import Settings
from shared.runtime import Context, running
from shared.store.client import Store, connect
from shared.store.embedded import EmbeddedMongo
from tests.support.brokers import SHARED_DECLARED, start_shared_broker
from tests.support.gates import Gate
from tests.support.system import AMQP_URL, DEFAULT_AMQP_URL, Api, Processes, make_settings


@pytest.fixture(scope="session")
def amqp_url() -> Iterator[str]:
    """The real RabbitMQ: the shared broker, started if nothing listens on 127.0.0.1:5672
    (tests/support/brokers.py); never skipped silently. What the session's tests declared
    there is deleted at its end."""
    if AMQP_URL == DEFAULT_AMQP_URL:
        try:
            start_shared_broker()
        except RuntimeError as exc:
            pytest.fail(f"no RabbitMQ on 127.0.0.1:5672, and a node of the tests' own did not start: {exc}")
    yield AMQP_URL
    try:
        asyncio.run(SHARED_DECLARED.forget(AMQP_URL))
    except Exception as exc:  # tidying only: the tests have passed or failed already
        warnings.warn(f"could not delete the tests' queues on the shared broker: {exc!r}", stacklevel=1)


@pytest.fixture(scope="session")
def mongo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real nx-27017 server (the MongoDB wire protocol over SQLite), reached through PyMongo:
    the one Pingo embeds (shared/store/embedded.py), on its private Unix socket."""
    if url := os.environ.get("PINGO_TEST_MONGO_URL"):
        yield url
        return
    server = EmbeddedMongo(tmp_path_factory.mktemp("nx-27017"))
    # Its own event loop, in a thread: none of the tests' loops is running yet.
    with ThreadPoolExecutor(1) as thread:
        try:
            url = thread.submit(asyncio.run, server.start(timeout=30)).result()
        except RuntimeError as exc:
            server.stop()
            pytest.fail(f"nx-27017 did not start: {exc}")
    yield url
    server.stop()


@pytest.fixture
async def store(mongo_url: str) -> AsyncIterator[Store]:
    """The store alone, on a database of the test's own (dropped after it): for tests of
    the store's functions, with no service running."""
    store = await connect(mongo_url, f"t_{uuid.uuid4().hex[:10]}")
    yield store
    await store.client.drop_database(store.db.name)
    await store.close()


@pytest.fixture
def settings(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str) -> Settings:
    """The test's settings; ``@pytest.mark.settings(name=value, ...)`` overrides some."""
    marker = request.node.get_closest_marker("settings")
    return make_settings(tmp_path, mongo_url, **(marker.kwargs if marker else {}))


@pytest.fixture
async def system(settings: Settings):
    """All five services in this process, on the in-process bus."""
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        api.ctx = ctx
        yield api
        await api.close()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    """A gate the test's synth jobs wait at (tests/support/gates.py), opened at its end
    whatever happened, so that no job it held waits on."""
    gate = Gate(tmp_path / "gate")
    yield gate
    gate.open()


@pytest.fixture
async def processes(settings: Settings, amqp_url: str, tmp_path: Path):
    settings = settings.model_copy(update={"amqp_url": amqp_url})
    (tmp_path / "logs").mkdir()
    system = Processes(settings, tmp_path / "logs")
    await system.start_all()
    yield system
    await system.stop_all()


@pytest.fixture(scope="session")
def _private_rabbit(tmp_path_factory: pytest.TempPathFactory):
    """The one private RabbitMQ node of the session, started by the first test that asks
    for ``rabbit_node`` (a boot costs 7-15 s, so it is not done per test)."""
    from tests.support.brokers import RabbitNode

    node = RabbitNode(tmp_path_factory.mktemp("rabbit"))
    yield node
    node.stop(kill=True)


@pytest.fixture
def rabbit_node(_private_rabbit):
    """A private RabbitMQ node (tests/support/brokers.py) that the test may stop, kill,
    freeze, wipe and start again; the shared broker on 5672 is never touched. Each test
    gets it running, on a virtual host of its own (``url`` names it), whatever the
    previous test left it in."""
    return _private_rabbit.fresh()


@pytest.fixture
async def notifications():
    """A real HTTP endpoint standing in for the callback service: the notifications it got."""
    from aiohttp import web

    got: list[dict[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        got.append(dict(request.query))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/callback/{action_id}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/callback/a?secret=s3cret&jobId=$jobId&status=$status", got
    await runner.cleanup()
