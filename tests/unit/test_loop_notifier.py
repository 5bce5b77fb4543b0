"""The job runner's notifications on its loop (``shared.executors.loop_notifier``), against
a real HTTP server: a call is made over a kept connection, whatever form the answer's body
takes, and a connection the server closed meanwhile costs no notification."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from shared.executors.loop_notifier import LoopNotifier
from tests.support.net import free_port


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[tuple[str, str, int]]]]:
    """A callback server: what it was called with (the path's job and status, the peer's port)."""
    calls: list[tuple[str, str, int]] = []

    async def callback(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername")[1] if request.transport else 0
        calls.append((request.query["jobId"], request.query["status"], peer))
        if request.match_info["form"] == "chunked":
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            await response.write(b"o")
            await response.write(b"k")
            await response.write_eof()
            return response
        if request.match_info["form"] == "close":
            return web.Response(text="ok", headers={"Connection": "close"})
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/callback/{form}", callback)
    runner = web.AppRunner(app, keepalive_timeout=0.2)  # an idle connection is closed soon
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", calls
    finally:
        await runner.cleanup()


async def test_notifications_share_one_kept_connection_whatever_the_answers_body(server) -> None:
    base, calls = server
    notifier = LoopNotifier()
    for form, job in (("plain", "j1"), ("chunked", "j2"), ("plain", "j3")):
        await notifier.notify(f"{base}/callback/{form}?secret=s&jobId=$jobId&status=$status", job, "SUCCEEDED")
    assert [(job, status) for job, status, _ in calls] == [
        ("j1", "SUCCEEDED"),
        ("j2", "SUCCEEDED"),
        ("j3", "SUCCEEDED"),
    ]
    assert len({peer for _, _, peer in calls}) == 1  # one connection for the three
    notifier.close()


async def test_a_connection_the_server_closes_is_not_reused_and_costs_no_notification(server) -> None:
    base, calls = server
    notifier = LoopNotifier()
    await notifier.notify(f"{base}/callback/close?jobId=$jobId&status=$status", "j1", "RUNNING")
    await notifier.notify(f"{base}/callback/plain?jobId=$jobId&status=$status", "j2", "FAILED")
    assert [(job, status) for job, status, _ in calls] == [("j1", "RUNNING"), ("j2", "FAILED")]
    assert calls[0][2] != calls[1][2]
    notifier.close()


async def test_a_kept_connection_the_server_closed_while_idle_is_replaced_at_once(server) -> None:
    base, calls = server
    notifier = LoopNotifier()
    url = f"{base}/callback/plain?jobId=$jobId&status=$status"
    await notifier.notify(url, "j1", "SUCCEEDED")
    await asyncio.sleep(0.6)  # past the server's keep-alive: it closed the connection
    await notifier.notify(url, "j2", "SUCCEEDED")
    assert [job for job, _, _ in calls] == ["j1", "j2"] and calls[0][2] != calls[1][2]
    notifier.close()
