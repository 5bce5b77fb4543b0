"""The job runner's notices gathered per callback service (shared/executors/notices.py):
a lone one leaves at once as a GET; those that come while one is in flight go together as
one POST /callback-batch; a service without that endpoint is sent GETs, remembered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from shared.executors import local_job
from shared.executors.notices import Notices
from tests.support.net import free_port


@dataclass
class Callback:
    """A small callback server: it records what it is asked, and holds each GET until
    ``release`` is set (so the next notices come while one is in flight)."""

    base: str
    batch_status: int  # what it answers a batch: 200 takes it
    gets: list[str] = field(default_factory=list)
    posts: list[list[str]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    refused: int = 0

    async def on_get(self, request: web.Request) -> web.Response:
        self.gets.append(request.path_qs)
        await self.release.wait()
        return web.json_response({"ok": True})

    async def on_batch(self, request: web.Request) -> web.Response:
        if self.batch_status != 200:
            self.refused += 1
            return web.json_response({"status": self.batch_status}, status=self.batch_status)
        entries = json.loads(await request.read())
        self.posts.append(entries)
        return web.json_response({"ok": True, "results": [200] * len(entries)})


async def serve(batch_status: int) -> AsyncIterator[Callback]:
    port = free_port()
    server = Callback(f"http://127.0.0.1:{port}", batch_status)
    app = web.Application()
    app.router.add_get("/callback/{action_id}", server.on_get)
    app.router.add_post("/callback-batch", server.on_batch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


@pytest.fixture
async def batching() -> AsyncIterator[Callback]:
    async for server in serve(200):
        yield server


@pytest.fixture
async def older() -> AsyncIterator[Callback]:
    async for server in serve(404):
        yield server


@pytest.fixture
async def refusing() -> AsyncIterator[Callback]:
    async for server in serve(413):  # a proxy's body limit, say
        yield server


def url(server: Callback, action_id: str) -> str:
    token = action_id.replace(" ", "-")
    return f"{server.base}/callback/{action_id}?secret=t-{token}&jobId=$jobId&status=$status"


async def in_flight(server: Callback, gets: int) -> None:
    while len(server.gets) < gets:
        await asyncio.sleep(0.01)


async def test_notices_that_come_while_one_is_in_flight_go_together_in_one_batch(batching: Callback) -> None:
    notices = Notices()
    first = asyncio.create_task(notices.send(url(batching, "wf.1"), "j1", "SUCCEEDED"))
    await in_flight(batching, 1)  # alone: a GET at once, not waiting for company
    assert batching.gets == ["/callback/wf.1?secret=t-wf.1&jobId=j1&status=SUCCEEDED"]
    rest = [
        asyncio.create_task(notices.send(url(batching, f"wf {i}"), f"j{i}", "SUCCEEDED" if i % 2 else "RUNNING"))
        for i in range(2, 6)
    ]
    await asyncio.sleep(0.05)
    assert batching.posts == []  # they wait for the call in flight
    batching.release.set()
    await asyncio.gather(first, *rest)
    # The action id percent-encoded, as its GET would have asked.
    assert batching.posts == [
        [
            f"/callback/wf%20{i}?secret=t-wf-{i}&jobId=j{i}&status={'SUCCEEDED' if i % 2 else 'RUNNING'}"
            for i in range(2, 6)
        ]
    ]
    assert len(batching.gets) == 1


async def test_a_service_without_the_batch_endpoint_is_sent_gets_from_then_on(older: Callback) -> None:
    older.release.set()
    targets = [local_job.notice_target(url(older, f"wf.{i}"), f"j{i}", "SUCCEEDED") for i in range(3)]
    await asyncio.to_thread(local_job.notify_all, targets)
    assert older.refused == 1 and len(older.gets) == 3
    await asyncio.to_thread(local_job.notify_all, targets[:2])
    assert older.refused == 1 and len(older.gets) == 5  # remembered: no second try of the batch


async def test_a_batch_refused_whole_is_sent_as_gets_and_batches_are_tried_again(refusing: Callback) -> None:
    refusing.release.set()
    targets = [local_job.notice_target(url(refusing, f"wf.{i}"), f"j{i}", "SUCCEEDED") for i in range(3)]
    await asyncio.to_thread(local_job.notify_all, targets)
    await asyncio.to_thread(local_job.notify_all, targets[:2])
    assert refusing.refused == 2 and len(refusing.gets) == 5
