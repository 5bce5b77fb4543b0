"""``pingo dev`` and the ``pingo`` command as a user runs them: separate OS processes,
embedded defaults, a data folder and ports of their own, none of the test's ``PINGO_*``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.net import free_port
from tests.support.system import TERMINAL
from tests.support.workflows import ROOT, shell_action


def user_env(**settings: str) -> dict[str, str]:
    """This process's environment without Pingo's settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(settings)
    return env


def pingo(*argv: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    """``pingo ARGV...`` run to its end, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "pingo.cli", *argv], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


class Dev:
    """``pingo dev`` on ``data_dir``, with fast timers and extra ``PINGO_*`` settings."""

    def __init__(self, tmp_path: Path, name: str, data_dir: Path, port: int | None = None, **env: str) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log = tmp_path / f"{name}.log"
        self.env = user_env(
            PINGO_DATA_DIR=str(data_dir), PINGO_CALLBACK_PORT=str(free_port()), PINGO_SCRAPE_INTERVAL="0.5",
            PINGO_POLL_INTERVAL="0.5", PINGO_RECONCILE_INTERVAL="0.5", **env,
        )  # fmt: skip
        self.proc: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pingo.cli", "dev", "--port", str(self.port)],
                cwd=ROOT, env=self.env, stdout=log, stderr=log,
            )  # fmt: skip
        return self.proc

    async def exited(self, timeout: float = 60.0) -> int | None:
        """Its exit status, or None if it still runs after ``timeout`` (then it is stopped)."""
        assert self.proc is not None
        try:
            return await asyncio.to_thread(self.proc.wait, timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(self.proc.wait, 30)
            return None

    async def request(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            async with http.request(method, f"http://127.0.0.1:{self.port}{path}", **kw) as r:
                return r.status, await r.json(content_type=None)

    async def up(self) -> None:
        async with asyncio.timeout(60):
            while True:
                assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
                try:
                    if (await self.request("GET", "/healthz"))[0] == 200:
                        return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)

    async def submit(self, body: dict[str, Any] | str) -> str:
        """Submit ``body``, or a one-action workflow named by a string; its id."""
        if isinstance(body, str):
            body = {"name": body, "actions": [shell_action(1, body)]}
        status, plan = await self.request("POST", "/api/v1/workflows", json=body)
        assert status == 201, plan
        return plan["id"]

    async def run(self, body: dict[str, Any] | str) -> dict[str, Any]:
        """Submit and wait for the workflow's end; the ended workflow."""
        wf_id = await self.submit(body)
        async with asyncio.timeout(60):
            while (wf := (await self.request("GET", f"/api/v1/workflows/{wf_id}"))[1])["state"] not in TERMINAL:
                await asyncio.sleep(0.2)
        return wf

    async def has(self, wf_id: str) -> bool:
        return (await self.request("GET", f"/api/v1/workflows/{wf_id}"))[0] == 200

    async def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, 30)
