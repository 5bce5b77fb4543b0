"""``python -m shared.store.embedded_server --data-dir DIR --socket PATH``: the embedded
``nx-27017`` server (the MongoDB wire protocol over SQLite), on a Unix domain socket only.

nx-27017 has no authentication, and its own entry point listens on TCP, where any local
user, and any job, could read and write the whole database. This launcher builds the
handler exactly as ``nx_27017 --data-dir DIR`` does and serves it on a Unix socket
instead (a thread per connection, as its ``--threaded`` mode): the socket is mode 0600 in a folder of mode 0700,
so only Pingo's own OS user can connect (see README, "What the local executor does not
isolate", for what that user's jobs can still do).

One server per data directory: the server holds an exclusive ``flock`` on
``DIR/nx-27017.lock`` for as long as it runs. A second launcher for the same directory
exits at once with ``SHARED`` (the other one serves it). The lock holder knows that a
socket file left at PATH is a killed server's, and replaces it.

Every process of a data directory shares its server, but only the one that started it
stops it. Asked to stop (SIGTERM, SIGINT) while other processes are still connected, the
server keeps serving them, and says so in ``DIR/nx-27017.lingering`` (its pid): it stops
once the last connection has been closed for ``IDLE_GRACE`` seconds. A second signal
stops it at once. If the process that started it is killed, it stops the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import signal
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("pingo.embedded_server")

SHARED = 3  # exit status: another server holds this data directory
LINGERING = "nx-27017.lingering"  # in the data dir while a server asked to stop still serves others
IDLE_GRACE = 0.3  # seconds without a connection before a server asked to stop does stop
SOCKET_NAME = "nx-27017.sock"  # PyMongo takes a host ending in ".sock" for a Unix socket
MAX_SOCKET_PATH = 107  # bytes: sun_path holds 108 with the terminating NUL
ID_COLUMN_SEEN = "_pingo_id_column"  # where a neosqlite Collection remembers its _id column


def socket_path(mongo_dir: Path) -> Path:
    """Where the server of ``mongo_dir`` listens: in it, or, if that path is too long for a
    Unix socket, in a private folder under the system temp dir named from the data dir's
    digest (and the user id): one data dir, one socket; two data dirs, two sockets."""
    inside = mongo_dir / SOCKET_NAME
    if len(os.fsencode(inside)) <= MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(os.fsencode(mongo_dir)).hexdigest()[:32]
    return Path(tempfile.gettempdir()) / f"pingo-{os.getuid()}-{digest}" / SOCKET_NAME


def private_dir(path: Path) -> None:
    """Make ``path`` (and its parents) if needed, and make sure only this user can enter
    it: mode 0700, a real folder (not a link), owned by this user. A folder someone else
    made (say, under /tmp, to plant a socket of their own) is refused."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeError(f"{path} should be a folder private to this user, and is not a folder")
    if st.st_uid != os.getuid():
        raise RuntimeError(f"{path} should be a folder private to this user, and belongs to uid {st.st_uid}")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


