"""The gateway against hostile and broken clients, over real HTTP: cross-site requests and DNS
rebinding from a browser, bad query parameters, a store outage, slow request bodies, and
failures nobody planned for. Every refusal is an RFC 9457 problem document, and a refused
workflow neither is stored nor runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from multidict import CIMultiDictProxy

from tests.support.system import Api, make_settings

WORKFLOWS = "/api/v1/workflows"
NOTHING = {"workflows": 0, "actions": 0, "datasets": 0}


@pytest.fixture
def overrides() -> dict[str, Any]:
    """Settings of this module's ``system``; a test parametrizes it to change them."""
    return {}


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str, overrides: dict[str, Any]):
    return make_settings(tmp_path, overrides.pop("mongo_url", mongo_url), **overrides)


PROBLEM = "application/problem+json"


async def call(api: Api, method: str, path: str, **kw: Any) -> tuple[int, CIMultiDictProxy[str], Any]:
    """Status, headers and JSON body; fails unless an error is a problem document and a
    success is JSON."""
    assert api.http is not None
    async with api.http.request(method, api.base + path, **kw) as r:
        text = await r.text()
        expected = PROBLEM if r.status >= 400 else "application/json"
        assert r.content_type == expected, (r.status, r.content_type, text[:500])
        body = json.loads(text)
        if r.status >= 400:
            assert body["status"] == r.status and body["title"] and body["detail"], body
        return r.status, r.headers, body


def pwn_workflow(marker: Path) -> dict[str, Any]:
    """A SHELL workflow that leaves ``marker`` behind if it ever runs."""
    # The last argument is the output directory the action must create.
    script = "import os, pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran'); os.makedirs(sys.argv[-1])"
    return {
        "name": "drive-by",
        "actions": [
            {
                "id": 1,
                "name": "pwn",
                "type": "SHELL",
                "actionFolder": "examples/jobs",
                "command": ["python3", "-c", script, str(marker)],
            }
        ],
    }


# --- A: a web page must not be able to drive the gateway through a browser ------------------


@pytest.mark.parametrize(
    ("content_type", "origin", "status"),
    [
        ("text/plain", "http://evil.example", 403),  # fetch(..., {mode: "no-cors", body}) from a page
        ("text/plain", None, 415),  # the same, from a browser that sent no Origin
        ("application/x-www-form-urlencoded", None, 415),  # an HTML form
        ("application/json", "http://evil.example", 403),  # would need a preflight; refused anyway
    ],
    ids=["text-plain-cross-site", "text-plain-no-origin", "form", "json-cross-site"],
)
async def test_cross_site_workflow_is_refused_and_nothing_runs(system, tmp_path, content_type, origin, status):
    marker = tmp_path / "ran"
    headers = {"Content-Type": content_type, **({"Origin": origin} if origin else {})}
    got, _, body = await call(system, "POST", WORKFLOWS, data=json.dumps(pwn_workflow(marker)), headers=headers)
    assert got == status, body
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert await system.db.workflows.count_documents({}) == 0
    assert await system.counts() == NOTHING
    await asyncio.sleep(3 * system.settings.scrape_interval)
    assert not marker.exists(), "the refused workflow ran"


@pytest.mark.parametrize(("method", "path"), [("POST", WORKFLOWS), ("GET", WORKFLOWS), ("GET", "/api/v1/datasets")])
async def test_dns_rebinding_host_is_refused(system, tmp_path, method, path):
    """A page on evil.example re-pointed at 127.0.0.1 is same-origin to the browser; only
    its Host header gives it away."""
    marker = tmp_path / "ran"
    host = f"evil.example:{system.settings.port}"
    headers = {"Host": host, "Origin": f"http://{host}"}
    kw: dict[str, Any] = {"json": pwn_workflow(marker)} if method == "POST" else {}
    status, _, body = await call(system, method, path, headers=headers, **kw)
    assert status == 400, body
    assert "evil.example" in body["detail"] and "PINGO_ALLOWED_HOSTS" in body["detail"], body
    assert await system.counts() == NOTHING
    assert not marker.exists()


@pytest.mark.parametrize(
    ("host", "content_type"),
    [
        ("127.0.0.1", "application/json"),
        ("localhost", "application/json; charset=utf-8"),
        ("127.0.0.1", "application/vnd.pingo.workflow+json"),
    ],
)
async def test_same_origin_json_post_is_accepted(system, tmp_path, host, content_type):
    authority = f"{host}:{system.settings.port}"
    headers = {"Host": authority, "Origin": f"http://{authority}", "Content-Type": content_type}
    marker = tmp_path / "ran"
    status, resp_headers, plan = await call(
        system, "POST", WORKFLOWS, data=json.dumps(pwn_workflow(marker)), headers=headers
    )
    assert status == 201, plan
    assert "Access-Control-Allow-Origin" not in resp_headers  # same-origin needs no CORS
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED" and marker.read_text() == "ran"


