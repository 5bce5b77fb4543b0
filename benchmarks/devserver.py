"""``pingo dev`` on a fresh data directory (or a given one), for the benchmarks: started,
awaited, stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def call(url: str, body: bytes | None = None, method: str | None = None) -> tuple[int, dict]:
    """One request to the API: its status and JSON body (an error's too)."""
    headers = {"Content-Type": "application/json"} if body else {}
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@contextlib.contextmanager
def dev_server(data: Path | None = None, **settings: str) -> Iterator[tuple[str, Path]]:
    """Yield the gateway's base URL and the data directory; ``settings`` are ``PINGO_*``
    variables (without the prefix), e.g. ``SUBMITTERS="0"``. ``data``: a data directory
    to start on again (what an earlier server stored there is kept); default a fresh one."""
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="pingo-bench-")) if data is None else data
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(PINGO_DATA_DIR=str(data), PINGO_CALLBACK_PORT=str(free_port()))
    env.update({f"PINGO_{k}": v for k, v in settings.items()})
    log = open(data / "dev.log", "ab")
    dev = subprocess.Popen(
        [sys.executable, "-m", "pingo.cli", "dev", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                get(f"{base}/healthz")
                break
            except OSError:
                if time.time() > deadline or dev.poll() is not None:
                    sys.exit(f"pingo dev did not start; see {data / 'dev.log'}")
                time.sleep(0.2)
        yield base, data
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(timeout=30)
