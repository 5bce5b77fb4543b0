"""Wires the emulator together: one HDFS namespace, the WebHDFS NameNode and DataNode
apps, the Oozie app (with ``/emulator/*``), the engine and the notification queue, each
app on its own port in the running event loop.

    emu = await start_emulator(tmp_path / "hdfs")
    emu.oozie_url      # http://127.0.0.1:<port>/oozie
    emu.namenode_url   # http://127.0.0.1:<port>   (WebHDFS: + /webhdfs/v1/...)
    emu.hdfs_uri       # hdfs://127.0.0.1:8020     (nameNode for job configurations)
    await emu.stop()
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

from aiohttp import web

from hadoop_emulator.engine import Engine
from hadoop_emulator.faults import Faults
from hadoop_emulator.hdfs import Namespace
from hadoop_emulator.notifications import Notifier
from hadoop_emulator.oozie import OozieApp
from hadoop_emulator.webhdfs import WebHdfs

log = logging.getLogger("hadoop_emulator")
WILDCARD = ("", "0.0.0.0", "::")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _url_host(host: str) -> str:
    if host in WILDCARD:
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


class Emulator:
    """A running emulator. ``faults`` is the live fault configuration (assignable)."""

    def __init__(
        self,
        root: Path,
        host: str,
        work_dir: Path,
        faults: Faults,
        rpc_port: int,
    ) -> None:
        self.root = root
        self.host = host
        self.work_dir = work_dir
        self.faults = faults
        self._initial_faults = faults.model_copy()
        self.rpc_port = rpc_port
        self.unavailable = {"oozie": 0, "webhdfs": 0}
        self._runners: list[web.AppRunner] = []
        self.oozie_url = self.namenode_url = self.datanode_url = self.hdfs_uri = ""
        self.namespace = Namespace(root)
        self.notifier = Notifier(lambda: self.faults)
        self.engine: Engine

    # -- faults and stats -------------------------------------------------------------
    def set_faults(self, faults: Faults) -> None:
        self.faults = faults

    def reset_faults(self) -> Faults:
        self.faults = self._initial_faults.model_copy()
        return self.faults

    def update_faults(self, **patch: Any) -> Faults:
        """Change knobs in process (same rules as ``PUT /emulator/faults``)."""
        faults = self.faults.patched(patch)
        if faults.lose_notification_queue:
            faults.lose_notification_queue = False
            self.notifier.lose_queue()
        self.faults = faults
        self.notifier.faults_changed()
        return faults

    def stats(self) -> dict[str, Any]:
        return {
            **self.engine.stats(),
            "notifications": {**self.notifier.stats, "pending": self.notifier.pending()},
            "unavailable": dict(self.unavailable),
        }

    # -- lifecycle --------------------------------------------------------------------
    async def _serve(self, app: web.Application, port: int) -> int:
        sock = _bind(self.host, port)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runners.append(runner)
        site = web.SockSite(runner, sock)
        await site.start()
        return sock.getsockname()[1]

    async def start(self, oozie_port: int, namenode_port: int, datanode_port: int) -> None:
        host = _url_host(self.host)
        # Bind the DataNode first: the NameNode's redirects name it.
        webhdfs = WebHdfs(
            self.namespace,
            lambda: self.faults,
            self._datanode_base,
            f"{host}:{self.rpc_port}",
            lambda: self._count_unavailable("webhdfs"),
        )
        dn_port = await self._serve(webhdfs.datanode_app(), datanode_port)
        self.datanode_url = f"http://{host}:{dn_port}"
        self._dn_port = dn_port
        nn_port = await self._serve(webhdfs.namenode_app(), namenode_port)
        self.namenode_url = f"http://{host}:{nn_port}"
        self.hdfs_uri = f"hdfs://{host}:{self.rpc_port}"
        # The Oozie port is bound before the engine exists so that consoleUrl can name it.
        sock = _bind(self.host, oozie_port)
        oz_port = sock.getsockname()[1]
        self.oozie_url = f"http://{host}:{oz_port}/oozie"
        self.engine = Engine(
            namespace=self.namespace,
            notifier=self.notifier,
            faults=lambda: self.faults,
            work_root=self.work_dir,
            base_url=self.oozie_url,
            hdfs_uri=self.hdfs_uri,
        )
        oozie = OozieApp(
            self.engine,
            self.notifier,
            lambda: self.faults,
            self.set_faults,
            self.reset_faults,
            self.stats,
            lambda: self._count_unavailable("oozie"),
        )
        runner = web.AppRunner(oozie.app(), access_log=None, handle_signals=False)
        await runner.setup()
        self._runners.append(runner)
        await web.SockSite(runner, sock).start()
        log.info(
            "emulator up: oozie %s, namenode %s, datanode %s, hdfs root %s",
            self.oozie_url,
            self.namenode_url,
            self.datanode_url,
            self.root,
        )

    def _datanode_base(self, request: web.Request) -> str:
        if self.host in WILDCARD:
            # Redirect to the name the client used to reach the NameNode (it can reach us by it).
            return f"http://{request.url.host or '127.0.0.1'}:{self._dn_port}"
        return self.datanode_url

    def _count_unavailable(self, side: str) -> None:
        self.unavailable[side] += 1

    async def stop(self) -> None:
        if hasattr(self, "engine"):
            await self.engine.close()
        await self.notifier.close()
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()

    async def __aenter__(self) -> Emulator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _directories(root: str | Path, work_dir: str | Path | None) -> tuple[Path, Path]:
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    work = Path(work_dir).resolve() if work_dir is not None else root.parent / ".emulator-work"
    if work == root or root in work.parents:
        raise ValueError(f"the work directory {work} must not be inside the HDFS root {root}")
    return root, work


async def start_emulator(
    root: str | Path,
    *,
    host: str = "127.0.0.1",
    oozie_port: int = 0,
    namenode_port: int = 0,
    datanode_port: int = 0,
    faults: Faults | dict[str, Any] | None = None,
    work_dir: str | Path | None = None,
    rpc_port: int = 8020,
) -> Emulator:
    """Start Oozie, NameNode and DataNode endpoints (port 0: a free port) over the HDFS
    namespace in ``root``. Action working directories go to ``work_dir`` (default
    ``<root>/../.emulator-work``), outside the namespace."""
    root, work = _directories(root, work_dir)
    if isinstance(faults, dict):
        faults = Faults.model_validate(faults)
    emu = Emulator(root, host, work, faults or Faults(), rpc_port)
    try:
        await emu.start(oozie_port, namenode_port, datanode_port)
    except BaseException:
        await emu.stop()
        raise
    return emu