async def linger(
    connections: dict[socket.socket, threading.Thread], changed: asyncio.Event, now: asyncio.Event, lingering: Path
) -> None:
    """Asked to stop: serve until the open ``connections`` close (``changed`` is set at
    each close), or until asked again (``now``). The process that asked closed its own
    connections just before; those of other processes may remain: then the server says
    so, in the log and in ``lingering`` (its pid)."""
    told = False
    while not now.is_set():
        await asyncio.sleep(IDLE_GRACE)
        if not connections:
            return
        if not told:
            others = len(connections)
            log.info("asked to stop; %d connections of other processes open: serving until they close", others)
            await asyncio.to_thread(lingering.write_text, str(os.getpid()))
            told = True
        changed.clear()
        waits = [asyncio.ensure_future(changed.wait()), asyncio.ensure_future(now.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in pending:
            w.cancel()


async def serve(handler: object, sock: Path, lingering: Path) -> None:
    # nx-27017's threaded connection handler (its ``--threaded`` mode): a thread per
    # connection, blocking calls. Its asyncio handler hands every command to a worker
    # thread and back, which doubled a command's latency here (docs/architecture.md, "The
    # embedded store's connections"). The handler serializes access to each database file.
    from nx_27017.server import handle_client_threaded

    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    # The open connections and their threads; only the loop's thread changes it.
    connections: dict[socket.socket, threading.Thread] = {}

    def closed(conn: socket.socket) -> None:
        connections.pop(conn, None)
        changed.set()

    def client(conn: socket.socket) -> None:
        try:
            handle_client_threaded(conn, handler)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone: the server is stopping
                loop.call_soon_threadsafe(closed, conn)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    os.chmod(sock, 0o600)  # already 0700 by the umask; the folder is 0700 too
    listener.listen(128)
    listener.setblocking(False)

    async def accept() -> None:
        while True:
            conn, _ = await loop.sock_accept(listener)
            conn.setblocking(True)
            connections[conn] = thread = threading.Thread(
                target=client, args=(conn,), name="nx-27017 connection", daemon=True
            )
            thread.start()

    acceptor = asyncio.create_task(accept())
    asked = asyncio.Event()
    now = asyncio.Event()

    def on_signal() -> None:
        (now if asked.is_set() else asked).set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)

    async def orphaned(parent: int) -> None:
        """The process that started it ended without asking (killed): as if it had asked."""
        while os.getppid() == parent:
            await asyncio.sleep(1.0)
        log.info("the process that started it (pid %d) is gone", parent)
        asked.set()

    watch = asyncio.create_task(orphaned(os.getppid()))
    log.info("nx-27017 listening on %s", sock)
    try:
        await asked.wait()
        watch.cancel()
        await linger(connections, changed, now, lingering)
    finally:
        acceptor.cancel()
        listener.close()
        # Connections still open end here: their threads leave their reads, and no command
        # is in flight when the databases are closed. One stuck past the wait (a daemon
        # thread) does not keep the process from exiting.
        for conn, thread in list(connections.items()):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            await asyncio.to_thread(thread.join, 5.0)


def skip_unused_estimate() -> None:
    """nx-27017 (neosqlite) starts every aggregate by counting the whole collection, only to
    choose a memory-bounded path that needs the optional ``quez`` package; without it the
    count is thrown away. It grows with the store (2 ms per 100,000 documents, on every
    aggregate: the decision service's usage sums, the gauges, a workflow's settling), so
    without ``quez`` the estimate is skipped (docs/performance.md, "A long history")."""
    from neosqlite.collection import aggregation_cursor

    if not aggregation_cursor.QUEZ_AVAILABLE:
        aggregation_cursor.AggregationCursor._estimate_result_size = lambda self: 0  # type: ignore[method-assign]


def remember_id_column() -> None:
    """neosqlite asks SQLite for a collection's columns (``PRAGMA table_info``) every time
    it names the column that holds ``_id`` in a query: twice a command, on average. It is
    ``_id`` in every table neosqlite makes, and a table of an older neosqlite gains it when
    its collection is opened; a column is never removed. So once a collection has shown
    it, it is remembered (a table without it is asked again each time, as before)."""
    from neosqlite.collection import Collection

    asked = Collection._id_column

    def _id_column(self: Collection) -> str:
        # The instance's own dict: Collection.__getattr__ answers names it lacks.
        known = self.__dict__.get(ID_COLUMN_SEEN)
        if known is None:
            known = asked.fget(self)  # type: ignore[attr-defined]
            if known == "_id":
                self.__dict__[ID_COLUMN_SEEN] = known
        return known

    Collection._id_column = property(_id_column)  # type: ignore[method-assign,assignment]


def share_projected_fields() -> None:
    """neosqlite deep-copies every document a find returns with a projection, field by
    field, only to drop the excluded fields from its top level (or to take ``_id`` from
    the copy when fields are picked). A found document is loaded for that one answer and
    nothing else holds it, so a find's documents are projected from a shallow copy, as
    neosqlite's own code does otherwise (docs/performance.md, "The embedded store's CPU per
    command"). Projections with expressions, and every other caller (an aggregate's
    stages, which may run several sub-pipelines on the same documents), keep neosqlite's."""
    from neosqlite.collection.cursor import Cursor

    deep = Cursor._apply_projection

    def _apply_projection(self: Cursor, docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        projection = self._projection
        if not projection or not all(isinstance(v, int | float) for v in projection.values()):
            return deep(self, docs)
        return [projected(self._query_helpers, projection, doc) for doc in docs]

    Cursor._apply_projection = _apply_projection  # type: ignore[method-assign]


def projected(helpers: Any, projection: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """neosqlite's projection by 0 and 1 (``_apply_projection``), without its deep copy."""
    include_id = projection.get("_id", 1) == 1
    if any(v == 1 for v in projection.values()):
        picked: dict[str, Any] = {}
        for key, value in projection.items():
            if value == 1 and helpers._field_exists(document, key):
                picked[key] = helpers.collection._get_val(document, key)
        if include_id and "_id" in document:
            picked["_id"] = document["_id"]
        return picked
    doc = dict(document)
    for key, value in projection.items():
        if value == 0 and key in doc:
            doc.pop(key, None)
    if not include_id and "_id" in doc:
        doc.pop("_id", None)
    return doc


def patch_nx_27017() -> None:
    """What this process changes in nx-27017 and neosqlite before serving, each step with
    the same answers and rows as theirs (docs/performance.md, "The embedded store's CPU
    per command"); the handler itself is ``embedded_commits.CommittingHandler``."""
    from shared.store.embedded_catalogue import remember_catalogue
    from shared.store.embedded_find_and_modify import read_found_document_once
    from shared.store.embedded_json_paths import remember_json_paths
    from shared.store.embedded_plans import reuse_translations
    from shared.store.embedded_replies import encode_replies_at_once

    skip_unused_estimate()
    remember_id_column()
    share_projected_fields()
    encode_replies_at_once()
    remember_catalogue()
    read_found_document_once()
    reuse_translations()
    remember_json_paths()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shared.store.embedded_server", description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", required=True, type=Path, help="one <db>.db SQLite file per database here")
    ap.add_argument("--socket", required=True, type=Path, help="the Unix socket to listen on (ends in .sock)")
    ap.add_argument("--log-file", type=Path, help="default: standard error")
    args = ap.parse_args(argv)
    os.umask(0o077)  # the databases, the log and the socket: this user's only
    data_dir = args.data_dir.resolve()
    private_dir(data_dir)
    private_dir(args.socket.parent)
    lock = open(data_dir / "nx-27017.lock", "a")  # held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another nx-27017 serves {data_dir}", file=sys.stderr)
        return SHARED
    logging.basicConfig(
        level=logging.INFO,
        filename=args.log_file,
        format="%(asctime)s - %(name)s - %(levelname)s - [%(process)d] - %(message)s",
    )
    # nx-27017 logs every command's reply at INFO in this mode: its own warnings are enough.
    logging.getLogger("nx_27017").setLevel(logging.WARNING)
    from neosqlite.options import JournalMode

    patch_nx_27017()
    from shared.store.embedded_commits import CommittingHandler

    # What nx_27017's main() builds for ``--data-dir DIR`` (its other options at their
    # defaults), committing each write command's documents together.
    handler = CommittingHandler(
        "nx-27017.db",
        tokenizers=None,
        journal_mode=JournalMode.validate("WAL"),
        data_dir=str(data_dir),
        single_db_compat=False,
    )
    args.socket.unlink(missing_ok=True)  # this process holds the lock: a socket here is a dead server's
    (data_dir / LINGERING).unlink(missing_ok=True)  # ...and so is this
    try:
        asyncio.run(serve(handler, args.socket, data_dir / LINGERING))
    finally:
        args.socket.unlink(missing_ok=True)
        (data_dir / LINGERING).unlink(missing_ok=True)
        handler.close_all()
        log.info("nx-27017 stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
