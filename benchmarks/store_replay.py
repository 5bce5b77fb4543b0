"""The embedded store's CPU per command, measured apart from everything else: record the
commands a run sends, replay them against a fresh handler in one process, and compare two
replays' replies and stored rows byte for byte (docs/performance.md, "The embedded
store's CPU per command").

    python benchmarks/store_replay.py record REC [hop_profile.py's options]
        runs benchmarks/hop_profile.py with the embedded server writing every OP_MSG it
        reads to REC (its raw bytes, in the order they were read)
    python benchmarks/store_replay.py replay REC [--repeat 3] [--trace] [--out F]
        each command through a fresh handler with the launcher's changes
        (``embedded_server.patch_nx_27017``): thread CPU per command (handling and reply),
        by command, the fastest of ``--repeat``; ``--trace`` also counts SQLite statements
        per command (``sqlite_master`` reads apart); ``--out`` keeps replies and rows
    python benchmarks/store_replay.py compare F1 F2
        two replays' replies and rows: which differ (an ``ismaster``'s clock aside); and,
        if both were replayed with ``--trace``, each command's SQL statements

Run ``replay`` with PYTHONPATH and cwd at the tree to measure (a detached worktree of main
for "before"), alternating the two, on one recording.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import itertools
import pickle
import statistics
import struct
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

CURSOR_IDS_FROM = 1_000_000_000_000  # nx-27017's first cursor id
RECORD_ENV = "STORE_REPLAY_RECORD"  # not PINGO_*: the servers' starters drop those

# Added to hop_profile.py's sitecustomize: in the embedded server's process only.
RECORDER = textwrap.dedent(
    f'''
    if os.environ.get("{RECORD_ENV}"):
        try:
            _cmdline = open("/proc/self/cmdline", "rb").read()
        except OSError:
            _cmdline = b""
        if b"shared.store.embedded_server" in _cmdline:
            import struct as _struct, threading as _threading
            from nx_27017 import wire_protocol as _wire

            _record = open(os.environ["{RECORD_ENV}"], "ab")
            _record_lock = _threading.Lock()
            _parse = _wire.OP_MSG.parse

            def _recorded(message):
                with _record_lock:
                    _record.write(_struct.pack("<I", len(message)) + bytes(message))
                    _record.flush()
                return _parse(message)

            _wire.OP_MSG.parse = staticmethod(_recorded)
    '''
)


def record(path: Path, options: list[str]) -> None:
    import os

    import hop_profile

    path.unlink(missing_ok=True)
    os.environ[RECORD_ENV] = str(path.resolve())
    hop_profile.SITECUSTOMIZE += RECORDER
    sys.argv = ["hop_profile.py", *options]
    hop_profile.main()


def messages(path: Path) -> list[bytes]:
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        out.append(data[at + 4 : at + 4 + n])
        at += 4 + n
    return out


def command_name(msg: dict[str, Any]) -> str:
    body = next(doc for kind, doc in msg["sections"] if kind == "body")
    return next(iter(body))


def prepare() -> None:
    """The launcher's changes, as the server makes them before serving."""
    from shared.store import embedded_server

    if hasattr(embedded_server, "patch_nx_27017"):
        embedded_server.patch_nx_27017()
    else:  # a tree from before they were gathered in one function
        from shared.store.embedded_replies import encode_replies_at_once

        embedded_server.skip_unused_estimate()
        embedded_server.remember_id_column()
        embedded_server.share_projected_fields()
        encode_replies_at_once()


