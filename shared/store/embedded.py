"""The embedded MongoDB-compatible server: ``nx-27017`` (the wire protocol over SQLite)
as a child process, its data under the project's data directory so it survives a restart.

nx-27017 has no authentication, so it listens on no TCP port: only on a Unix domain
socket (mode 0600, in a folder of mode 0700) that only Pingo's own OS user can reach
(``shared.store.embedded_server``). The socket is ``<data_dir>/mongo/nx-27017.sock``, or,
when that path is too long for a Unix socket, one in a private folder under the system
temp dir named from a digest of the data dir. Every process with the same data dir
(several ``pingo serve``) shares one server; processes with different data dirs never do.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote_plus

from pymongo import AsyncMongoClient

from shared.store.embedded_server import SHARED, private_dir, socket_path

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
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = (data_dir / "mongo").resolve()
        self.socket = socket_path(self.data_dir)
        self.url = f"mongodb://{quote_plus(str(self.socket))}"
        self.proc: subprocess.Popen | None = None

    async def start(self, timeout: float = 20.0) -> str:
        # Before connecting too: a socket is only trusted in a folder that is this user's alone.
        await asyncio.to_thread(self._private_dirs)
        if await ping(self.url):
            log.info("using the embedded MongoDB already running on %s", self.socket)
            return self.url
        log.info("starting embedded MongoDB (nx-27017) on %s, data in %s", self.socket, self.data_dir)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        spawn_at = loop.time()
        while loop.time() < deadline:
            if self.proc is None and loop.time() >= spawn_at:
                self.proc = await asyncio.to_thread(self._spawn)
            elif self.proc is not None and self.proc.poll() is not None:
                if self.proc.returncode != SHARED:
                    raise RuntimeError(
                        f"nx-27017 exited with {self.proc.returncode}; see {self.data_dir}/nx-27017.stderr"
                    )
                # Another process's server has this data dir (it may be starting, or stopping):
                # share it, or start one again in a moment if it was stopping.
                self.proc, spawn_at = None, loop.time() + 1.0
            if await ping(self.url):
                return self.url
            await asyncio.sleep(0.2)
        raise RuntimeError(f"nx-27017 did not answer on {self.socket} within {timeout:.0f}s")

    def _private_dirs(self) -> None:
        private_dir(self.data_dir)
        private_dir(self.socket.parent)

    def _spawn(self) -> subprocess.Popen:
        with open(self.data_dir / "nx-27017.stderr", "ab") as stderr:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "shared.store.embedded_server",
                    "--data-dir",
                    str(self.data_dir),
                    "--socket",
                    str(self.socket),
                    "--log-file",
                    str(self.data_dir / "nx-27017.log"),
                ],
                cwd=Path(__file__).resolve().parents[2],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None
