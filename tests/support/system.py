"""Pingo running for a test: its settings, the gateway over real HTTP with a look at the
store (``Api``), and the five services as separate OS processes (``Processes``). The
fixtures that start them are in tests/system/conftest.py."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import SecretStr
from pymongo import AsyncMongoClient

from services.action_manager.service import ActionManager
from services.dataset_manager.service import DatasetManager
from services.decision.service import DecisionService
from shared.config import Settings
from tests.support.brokers import SHARED_DECLARED
from tests.support.net import free_port
from tests.support.workflows import ROOT

DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
AMQP_URL = os.environ.get("PINGO_TEST_AMQP_URL", DEFAULT_AMQP_URL)
TERMINAL = {"SUCCEEDED", "FAILED", "KILLED"}


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
        reconcile_interval=3600,
        action_roots=[ROOT],
        output_roots=[tmp_path / "outputs"],
        local_slots=4,
    )
    base.update(overrides)
    settings = Settings(**base)
    note_shared_bus(settings)
    return settings


def note_shared_bus(settings: Settings) -> None:
    """Pingo's queues on the shared broker, to delete at the session's end."""
    if settings.amqp_url == AMQP_URL:
        subscribers = (ActionManager.name, DatasetManager.name, DecisionService.name)
        SHARED_DECLARED.bus(settings.exchange, [f"{settings.exchange}.{name}" for name in subscribers])


class Api:
    """The gateway over real HTTP, plus a direct look at the store."""

    def __init__(self, settings: Settings, token: str | None = None) -> None:
        self.settings = settings
        self.base = f"http://{settings.host}:{settings.port}"
        self.token = token  # sent as Authorization: Bearer (docs/users.md)
        self.http: aiohttp.ClientSession | None = None
        self.mongo: AsyncMongoClient = AsyncMongoClient(settings.mongo_url)
        self.db = self.mongo[settings.mongo_db]

    async def open(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), headers=headers)

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


def settings_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    for name, value in settings.model_dump(exclude_none=True).items():
        if isinstance(value, SecretStr):  # its text is masked; the process needs the secret
            value = value.get_secret_value()
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
        note_shared_bus(settings)
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, tag: str | None = None, open_files: int | None = None, **env: str) -> subprocess.Popen:
        """``open_files``: the process's RLIMIT_NOFILE (``ulimit -n``), soft and hard."""
        key = tag or name
        log = open(self.logs / f"{key}.log", "ab")
        # Every job logs its runs there: a variable passed to jobs as an operator would
        # (PINGO_JOB_ENV_PASS), since a job gets none of the services' own environment.
        passed = json.dumps([*self.settings.job_env_pass, "SYNTH_EXEC_LOG"])
        base = {
            **settings_env(self.settings),
            "SYNTH_EXEC_LOG": str(Path(self.settings.data_dir) / "exec.log"),
            "PINGO_JOB_ENV_PASS": passed,
        }

        def limit() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        proc = subprocess.Popen(
            [sys.executable, "-m", f"services.{name}"],
            cwd=ROOT,
            env={**base, **env},
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=limit if open_files is not None else None,
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
        # SIGTERM to all, then wait: each takes a moment to shut down, none waits for another.
        procs = [self.procs.pop(key) for key in list(self.procs)]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=20)
        await self.close()


async def pingo(base: str, *args: str) -> str:
    """``pingo ARGS --url BASE`` as a person runs it, its output's words (plain text: a
    pipe; rich wraps long lines, so they are compared as words). Run as a subprocess of
    the test's event loop, which keeps serving the in-process services meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pingo.cli", *args, "--url", base, cwd=ROOT, env={**os.environ, "COLUMNS": "200"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return " ".join(out.decode().split())
