"""What the API's list views cost per document: N stored documents, as the store hands
them back, decoded into their typed records (``shared/store/records.py``) and shown as the
workflows and datasets lists' JSON. No server: the decoding and the views alone, best and
median of ``--repeat`` runs, per document.

    .venv/bin/python benchmarks/api_views.py [-n 1000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from services.workflow_manager.views import DatasetList, WorkflowList, action_view, dataset_view, workflow_view
from shared.store.records import ActionRecord, DatasetRecord, WorkflowRecord


def workflow_doc(i: int) -> dict[str, Any]:
    """A finished workflow as ``workflows.newest`` reads it (no history)."""
    return {
        "_id": f"wf-{i:032x}", "name": f"w{i}", "owner": "alice", "state": "SUCCEEDED",
        "counts": {"compute": 3, "reuse": 1, "follow": 0}, "outcome": {"finished": 3, "reused": 1},
        "open_actions": 0, "created_at": 1e9 + i, "updated_at": 1e9 + i, "finished_at": 1e9 + i + 5,
        "kill_requested": False, "planner": "p", "planning_lease_at": 1e9, "action_count": 4, "last_move_at": 1e9,
    }  # fmt: skip


def dataset_doc(i: int) -> dict[str, Any]:
    """A stored dataset as ``datasets.newest`` reads it (no history, no lineage)."""
    return {
        "_id": f"{i:064x}", "hash": f"{i:064x}", "state": "STORED", "path": f"/pingo/d/{i}",
        "claims": [f"wf-{i:032x}.2"], "producers": [], "produced_by": f"wf-{i:032x}.1", "size": 1000 + i,
        "files": 2, "checksum": "abc", "compute_seconds_total": 12.0, "compute_count": 3, "use_count": 4,
        "owner": "alice", "created_at": 1e9, "updated_at": 1e9 + i, "last_used_at": 1e9 + i, "committed_at": 1e9 + 1,
    }  # fmt: skip


def action_doc(i: int) -> dict[str, Any]:
    """A finished action as a workflow's detail reads it (with its history and one attempt)."""
    return {
        "_id": f"wf-1.{i}", "workflow_id": "wf-1", "local_id": i, "name": f"a{i}", "type": "SHELL",
        "hash": f"{i:064x}", "managed": True, "force": False, "decision": "compute", "reason": "not_stored",
        "state": "FINISHED", "output_path": f"/pingo/d/{i}", "parents": [], "parent_local_ids": [i - 1],
        "followers": [], "attempt": 1, "submit_errors": 0, "failed_attempts": 0, "job_id": f"job-{i}",
        "executor": "local", "created_at": 1e9, "submitted_at": 1e9 + 1, "started_at": 1e9 + 2,
        "finished_at": 1e9 + 3, "seconds": 1.0, "size": 10,
        "attempt_log": [{"attempt": 1, "job_id": f"job-{i}", "executor": "local", "outcome": "succeeded"}],
        "history": [{"state": s, "at": 1e9 + n, "by": "action_manager"} for n, s in enumerate(
            ["READY", "SUBMITTED", "RUNNING", "FINISHED"])],
    }  # fmt: skip


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1000, help="documents per run")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    workflows = [workflow_doc(i) for i in range(args.n)]
    datasets = [dataset_doc(i) for i in range(args.n)]
    actions = [action_doc(i) for i in range(args.n)]
    cases: dict[str, Callable[[], object]] = {
        "decode workflows": lambda: [WorkflowRecord.of(d) for d in workflows],
        "decode datasets": lambda: [DatasetRecord.of(d) for d in datasets],
        "decode actions": lambda: [ActionRecord.of(d) for d in actions],
        "action views": lambda: [action_view(ActionRecord.of(d)).model_dump_json() for d in actions],
        "workflow list JSON": lambda: WorkflowList(
            workflows=[workflow_view(WorkflowRecord.of(d)) for d in workflows], next=None
        ).model_dump_json(),
        "dataset list JSON": lambda: DatasetList(
            capacityBytes=1,
            threshold=0.8,
            managedRootBytes=None,
            bytesByState={},
            datasets=[dataset_view(DatasetRecord.of(d)) for d in datasets],
            next=None,
        ).model_dump_json(),
    }
    for name, fn in cases.items():
        best, median = timed(fn, args.repeat)
        print(f"{name:20} best {best * 1e6 / args.n:6.2f} µs/doc, median {median * 1e6 / args.n:6.2f} µs/doc")


if __name__ == "__main__":
    main()
