"""Typed records of stored documents (shared/store/records.py): each field reads the
document's key of the same name, whatever order the decoder passes them in."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from shared.store.records import ActionRecord, AttemptRecord, DatasetRecord, Move, WorkflowBrief, WorkflowRecord
from shared.workflow_spec import RetryPolicy

HISTORY = [{"state": "PLANNING", "at": 1.0, "by": "workflow_manager"}, {"state": "RUNNING", "at": 2.0, "note": "n"}]


def _every_field_distinct(record: type, **special: Any) -> dict[str, Any]:
    """A document with a distinct value under each of the record's fields."""
    doc: dict[str, Any] = {f.name: f"value of {f.name}" for f in fields(record)}
    doc["_id"] = doc.pop("id")
    return {**doc, **special}


def test_a_workflow_record_holds_each_field_of_its_document() -> None:
    doc = _every_field_distinct(WorkflowRecord, kill_requested=True, history=HISTORY)
    record = WorkflowRecord.of(doc)
    for f in fields(WorkflowRecord):
        if f.name not in ("id", "stored_history"):
            assert getattr(record, f.name) == doc[f.name], f.name
    assert record.id == doc["_id"]
    assert record.history == (Move("PLANNING", 1.0, "workflow_manager", None), Move("RUNNING", 2.0, None, "n"))


def test_a_dataset_record_holds_each_field_of_its_document() -> None:
    doc = _every_field_distinct(DatasetRecord, compute_count=4, compute_seconds_total=10.0, history=HISTORY)
    record = DatasetRecord.of(doc)
    for f in fields(DatasetRecord):
        if f.name not in ("id", "stored_history"):
            assert getattr(record, f.name) == doc[f.name], f.name
    assert record.id == doc["_id"] and record.mean_seconds == 2.5 and len(record.history) == 2


def test_an_action_record_holds_each_field_of_its_document_and_its_attempts() -> None:
    log = [{"attempt": 1, "job_id": "j1", "outcome": "failed", "error": "exit 4"}]
    doc = _every_field_distinct(ActionRecord, attempt_log=log, history=HISTORY)
    record = ActionRecord.of(doc)
    for f in fields(ActionRecord):
        if f.name not in ("id", "stored_history", "attempt_log"):
            assert getattr(record, f.name) == doc[f.name], f.name
    assert record.attempt_log == (AttemptRecord(1, "j1", None, None, None, None, "failed", "exit 4"),)
    assert [m.state for m in record.history] == ["PLANNING", "RUNNING"]
    entry: dict[str, Any] = {f.name: f"value of {f.name}" for f in fields(AttemptRecord)}
    assert AttemptRecord.of(entry) == AttemptRecord(**entry)


def test_a_record_of_a_partial_read_has_the_defaults_of_what_was_left_out() -> None:
    wf = WorkflowRecord.of({"_id": "wf-1", "state": "RUNNING", "owner": "ann"})
    assert (wf.owner, wf.kill_requested, wf.history, wf.counts) == ("ann", False, (), None)
    d = DatasetRecord.of({"_id": "h", "state": "STORED", "producers": ["wf-1.2"]})
    assert (d.claims, d.compute_count, d.use_count, d.mean_seconds, d.maker) == ([], 0, 0, None, "wf-1.2")
    assert WorkflowBrief.of({"_id": "wf-1"}) == WorkflowBrief("wf-1", None, None)
    a = ActionRecord.of({"_id": "wf-1.1", "name": "a"})
    assert (a.name, a.attempt, a.parent_local_ids, a.followers, a.attempt_log) == ("a", 0, [], [], ())


def test_a_history_kept_as_json_text_reads_back_as_moves() -> None:
    """nx-27017 keeps $push-ed entries as JSON text (shared/store/transitions.py, decode)."""
    doc = {"_id": "h", "state": "STORED", "history": [json.dumps(h) for h in HISTORY]}
    assert [m.state for m in DatasetRecord.of(doc).history] == ["PLANNING", "RUNNING"]


def test_an_action_without_its_retry_policy_reads_the_default_one() -> None:
    # Its planning leaves the default policy unwritten (shared.lifecycle.submitting.action_document).
    record = ActionRecord.of({"_id": "wf-1.1"})
    assert record.retries == RetryPolicy().model_dump()
    assert (record.force, record.failed_attempts, record.submit_errors, record.attempt_log, record.followers) == (
        False, 0, 0, (), [],
    )  # fmt: skip
