"""Servers a test may kill: a private RabbitMQ node and a private nx-27017 server.

The shared RabbitMQ on 127.0.0.1:5672 is used by everyone's tests, so a test that takes
the broker away uses a private node: its own node name, AMQP and distribution ports,
data, logs, config and (empty) plugin list under a temp dir, so it shares nothing with the
system broker but epmd (which it registers with and leaves alone). The node runs in the
foreground in its own process group: ``stop()`` is SIGTERM (a clean shutdown, ~1 s) or
SIGKILL (a crash) to that group only, and ``start()`` again brings the same node back
with its durable exchanges, queues and persistent messages (~7 s on two busy cores).

Booting a node is the slow part, so one node serves every test that needs one (the
``rabbit_node`` fixture): ``fresh()`` hands it to the next test running, thawed, and on
a virtual host no test has used, so nothing a test declared or left in a queue is seen
by the next. The virtual hosts are created at every boot from a definitions file (no
``rabbitmqctl``, whose own Erlang start costs ~2 s a call); when they are used up the
node is wiped and they are all new again.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aio_pika

from pingo.ports import listening
from shared.store.embedded import EmbeddedMongo
from tests.support.net import free_port


def rabbitmq_server() -> str | None:
    """The node start script itself. Debian's /usr/sbin/rabbitmq-server is a wrapper that
    re-runs it as the rabbitmq user from /var/lib/rabbitmq, which a private node must not."""
    for candidate in (
        os.environ.get("PINGO_TEST_RABBITMQ_SERVER"),
        "/usr/lib/rabbitmq/bin/rabbitmq-server",
        shutil.which("rabbitmq-server"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _kill_group(proc: subprocess.Popen, sig: int, timeout: float) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _definitions(vhosts: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The user guest/guest with every permission on ``vhosts``. A node that loads
    definitions at boot creates no default user, so guest is defined here too."""
    salt = os.urandom(4)  # rabbit_password_hashing_sha256: base64(salt + sha256(salt + password))
    password_hash = base64.b64encode(salt + hashlib.sha256(salt + b"guest").digest()).decode()
    return {
        "users": [
            {
                "name": "guest",
                "password_hash": password_hash,
                "hashing_algorithm": "rabbit_password_hashing_sha256",
                "tags": ["administrator"],
            }
        ],
        "vhosts": [{"name": v} for v in vhosts],
        "permissions": [{"user": "guest", "vhost": v, "configure": ".*", "write": ".*", "read": ".*"} for v in vhosts],
    }


