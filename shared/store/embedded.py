"""The embedded MongoDB-compatible server: ``nx-27017`` (the wire protocol over SQLite)
as a child process, its data under the project's data directory so it survives a restart.

If a server already answers on the embedded port (another ``pingo serve`` on this
machine started it), it is shared rather than started twice.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

from pymongo import AsyncMongoClient

log = logging.getLogger(__name__)


async def ping(url: str, timeout_ms: int = 500) -> bool:
    client: AsyncMongoClient = AsyncMongoClient(url, serverSelectionTimeoutMS=timeout_ms)
    try:
        await client.admin.command("ping")
        return True
    except Exception:
        return False
    finally:
        await client.close()


class EmbeddedMongo:
    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = (data_dir / "mongo").resolve()
        self.port = port
        self.url = f"mongodb://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    async def start(self, timeout: float = 20.0) -> str:
        if await ping(self.url):
            log.info("using the embedded MongoDB already running on %s", self.url)
            return self.url
        await asyncio.to_thread(self.data_dir.mkdir, parents=True, exist_ok=True)
        log.info("starting embedded MongoDB (nx-27017) on %s, data in %s", self.url, self.data_dir)
        self.proc = await asyncio.to_thread(self._spawn)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nx-27017 exited with {self.proc.returncode}; see {self.data_dir}/nx-27017.stderr")
            if await ping(self.url):
                return self.url
            await asyncio.sleep(0.2)
        raise RuntimeError(f"nx-27017 did not answer on {self.url} within {timeout:.0f}s")

    def _spawn(self) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from nx_27017.nx_27017 import main; main()",
                "--data-dir",
                str(self.data_dir),
                "--port",
                str(self.port),
                "--pid-file",
                str(self.data_dir / "nx-27017.pid"),
                "--log-file",
                str(self.data_dir / "nx-27017.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.data_dir / "nx-27017.stderr", "ab"),
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None
