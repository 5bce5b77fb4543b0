"""The embedded store's aggregates do not count the whole collection first
(``shared.store.embedded_server.skip_unused_estimate``; docs/performance.md, "A long
history"): with 100,000 actions stored, that count alone cost every aggregate 2 ms."""

from __future__ import annotations

from pathlib import Path

import neosqlite

from shared.store.embedded_server import skip_unused_estimate


def test_an_aggregate_reads_only_what_its_match_selects(tmp_path: Path) -> None:
    skip_unused_estimate()  # as the embedded server does before serving
    db = neosqlite.Connection(str(tmp_path / "t.db"))
    actions = db["actions"]
    actions.create_index("state")
    actions.insert_many([{"state": "FINISHED" if i % 10 else "RUNNING", "size": i} for i in range(500)])
    statements: list[str] = []
    db.db.set_trace_callback(statements.append)
    group = {"_id": None, "n": {"$sum": 1}, "bytes": {"$sum": "$size"}}
    pipeline = [{"$match": {"state": "RUNNING"}}, {"$group": group}]
    rows = list(actions.aggregate(pipeline))
    assert [(r["n"], r["bytes"]) for r in rows] == [(50, sum(range(0, 500, 10)))]
    assert statements and not [s for s in statements if "COUNT(" in s.upper() and "WHERE" not in s.upper()]
    db.close()