def replay_once(raw: list[bytes], trace: bool) -> tuple[int, list[str], dict[str, Any]]:
    """Thread CPU in all (ns), the report's lines, and what was answered and stored."""
    from neosqlite.options import JournalMode
    from nx_27017 import handler as handler_module
    from nx_27017.wire_protocol import OP_MSG, ResponseBuilder

    from shared.store.embedded_commits import CommittingHandler

    # Cursor ids count up for the process: each replay starts them where a server does.
    handler_module._data_cursor_id_counter = itertools.count(CURSOR_IDS_FROM)
    data = tempfile.mkdtemp(prefix="store-replay-")
    handler = CommittingHandler(
        "nx-27017.db",
        tokenizers=None,
        journal_mode=JournalMode.validate("WAL"),
        data_dir=data,
        single_db_compat=False,
    )
    statements: list[str] = []
    counted: collections.Counter[str] = collections.Counter()
    times: dict[str, list[int]] = collections.defaultdict(list)
    replies: list[tuple[str, bytes]] = []
    executed: list[list[str]] = []  # with --trace: each command's statements, values bound
    for i, message in enumerate(raw):
        msg = OP_MSG.parse(message)
        msg["_conn_id"] = "replay"
        name = command_name(msg)
        inserts = name == "insert" or any(kind == "payload_docs" for kind, _ in msg["sections"])
        if trace:
            for database in handler.databases.values():
                database.db.set_trace_callback(statements.append)
        started = time.thread_time_ns()
        try:
            _, doc = handler.handle_insert(msg) if inserts else handler.handle_command(msg)
        except Exception as exc:  # as nx-27017's connection thread answers
            doc = {"ok": 0, "errmsg": str(exc)}
        reply = ResponseBuilder.build_op_msg_reply(request_id=i, response_to=i, document=doc)
        times[name].append(time.thread_time_ns() - started)
        replies.append((name, reply))
        counted["statements"] += len(statements)
        counted["sqlite_master reads"] += sum("sqlite_master" in s for s in statements)
        if trace:
            executed.append(list(statements))
        statements.clear()
    total = sum(sum(t) for t in times.values())
    lines = [f"{len(raw)} commands, {total / len(raw) / 1000:.1f} us per command (handling and reply, thread CPU)"]
    for name, spent in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        lines.append(
            f"  {name:16s} {len(spent):6d}  mean {statistics.mean(spent) / 1000:7.1f} us"
            f"  median {statistics.median(spent) / 1000:7.1f}  total {sum(spent) / 1e6:7.1f} ms"
        )
    if trace:
        lines += [f"  {count / len(raw):6.2f} {what} per command" for what, count in counted.items()]
    rows: dict[tuple[str, str], Any] = {}
    for db_name, database in handler.databases.items():
        sql = database.db
        schema = sql.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
        rows[(db_name, "")] = schema
        for kind, table, _, _ in schema:
            if kind == "table" and table != "sqlite_sequence":
                rows[(db_name, table)] = sql.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()
    handler.close_all()
    return total, lines, {"replies": replies, "rows": rows, "statements": executed}


def compare(first: Path, second: Path) -> int:
    import bson

    a, b = pickle.loads(first.read_bytes()), pickle.loads(second.read_bytes())

    def same(x: tuple[str, bytes], y: tuple[str, bytes]) -> bool:
        if x[1][4:] == y[1][4:]:  # bar the request id
            return True
        if x[0] not in ("ismaster", "isMaster", "hello"):
            return False
        dx, dy = bson.decode(x[1][21:]), bson.decode(y[1][21:])
        dx.pop("localTime", None)
        dy.pop("localTime", None)
        return dx == dy

    differ = [i for i, (x, y) in enumerate(zip(a["replies"], b["replies"], strict=True)) if not same(x, y)]
    tables = [k for k in a["rows"].keys() | b["rows"].keys() if a["rows"].get(k) != b["rows"].get(k)]
    print(f"{len(a['replies'])} replies, {len(differ)} differ {differ[:10]}; tables that differ: {tables}")
    ran = []  # both replayed with --trace: the commands whose SQL (values bound) differs
    if a.get("statements") and b.get("statements"):
        ran = [i for i, (x, y) in enumerate(zip(a["statements"], b["statements"], strict=True)) if x != y]
        print(f"SQL statements (values bound) differ in {len(ran)} commands {ran[:10]}")
    return 1 if differ or tables or ran else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("recording", type=Path)
    rep = sub.add_parser("replay")
    rep.add_argument("recording", type=Path)
    rep.add_argument("--repeat", type=int, default=3)
    rep.add_argument("--trace", action="store_true")
    rep.add_argument("--out", type=Path)
    cmp = sub.add_parser("compare")
    cmp.add_argument("first", type=Path)
    cmp.add_argument("second", type=Path)
    args, rest = ap.parse_known_args()
    if args.what == "record":
        record(args.recording, rest)
    elif args.what == "compare":
        sys.exit(compare(args.first, args.second))
    else:
        prepare()
        raw = messages(args.recording)
        best: tuple[int, list[str], dict[str, Any]] | None = None
        for _ in range(args.repeat):
            with contextlib.redirect_stdout(io.StringIO()):
                got = replay_once(raw, args.trace)
            if best is None or got[0] < best[0]:
                best = got
        assert best is not None
        print("\n".join(best[1]))
        if args.out:
            args.out.write_bytes(pickle.dumps(best[2]))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
