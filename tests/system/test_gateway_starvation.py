"""The gateway against clients that hold connections without asking anything, run as its own
OS process under a low open-file limit (``ulimit -n``), as an operator runs it: idle
connections beyond the limit, and one that sends its headers a byte at a time (slowloris).
It keeps answering, closes them after the header timeout, answers connections over its cap
with a 503 problem, and its log stays small. Loopback only, every loop bounded."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from shared.config import Settings
from tests.support.system import Processes, make_settings

OPEN_FILES = 256  # the gateway process's RLIMIT_NOFILE
IDLE = 300  # idle connections opened: more than it may open files
HEADER_TIMEOUT = 2.0
MARGIN = 10.0  # seconds beyond the header timeout that a slow, shared machine may take
MAX_LOG_LINES = 60  # the whole log of the gateway's run, start-up lines included


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url, header_timeout=HEADER_TIMEOUT)


@pytest.fixture
def service() -> str:
    """The service whose HTTP server is tested: the gateway unless a test parametrizes it."""
    return "workflow_manager"


@pytest.fixture
async def gateway(settings: Settings, tmp_path: Path, service: str) -> AsyncIterator[Processes]:
    logs = tmp_path / "logs"
    logs.mkdir()
    system = Processes(settings, logs)
    await system.open()
    try:
        system.start(service, open_files=OPEN_FILES)
        await system.healthy(port_of(system, service))
        yield system
    finally:
        await system.stop_all()


def port_of(system: Processes, service: str) -> int:
    return system.settings.callback_port if service == "callback" else system.settings.port


def log_lines(system: Processes) -> list[str]:
    return (system.logs / "workflow_manager.log").read_text(errors="replace").splitlines()


async def healthz_until_answered(port: int, within: float) -> tuple[int, list[int]]:
    """GET /healthz on a new connection each time until it is 200 or ``within`` seconds have
    passed, waiting as a 503's Retry-After says: the last status and every one seen."""
    seen: list[int] = []
    deadline = time.monotonic() + within
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=3)) as http:
        while time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                    seen.append(r.status)
                    if r.status == 200:
                        return 200, seen
                    assert r.status == 503 and r.content_type == "application/problem+json", (r.status, r.content_type)
                    await asyncio.sleep(float(r.headers["Retry-After"]))
            except (aiohttp.ClientError, TimeoutError):
                seen.append(0)  # no answer: not accepted, or reset
                await asyncio.sleep(0.2)
    return (seen[-1] if seen else 0), seen


async def until_closed(reader: asyncio.StreamReader, within: float) -> bytes | None:
    """All the connection got before the gateway closed it; None if still open ``within`` s on."""
    try:
        return await asyncio.wait_for(reader.read(), within)
    except TimeoutError:
        return None
    except ConnectionResetError:
        return b""


async def test_idle_connections_beyond_the_open_file_limit_do_not_starve_the_gateway(gateway: Processes) -> None:
    port = gateway.settings.port
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(IDLE):
        try:
            held.append(await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5))
        except (OSError, TimeoutError):
            pass  # the listen backlog is full: the kernel drops the SYN
    try:
        # A well-behaved client is answered once the idle ones are closed, in the header timeout.
        started = time.monotonic()
        status, seen = await healthz_until_answered(port, HEADER_TIMEOUT + MARGIN)
        assert status == 200, f"the gateway did not answer with {len(held)} idle connections open: {seen}"
        assert time.monotonic() - started < HEADER_TIMEOUT + MARGIN

        # Each idle connection was closed: those handled, after the header timeout, silently;
        # those over the cap at once, with a 503 problem document.
        got = await asyncio.gather(*(until_closed(r, HEADER_TIMEOUT + MARGIN) for r, _ in held))
        still_open = sum(g is None for g in got)
        assert still_open == 0, f"{still_open} of {len(held)} idle connections are still open"
        refused = [g for g in got if g]
        assert refused, "no connection over the cap was answered"
        head, _, body = refused[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1" in head, head
        problem = json.loads(body)
        assert problem["status"] == 503 and "PINGO_MAX_CONNECTIONS" in problem["detail"], problem
        assert problem["retryAfter"] == 1
        assert all(g.startswith(b"HTTP/1.1 503 ") for g in refused)
    finally:
        for _, w in held:
            w.close()

    # Still answering, and the log did not grow with the flood: repeated refusals are one line
    # per period, with the count of those held back.
    assert (await healthz_until_answered(port, MARGIN))[0] == 200
    lines = log_lines(gateway)
    assert len(lines) <= MAX_LOG_LINES, "\n".join(lines[:80])
    assert sum("refused a connection" in line for line in lines) <= 2, "\n".join(lines)


@pytest.mark.parametrize("service", ["workflow_manager", "callback"])
async def test_a_connection_sending_its_headers_a_byte_at_a_time_is_closed(gateway: Processes, service: str) -> None:
    port = port_of(gateway, service)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    started = time.monotonic()
    closed = False
    try:
        while not closed and time.monotonic() - started < HEADER_TIMEOUT + MARGIN:
            try:
                writer.write(b"a")  # one byte, never the end of the headers
                await writer.drain()
                closed = await asyncio.wait_for(reader.read(1024), 0.25) == b""
            except TimeoutError:
                continue
            except ConnectionError:
                closed = True
    finally:
        writer.close()
    assert closed, f"a connection still sending its headers is open after {HEADER_TIMEOUT + MARGIN:g} s"
    assert (await healthz_until_answered(port, MARGIN))[0] == 200


async def test_a_cap_beyond_the_open_file_limit_is_refused_at_start(settings: Settings, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    system = Processes(settings, logs)
    proc = system.start("workflow_manager", open_files=64, PINGO_MAX_CONNECTIONS="1000")
    try:
        assert proc.wait(timeout=60) == 2
    finally:
        system.procs.clear()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = (logs / "workflow_manager.log").read_text()
    assert "PINGO_MAX_CONNECTIONS=1000" in text and "64 open files" in text and "at most 39" in text, text
