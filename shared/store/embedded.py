"""The embedded MongoDB-compatible server: ``nx-27017`` (the wire protocol over SQLite)
as a child process, its data under the project's data directory so it survives a restart.

nx-27017 has no authentication, so it listens on no TCP port: only on a Unix domain
socket (mode 0600, in a folder of mode 0700) that only Pingo's own OS user can reach
(``shared.store.embedded_server``). The socket is ``<data_dir>/mongo/nx-27017.sock``, or,
when that path is too long for a Unix socket, one in a private folder under the system
temp dir named from a digest of the data dir. Every process with the same data dir
(several ``pingo serve``, or two ``pingo dev`` on different ports) shares one server;
processes with different data dirs never do: the socket is found from the data dir alone.

A shared server outlives the process that started it while others use it (see
``shared.store.embedded_server``), and every process keeps an eye on it: if it stops
answering (killed, or stopped by a process that did not know of the others), the first
process to notice starts it again and PyMongo reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote_plus

from pymongo import AsyncMongoClient

from shared.store.client import Store, connect
from shared.store.embedded_server import LINGERING, SHARED, private_dir, socket_path

if TYPE_CHECKING:
    from shared.config import Settings

log = logging.getLogger(__name__)
KEEP_INTERVAL = 1.0  # seconds between two checks that the server still answers
STOP_WAIT = 10.0  # seconds a stopped server has to exit (or to say it still serves others)


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
        self._keeper: asyncio.Task | None = None

    async def start(self, timeout: float = 20.0) -> str:
        """The server's URL, once it answers: this data dir's running server, or one started
        now; then keep it answering for as long as this process runs (until ``stop``)."""
        url = await self._start(timeout)
        if self._keeper is None:
            self._keeper = asyncio.create_task(self._keep(), name="embedded-mongo-keeper")
        return url

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(KEEP_INTERVAL)
            if await self._answers():
                continue
            log.warning("the embedded MongoDB of %s stopped answering; starting it again", self.data_dir)
            try:
                await self._start()
            except (OSError, RuntimeError) as exc:
                log.warning("could not start the embedded MongoDB again (%s); trying again", exc)

    async def _answers(self) -> bool:
        """Something listens on the socket (a connect is enough: cheaper than a client)."""
        try:
            _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.socket)), 2.0)
        except (OSError, TimeoutError):
            return False
        writer.close()
        return True

    async def _start(self, timeout: float = 20.0) -> str:
        # Before connecting too: a socket is only trusted in a folder that is this user's alone.
        await asyncio.to_thread(self._private_dirs)
        if self.proc is not None and self.proc.poll() is not None:
            self.proc = None  # the server this process had started is gone: start another
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
                # Its own session: a Ctrl-C meant for this process must not stop a server
                # that other processes of the data dir may still be using.
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def stop(self) -> None:
        """Stop watching the server and, if this process started it, ask it to stop: it
        does once no other process of the data dir is connected, and keeps serving those
        that are until they are done."""
        if self._keeper is not None:
            self._keeper.cancel()
            self._keeper = None
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        lingering = self.data_dir / LINGERING
        deadline = time.monotonic() + STOP_WAIT
        while proc.poll() is None and time.monotonic() < deadline:
            if lingering.is_file() and lingering.read_text().strip() == str(proc.pid):
                log.info("the embedded MongoDB (pid %d) still serves other processes of %s", proc.pid, self.data_dir)
                return
            time.sleep(0.05)
        if proc.poll() is None:
            log.warning("the embedded MongoDB (pid %d) did not stop within %.0fs: killed", proc.pid, STOP_WAIT)
            proc.kill()
            proc.wait()


@contextlib.asynccontextmanager
async def store_for(settings: Settings, *, indexes: bool = True) -> AsyncIterator[Store]:
    """The store the services use (``PINGO_MONGO_URL``, else the embedded server of
    ``PINGO_DATA_DIR``, started for the block if no process serves it), for a command that
    runs beside them (``pingo users``, ``pingo evaluate whatif``)."""
    embedded = None
    url = settings.mongo_url
    if url is None:
        embedded = EmbeddedMongo(settings.data_dir)
        url = await embedded.start()
    try:
        store = await connect(url, settings.mongo_db, indexes=indexes, timeout=settings.store_timeout)
        try:
            yield store
        finally:
            await store.close()
    finally:
        if embedded is not None:
            embedded.stop()