class RabbitNode:
    """A private RabbitMQ node on a free port. ``url`` is its AMQP URL (guest/guest) on
    the virtual host in use (``/`` until ``fresh()`` moves to an unused one)."""

    START_TIMEOUT = 90.0
    VHOSTS = 16  # handed out by fresh(); more would lengthen every boot a little

    def __init__(self, base: Path, port: int | None = None, name: str | None = None) -> None:
        server = rabbitmq_server()
        if server is None:
            raise RuntimeError("rabbitmq-server is not installed (apt-get install rabbitmq-server)")
        self.server = server
        self.base = base
        self.name = name or f"pingo-test-{uuid.uuid4().hex[:8]}@localhost"
        self.port = port or free_port()
        self.dist_port = free_port()
        self.vhost = ""  # the default virtual host, "/"
        self.vhosts = [f"t{i}" for i in range(self.VHOSTS)]
        self.unused = list(self.vhosts)
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        base.mkdir(parents=True, exist_ok=True)
        (base / "definitions.json").write_text(json.dumps(_definitions(["/", *self.vhosts])))
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\nload_definitions = {base / 'definitions.json'}\n"
        )
        (base / "enabled_plugins").write_text("[].\n")
        (base / "rabbitmq-env.conf").write_text("")  # not the system's (which names the system node)

    @property
    def url(self) -> str:
        return self.url_on(self.port)

    def url_on(self, port: int) -> str:
        """Its URL as reached through another port (a ``Relay`` to it)."""
        return f"amqp://guest:guest@127.0.0.1:{port}/{self.vhost}"

    def fresh(self) -> RabbitNode:
        """The node for the next test: running (started again if a test left it stopped,
        thawed if frozen) and on a virtual host no test has used."""
        if self.running:
            self.thaw()
        if not self.unused:
            self.stop()
            self.wipe()  # every virtual host empty again: the definitions create them at boot
            self.unused = list(self.vhosts)
        if not self.running:
            self.start()
        self.wait_up()
        self.vhost = self.unused.pop(0)
        return self

    def env(self) -> dict[str, str]:
        b = self.base
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))},
            "HOME": str(b),  # its own Erlang cookie
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONF_ENV_FILE": str(b / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(b / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(b / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(b / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(b / "mnesia"),
            "RABBITMQ_LOG_BASE": str(b / "log"),
            "RABBITMQ_PID_FILE": str(b / "pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, wait: bool = True) -> None:
        assert not self.running, "already running"
        with open(self.base / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                [self.server],
                cwd=self.base,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        if wait:
            self.wait_up()

    def wait_up(self, timeout: float | None = None) -> float:
        """Wait until the node accepts AMQP connections; the seconds it took."""
        assert self.proc is not None
        t0 = time.monotonic()
        deadline = t0 + (timeout or self.START_TIMEOUT)
        while not listening(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"RabbitMQ node {self.name} exited {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                waited = time.monotonic() - t0
                raise RuntimeError(f"RabbitMQ node {self.name} not listening after {waited:.0f}s: {self.log_tail()}")
            time.sleep(0.1)
        return time.monotonic() - t0

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (clean shutdown) or SIGKILL (crash) the node's process group."""
        if self.proc is None:
            return
        if self.proc.poll() is None and not kill:
            os.killpg(self.proc.pid, signal.SIGCONT)  # a frozen node cannot shut down
        _kill_group(self.proc, signal.SIGKILL if kill else signal.SIGTERM, timeout=30)
        self.proc = None
        deadline = time.monotonic() + 10
        while listening(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def wipe(self) -> None:
        """Forget every exchange, queue and message (a broker replaced, not restarted)."""
        assert not self.running, "stop it first"
        shutil.rmtree(self.base / "mnesia", ignore_errors=True)

    def freeze(self) -> None:
        """SIGSTOP the node: connections stay open, nothing is answered (a hung broker)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def log_tail(self, n: int = 3000) -> str:
        path = self.base / "stdout.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else ""


SHARED_PORT = 5672
SHARED_START_TIMEOUT = 180.0


def start_shared_broker(base: Path | None = None) -> None:
    """Start the tests' shared broker on 127.0.0.1:5672 when nothing listens there, and
    leave it running (``scripts/test`` and the ``amqp_url`` fixture call this).

    It is a node of the tests' own, on data that starts empty at every start, never the
    system node (``rabbitmq-server -detached``): that one keeps every durable queue the
    tests ever declared, and a machine that had run the suite a few times came back with
    1,400 queues to recover, which took longer than any wait for the port."""
    if listening(SHARED_PORT):
        return
    base = base or Path(tempfile.gettempdir()) / "pingo-test-broker"
    shutil.rmtree(base, ignore_errors=True)
    node = RabbitNode(base, port=SHARED_PORT, name="pingo-tests@localhost")
    node.START_TIMEOUT = SHARED_START_TIMEOUT
    node.start(wait=False)  # its own session: it outlives this process
    seconds = node.wait_up()
    print(f"RabbitMQ node {node.name} listening on 127.0.0.1:{SHARED_PORT} after {seconds:.1f} s (data in {base})")


class Declared:
    """What the tests declared on the shared broker, deleted at the session's end: the
    broker outlives the run, and durable queues left behind pile up there (and lengthen
    its next boot)."""

    def __init__(self) -> None:
        self.queues: set[str] = set()
        self.exchanges: set[str] = set()

    def bus(self, exchange: str, queues: Iterable[str]) -> None:
        """A ``RabbitBus`` on ``exchange`` whose subscribers use ``queues`` (full names)."""
        self.exchanges.update((exchange, f"{exchange}.dead"))
        self.queues.update((*queues, f"{exchange}.dead"))

    async def forget(self, url: str) -> None:
        connection = await aio_pika.connect(url, timeout=10)
        async with connection:
            channel = await connection.channel()
            for queue in sorted(self.queues):
                await channel.queue_delete(queue)  # an unknown queue is deleted without complaint
            for exchange in sorted(self.exchanges):
                await channel.exchange_delete(exchange)
        self.queues.clear()
        self.exchanges.clear()


SHARED_DECLARED = Declared()


class Relay:
    """A local TCP port where nothing listens until ``open()``, and which then relays every
    connection to ``target``: to a client, a server appearing, without the seconds a
    RabbitMQ node takes to boot. Runs on the test's event loop."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        for writer in list(self.writers):
            writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass  # either end went away: close the other
        finally:
            self.writers.discard(writer)
            writer.close()


class NxServer:
    """A private nx-27017 server (Pingo's own embedded launcher, ``EmbeddedMongo``) on its
    own data dir and Unix socket, to kill and bring back. Its URL is known before it starts."""

    def __init__(self, data: Path) -> None:
        data.mkdir(parents=True, exist_ok=True)
        self.server = EmbeddedMongo(data)
        self.url = self.server.url

    @property
    def running(self) -> bool:
        return self.server.proc is not None and self.server.proc.poll() is None

    def start(self) -> None:
        """Start it and wait until it answers (from sync code or inside a running loop)."""
        assert not self.running, "already running"
        self.server.proc = None
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, self.server.start(timeout=30)).result()

    def kill(self) -> None:
        """A crash: SIGKILL, no clean shutdown."""
        proc = self.server.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        self.server.proc = None

    def stop(self) -> None:
        self.server.stop()