@pytest.mark.parametrize("overrides", [{"cors_origins": ["http://ui.example:3000"]}])
async def test_a_listed_origin_gets_cors_and_others_do_not(system, tmp_path):
    ui = "http://ui.example:3000"
    preflight = {
        "Origin": ui,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    async with system.http.options(system.base + WORKFLOWS, headers=preflight) as r:
        assert r.status == 204
        assert r.headers["Access-Control-Allow-Origin"] == ui
        assert "POST" in r.headers["Access-Control-Allow-Methods"]
        assert "content-type" in r.headers["Access-Control-Allow-Headers"].lower()
    status, headers, plan = await call(
        system, "POST", WORKFLOWS, json=pwn_workflow(tmp_path / "ran"), headers={"Origin": ui}
    )
    assert status == 201, plan
    assert headers["Access-Control-Allow-Origin"] == ui
    status, headers, _ = await call(system, "GET", f"{WORKFLOWS}/wf-missing", headers={"Origin": ui})
    assert status == 404 and headers["Access-Control-Allow-Origin"] == ui  # errors are readable too

    other = {**preflight, "Origin": "http://evil.example"}
    status, headers, body = await call(system, "OPTIONS", WORKFLOWS, headers=other)
    assert status == 403 and "Access-Control-Allow-Origin" not in headers, body
    status, headers, _ = await call(system, "GET", WORKFLOWS, headers={"Origin": "http://evil.example"})
    assert status == 403 and "Access-Control-Allow-Origin" not in headers


async def test_cors_is_off_by_default(system):
    preflight = {"Origin": "http://ui.example", "Access-Control-Request-Method": "POST"}
    status, headers, _ = await call(system, "OPTIONS", WORKFLOWS, headers=preflight)
    assert status == 403 and "Access-Control-Allow-Origin" not in headers


@pytest.mark.parametrize(
    ("overrides", "host", "status"),
    [
        ({"allowed_hosts": ["pingo-gateway", ".example.org"]}, "pingo-gateway", 200),
        ({"allowed_hosts": ["pingo-gateway", ".example.org"]}, "api.pingo.example.org", 200),
        ({"allowed_hosts": ["pingo-gateway", ".example.org"]}, "example.org.evil.example", 400),
        ({"allowed_hosts": ["pingo-gateway"]}, "127.0.0.1", 400),  # a list replaces the defaults
        ({"allowed_hosts": ["*"]}, "anything.example", 200),
        ({"allowed_hosts": ["[::1]"]}, "[::1]", 200),
        ({"host": "127.0.0.2"}, "127.0.0.2", 200),  # the bind address is allowed by default
    ],
)
async def test_allowed_hosts_setting(system, host, status):
    got, _, body = await call(system, "GET", WORKFLOWS, headers={"Host": f"{host}:{system.settings.port}"})
    assert got == status, body


async def test_health_answers_any_host(system):
    """Kubernetes probes call /healthz by the pod's IP address."""
    status, _, body = await call(system, "GET", "/healthz", headers={"Host": "10.1.2.3:8080"})
    assert status == 200 and body == {"ok": True}


async def test_the_callback_service_does_not_check_host(system):
    """Oozie reaches it through a load balancer, by a name the service cannot know."""
    url = f"http://127.0.0.1:{system.settings.callback_port}/callback/wf-nope.1"
    async with system.http.get(url, params={"secret": "x"}, headers={"Host": "lb.example.org"}) as r:
        assert r.status == 403 and (await r.json(content_type=PROBLEM))["detail"] == "wrong secret"


# --- B: every error is a problem document ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "problems"),
    [
        ("/api/v1/datasets?limit=abc", ["limit"]),
        ("/api/v1/datasets?limit=0&state=GONE", ["state", "limit"]),
        ("/api/v1/history/stats?from=nan", ["from"]),
        ("/api/v1/history/stats?from=inf", ["from"]),
        ("/api/v1/history/stats?from=-inf&to=1e999", ["from", "to"]),
        ("/api/v1/history/stats?from=abc&resolution=2h", ["resolution", "from"]),
        ("/api/v1/workflows?limit=abc&before=nan&state=DONE", ["state", "limit", "before"]),
    ],
)
async def test_bad_query_parameters_are_a_400_problem_listing_every_one(system, path, problems):
    status, _, body = await call(system, "GET", path)
    assert status == 400, body
    listed = body["violations"]
    assert [v["loc"] for v in listed] == problems, listed
    assert all(v["message"].startswith(v["loc"]) and v["message"] in body["detail"] for v in listed), body


async def test_an_unexpected_failure_is_a_500_problem(system, monkeypatch, caplog):
    async def broken() -> int:
        raise RuntimeError("storage exploded")

    monkeypatch.setattr(system.ctx.storage, "usage", broken)
    status, _, body = await call(system, "GET", "/api/v1/datasets")
    assert status == 500 and body["detail"] == "internal error", body
    assert "storage exploded" not in json.dumps(body)  # details go to the log, not the client
    assert body["reference"] in caplog.text and "storage exploded" in caplog.text


