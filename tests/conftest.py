"""Fixtures over real components: nx-27017 through PyMongo, RabbitMQ at 127.0.0.1:5672,
the services in process (in-process bus) or as separate OS processes (RabbitMQ)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pymongo import AsyncMongoClient

from pingo.dev import all_services
from shared.config import Settings
from shared.runtime import Context

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "examples" / "jobs"
AMQP_URL = os.environ.get("PINGO_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
TERMINAL = {"SUCCEEDED", "FAILED", "KILLED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _broker_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The real RabbitMQ. Started if installed and not running; never skipped silently."""
    if not _broker_up():
        server = shutil.which("rabbitmq-server")
        if server is None:
            pytest.fail(
                "RabbitMQ is not running on 127.0.0.1:5672 and rabbitmq-server is not installed "
                "(apt-get install rabbitmq-server); these tests need a real broker."
            )
        subprocess.run([server, "-detached"], check=False)
        deadline = time.time() + 90
        while not _broker_up() and time.time() < deadline:
            time.sleep(1)
        if not _broker_up():
            pytest.fail("started rabbitmq-server but nothing listens on 127.0.0.1:5672 after 90 s")
    return AMQP_URL


@pytest.fixture(scope="session")
def mongo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real nx-27017 server (the MongoDB wire protocol over SQLite), reached through PyMongo."""
    if url := os.environ.get("PINGO_TEST_MONGO_URL"):
        yield url
        return
    data = tmp_path_factory.mktemp("nx-27017")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from nx_27017.nx_27017 import main; main()",
            "--data-dir",
            str(data),
            "--port",
            str(port),
            "--pid-file",
            str(data / "pid"),
            "--log-file",
            str(data / "log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(data / "stderr", "wb"),
    )
    url = f"mongodb://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                pytest.fail(f"nx-27017 did not start: {(data / 'stderr').read_text()[-2000:]}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def make_settings(tmp_path: Path, mongo_url: str, **overrides: Any) -> Settings:
    tag = uuid.uuid4().hex[:10]
    base: dict[str, Any] = dict(
        data_dir=tmp_path / "data",
        mongo_url=mongo_url,
        mongo_db=f"t_{tag}",
        exchange=f"pingo.test.{tag}",
        port=free_port(),
        callback_port=free_port(),
        scrape_interval=0.5,
        stale_after=4.0,
        poll_interval=0.5,
        poll_max_interval=2.0,
        settle_interval=1.0,
        decision_interval=0.5,
        orphan_sweep_interval=3600,
        action_roots=[ROOT],
        output_roots=[tmp_path / "outputs"],
        local_slots=4,
    )
    base.update(overrides)
    return Settings(**base)


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url)


def shell_action(
    aid: Any, label: str, parents: list = (), seconds: float = 0.0, size_kb: int = 4, **extra: Any
) -> dict[str, Any]:
    """An action running examples/jobs/synth.py (thesis format)."""
    return {
        "id": aid,
        "name": extra.pop("name", label),
        "type": "SHELL",
        "actionFolder": "examples/jobs",
        "command": ["python3", "synth.py"],
        "parentActions": [{"id": p} for p in parents],
        "additionalInput": [
            {"key": "label", "value": label},
            {"key": "seconds", "value": str(seconds)},
            {"key": "sizeKB", "value": str(size_kb)},
        ],
        **extra,
    }


def diamond(prefix: str = "d", seconds: float = 0.0) -> dict[str, Any]:
    return {
        "name": "diamond",
        "actions": [
            shell_action(1, f"{prefix}-a", seconds=seconds),
            shell_action(2, f"{prefix}-b", [1], seconds=seconds),
            shell_action(3, f"{prefix}-c", [1], seconds=seconds),
            shell_action(4, f"{prefix}-d", [2, 3], seconds=seconds),
        ],
    }


def multilevel(prefix: str = "m") -> dict[str, Any]:
    """Four levels, a fan-in and an edge skipping a level."""
    return {
        "name": "multilevel",
        "actions": [
            shell_action(10, f"{prefix}-root"),
            shell_action(11, f"{prefix}-l1a", [10]),
            shell_action(12, f"{prefix}-l1b", [10]),
            shell_action(13, f"{prefix}-l2", [11, 12]),
            shell_action(14, f"{prefix}-l3", [13, 10]),
            shell_action(15, f"{prefix}-l3b", [13]),
        ],
    }


class Api:
    """The gateway over real HTTP, plus a direct look at the store."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.base = f"http://{settings.host}:{settings.port}"
        self.http: aiohttp.ClientSession | None = None
        self.mongo: AsyncMongoClient = AsyncMongoClient(settings.mongo_url)
        self.db = self.mongo[settings.mongo_db]

    async def open(self) -> None:
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))

    async def close(self) -> None:
        if self.http:
            await self.http.close()
        await self.mongo.close()

    async def request(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        assert self.http is not None
        async with self.http.request(method, self.base + path, **kw) as r:
            return r.status, await r.json(content_type=None)

    async def submit(self, body: Any, expect: int = 201) -> dict[str, Any]:
        status, out = await self.request("POST", "/api/v1/workflows", json=body)
        assert status == expect, out
        return out

    async def workflow(self, wf_id: str) -> dict[str, Any]:
        status, out = await self.request("GET", f"/api/v1/workflows/{wf_id}")
        assert status == 200, out
        return out

    async def wait(self, wf_id: str, timeout: float = 90.0) -> dict[str, Any]:
        deadline = time.time() + timeout
        while True:
            wf = await self.workflow(wf_id)
            if wf["state"] in TERMINAL:
                return wf
            if time.time() > deadline:
                raise AssertionError(
                    f"workflow {wf_id} still {wf['state']} after {timeout}s: "
                    + json.dumps([(a["localId"], a["state"], a.get("error")) for a in wf["actions"]])
                )
            await asyncio.sleep(0.2)

    async def run(self, body: Any, timeout: float = 90.0) -> dict[str, Any]:
        plan = await self.submit(body)
        return await self.wait(plan["id"], timeout)

    async def counts(self) -> dict[str, int]:
        return {c: await self.db[c].count_documents({}) for c in ("workflows", "actions", "datasets")}


def decisions(wf: dict[str, Any]) -> dict[Any, str]:
    return {a["localId"]: a["decision"] for a in wf["actions"]}


@pytest.fixture
async def system(settings: Settings):
    """All five services in this process, on the in-process bus."""
    ctx = await Context.open(settings)
    services = all_services(ctx)
    for s in services:
        await s.start()
    api = Api(settings)
    await api.open()
    api.ctx = ctx
    yield api
    await api.close()
    for s in reversed(services):
        await s.stop()
    await ctx.close()


def settings_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    for name, value in settings.model_dump(exclude_none=True).items():
        if isinstance(value, list):
            env[f"PINGO_{name.upper()}"] = json.dumps([str(v) for v in value])
        else:
            env[f"PINGO_{name.upper()}"] = str(value)
    return env


class Processes(Api):
    """The five services as separate OS processes over RabbitMQ."""

    SERVICES = ("workflow_manager", "action_manager", "callback", "dataset_manager", "decision")

    def __init__(self, settings: Settings, logs: Path) -> None:
        super().__init__(settings)
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, tag: str | None = None, **env: str) -> subprocess.Popen:
        key = tag or name
        log = open(self.logs / f"{key}.log", "ab")
        base = {**settings_env(self.settings), "PINGO_EXEC_LOG": str(Path(self.settings.data_dir) / "exec.log")}
        proc = subprocess.Popen(
            [sys.executable, "-m", f"services.{name}"],
            cwd=ROOT,
            env={**base, **env},
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        self.procs[key] = proc
        return proc

    def stop(self, key: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(key)
        if proc.poll() is None:
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
            proc.wait(timeout=20)

    async def healthy(self, port: int, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                assert self.http is not None
                async with self.http.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
        raise AssertionError(f"no service answered on port {port}; logs: {self.tail()}")

    def tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logs.glob("*.log")))

    async def start_all(self) -> None:
        await self.open()
        for name in self.SERVICES:
            self.start(name)
        await self.healthy(self.settings.port)
        await self.healthy(self.settings.callback_port)

    async def stop_all(self) -> None:
        for key in list(self.procs):
            self.stop(key)
        await self.close()


@pytest.fixture
async def processes(settings: Settings, amqp_url: str, tmp_path: Path):
    settings = settings.model_copy(update={"amqp_url": amqp_url})
    (tmp_path / "logs").mkdir()
    system = Processes(settings, tmp_path / "logs")
    await system.start_all()
    yield system
    await system.stop_all()


@pytest.fixture
def rabbit_node(tmp_path_factory: pytest.TempPathFactory):
    """A private RabbitMQ node (tests/brokers.py) that the test may stop, kill and start
    again; the shared broker on 5672 is never touched."""
    from tests.brokers import RabbitNode

    node = RabbitNode(tmp_path_factory.mktemp("rabbit"))
    node.start()
    yield node
    node.stop(kill=True)