class StoreProxy:
    """A TCP forwarder in front of MongoDB that can delay its answers or be cut, to make a
    slow store or an outage on demand. ``target`` is the store's URL: a Unix socket (the
    embedded server's) or host:port."""

    def __init__(self, target: str) -> None:
        self.target = unquote(urlsplit(target).netloc.rpartition("@")[2])
        self.delay = 0.0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.conversations: set[asyncio.Task] = set()
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.conversations.add(task)
        if self.target.endswith(".sock"):
            up_reader, up_writer = await asyncio.open_unix_connection(self.target)
        else:
            host, _, port = self.target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delayed: bool) -> None:
            try:
                while data := await src.read(65536):
                    if delayed and self.delay:
                        await asyncio.sleep(self.delay)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        # Requests, not answers, are delayed: a request is one piece, an answer may be several.
        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        await asyncio.gather(*self.conversations, return_exceptions=True)
        await self.server.wait_closed()


class TestStoreOutage:
    @pytest.fixture
    async def proxy(self, mongo_url: str):
        proxy = StoreProxy(mongo_url)
        await proxy.start()
        yield proxy
        if proxy.server is not None and proxy.server.is_serving():
            await proxy.cut()

    @pytest.fixture
    def overrides(self, proxy: StoreProxy) -> dict[str, Any]:
        return {
            "mongo_url": f"mongodb://127.0.0.1:{proxy.port}",
            "request_store_timeout": 1.0,
            "request_timeout": 4.0,
            # The services' own store calls give up sooner, so that stopping them after the cut is quick.
            "store_timeout": 2.0,
            # The other services keep off the store, so that the gateway's reads alone meet the delay.
            **dict.fromkeys(("scrape_interval", "poll_interval", "settle_interval", "decision_interval"), 60.0),
        }

    async def test_a_get_during_a_store_outage_is_a_quick_503(self, system, proxy):
        status, _, _ = await call(system, "GET", WORKFLOWS)
        assert status == 200
        await proxy.cut()
        # The first GET is the one that finds out; the client alone would wait 10 s for it.
        for path in (WORKFLOWS, f"{WORKFLOWS}/wf-x", "/api/v1/history/stats", "/api/v1/datasets"):
            started = time.monotonic()
            status, headers, body = await call(system, "GET", path)
            took = time.monotonic() - started
            assert status == 503, body
            assert "unavailable" in body["detail"] and int(headers["Retry-After"]) > 0, (headers, body)
            assert took < 3.0, f"{path} took {took:.1f}s (1 s once the store is unreachable)"

    async def test_a_slow_store_is_waited_for_up_to_the_request_timeout(self, system, proxy):
        await asyncio.sleep(1.0)  # the services' first rounds done: the gateway has the pool to itself
        status, _, body = await call(system, "GET", WORKFLOWS)
        assert status == 200, body
        proxy.delay = 1.5  # slower than request_store_timeout: that bound is for a store that is down
        started = time.monotonic()
        status, _, body = await call(system, "GET", WORKFLOWS)
        assert status == 200, body
        assert time.monotonic() - started >= 1.5
        proxy.delay = 6.0  # slower than request_timeout
        started = time.monotonic()
        status, headers, body = await call(system, "GET", WORKFLOWS)
        assert status == 503 and "Retry-After" in headers, body
        assert 3.5 < time.monotonic() - started < 6.0
        proxy.delay = 0.0  # the services stop without waiting on a slow store


# --- D: a slow body cannot hold the gateway ---------------------------------------------------


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    """What the gateway sent before it hung up. A client still sending as the gateway
    closes gets a reset (its bytes reached a closed socket): what had arrived before the
    reset is kept, where ``reader.read()`` would lose it with the reset, as a loaded machine
    showed."""
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := await reader.read(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("overrides", [{"body_timeout": 1.0}])
@pytest.mark.parametrize("sender", ["dribbles", "stops"])
async def test_a_slow_body_gets_408_and_the_gateway_keeps_answering(system, sender):
    reader, writer = await asyncio.open_connection("127.0.0.1", system.settings.port)
    head = (
        f"POST {WORKFLOWS} HTTP/1.1\r\nHost: 127.0.0.1:{system.settings.port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"
    )
    writer.write(head.encode())
    await writer.drain()

    async def dribble() -> None:
        try:
            while sender == "dribbles":
                await asyncio.sleep(0.2)
                writer.write(b" ")
                await writer.drain()
        except ConnectionError:
            pass  # the gateway hung up: what it should do

    feeding = asyncio.create_task(dribble())
    started = time.monotonic()
    try:
        status, _, body = await call(system, "GET", "/healthz")
        assert status == 200 and body == {"ok": True}
        assert time.monotonic() - started < 0.9  # while the body is still pending
        answer = await asyncio.wait_for(read_until_closed(reader), timeout=10)
    finally:
        feeding.cancel()
        writer.close()
    took = time.monotonic() - started
    head_part, _, payload = answer.partition(b"\r\n\r\n")
    assert head_part.startswith(b"HTTP/1.1 408"), answer[:300]
    assert PROBLEM.encode() in head_part.lower()
    assert "did not arrive" in json.loads(payload)["detail"]
    assert 0.9 <= took < 5.0, took
    assert await system.counts() == NOTHING
