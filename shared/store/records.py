"""Typed records of stored documents, as the API reads them.

A document leaves the store as a raw dict; the reads the API makes (``workflows.record``,
``datasets.newest``, ``actions.records_of_workflow`` ...) decode it here once, into a plain
record with slots, and the views read attributes. Decoding checks nothing (the guarded
writer wrote the document): one constructor call per document, no validation per read
(docs/architecture.md, "Typed records at the edge").

Engine code that moves documents keeps reading dicts: it writes back what it reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from operator import attrgetter
from typing import Any


class Unexplained(Enum):
    """An action's ``miss`` that was never worked out: the key is absent from its document
    (where a stored null means 'never computed before')."""

    UNEXPLAINED = "unexplained"


UNEXPLAINED = Unexplained.UNEXPLAINED


@dataclass(slots=True)
class Move:
    """One entry of a document's history: the state it entered, when, who moved it and why."""

    state: str
    at: float
    by: str | None
    note: str | None


def _pushed(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """A ``$push``ed list as dicts, on every store: nx-27017 keeps its entries as JSON text
    (as ``transitions.decode`` reads them)."""
    items = doc.get(key)
    return [json.loads(h) if isinstance(h, str) else h for h in items] if items else []


class _History:
    """A record's history, decoded when read: most reads of a document never look at it."""

    __slots__ = ()
    stored_history: list[Any] | None

    @property
    def history(self) -> tuple[Move, ...]:
        entries = _pushed({"history": self.stored_history}, "history")
        return tuple(Move(h["state"], h["at"], h.get("by"), h.get("note")) for h in entries)


@dataclass(slots=True)
class WorkflowBrief:
    """A workflow's name and owner: what links to it and who may see it need."""

    id: str
    name: str | None
    owner: str | None

    @classmethod
    def of(cls, doc: dict[str, Any]) -> WorkflowBrief:
        return cls(doc["_id"], doc.get("name"), doc.get("owner"))


@dataclass(slots=True)
class WorkflowRecord(_History):
    """A stored workflow (docs/state-machines.md, "Workflow"); ``history`` is empty where
    the read left it out."""

    id: str
    state: str
    name: str | None = None
    owner: str | None = None
    counts: dict[str, int] | None = None  # planned actions: compute, reuse, follow
    outcome: dict[str, int] | None = None  # once ended: how its actions ended
    open_actions: int | None = None
    created_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    kill_requested: bool = False
    kill_requested_at: float | None = None
    killed_by: str | None = None
    stored_history: list[Any] | None = None  # as stored: read it as ``history``

    @classmethod
    def of(cls, doc: dict[str, Any]) -> WorkflowRecord:
        get = doc.get
        # Positional, in the fields' order: twice as fast as keywords on a list of thousands.
        return cls(
            doc["_id"], doc["state"], get("name"), get("owner"), get("counts"), get("outcome"), get("open_actions"),
            get("created_at"), get("finished_at"), get("error"), bool(get("kill_requested")),
            get("kill_requested_at"), get("killed_by"), get("history"),
        )  # fmt: skip


@dataclass(slots=True)
class DatasetRecord(_History):
    """A stored dataset (docs/state-machines.md, "Dataset"); ``lineage`` is None and
    ``history`` empty where the read left them out."""

    id: str  # its lineage hash
    state: str | None
    path: str | None = None
    size: int | None = None
    files: int | None = None  # as recorded at commit
    checksum: str | None = None
    committed_at: float | None = None
    compute_seconds_total: float = 0.0
    compute_count: int = 0
    use_count: int = 0
    claims: list[str] | None = None  # actions that will read it
    producers: list[str] | None = None  # actions computing it now
    produced_by: str | None = None  # the action that committed it
    owner: str | None = None  # the user whose workflow committed it
    last_used_at: float | None = None
    created_at: float | None = None
    updated_at: float | None = None
    lineage: dict[str, Any] | None = None  # {definition, parents}, as hashed
    input_changed: bool | None = None  # an external input changed while it was computed
    pinned: bool = False  # by a user: never chosen for eviction
    expires_at: float | None = None  # deleted once past, when nothing needs it
    withdrawn: dict[str, Any] | None = None  # INVALIDATED by hand or by expiry: {by, at, ...}
    nondeterministic_count: int = 0  # recomputations whose output differed from the one recorded
    stored_history: list[Any] | None = None  # as stored: read it as ``history``

    @classmethod
    def of(cls, doc: dict[str, Any]) -> DatasetRecord:
        get = doc.get
        # Positional, in the fields' order (as WorkflowRecord.of).
        return cls(
            doc["_id"], get("state"), get("path"), get("size"), get("files"), get("checksum"), get("committed_at"),
            get("compute_seconds_total") or 0.0, int(get("compute_count") or 0), get("use_count", 0),
            get("claims", []), get("producers", []), get("produced_by"), get("owner"), get("last_used_at"),
            get("created_at"), get("updated_at"), get("lineage"), get("input_changed"),
            get("pinned", False), get("expires_at"), get("withdrawn"),
            get("nondeterministic_count") or 0, get("history"),
        )  # fmt: skip

    @property
    def mean_seconds(self) -> float | None:
        """The mean time one computation took; None if it was never computed."""
        return float(self.compute_seconds_total) / self.compute_count if self.compute_count else None

    @property
    def maker(self) -> str | None:
        """The action whose output it is: the one that committed it, else the one computing it now."""
        return self.produced_by or next(iter(self.producers or []), None)

    @property
    def named_actions(self) -> list[str]:
        """The actions it names: its readers to come, its producers, its maker."""
        return [*(self.claims or []), *(self.producers or []), *filter(None, [self.produced_by])]


@dataclass(slots=True)
class AttemptRecord:
    """One attempt of an action that ended (``attempt_log``; docs/state-machines.md, "Retries and timeouts")."""

    attempt: int
    job_id: str | None
    executor: str | None
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    outcome: str
    error: str | None

    @classmethod
    def of(cls, r: dict[str, Any]) -> AttemptRecord:
        get = r.get
        return cls(
            get("attempt") or 0, get("job_id"), get("executor"), get("submitted_at"), get("started_at"),
            get("ended_at"), get("outcome") or "", get("error"),
        )  # fmt: skip


# An action's retry policy when its document has none: ``workflow_spec.RetryPolicy()``'s
# fields, the policy its planning leaves unwritten (docs/state-machines.md, "Action").
DEFAULT_RETRIES: dict[str, float] = {"count": 0, "delaySeconds": 10.0, "backoff": 2.0}


@dataclass(slots=True)
class ActionRecord(_History):
    """A stored action as the API shows it (the whole shape: ``actions.ActionDoc``); a field
    the read left out has its default."""

    id: str
    workflow_id: str | None = None
    local_id: int | str | None = None
    name: str | None = None
    hash: str | None = None
    decision: str | None = None  # compute or reuse
    state: str | None = None
    reason: str | None = None
    output_path: str | None = None
    follows: str | None = None
    type: str | None = None
    managed: bool | None = None
    force: bool | None = None
    parent_local_ids: list[int | str] | None = None
    attempt: int = 0
    attempt_log: tuple[AttemptRecord, ...] = ()
    failed_attempts: int = 0
    retry_at: float | None = None
    retries: dict[str, float] | None = None
    timeout_seconds: float | None = None
    submit_errors: int = 0
    job_id: str | None = None
    created_at: float | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    seconds: float | None = None
    size: int | None = None
    error: str | None = None
    followers: list[str] | None = None
    successor: str | None = None
    takeover_of: str | None = None
    definition: dict[str, Any] | None = None  # as hashed; its ``inputs`` are the external inputs
    input_changed: list[dict[str, Any]] | None = None  # external inputs that changed while it ran
    held: dict[str, Any] | None = None  # READY but not started: {reason, message} (the storage budget)
    expected_bytes: int | None = None  # declared expectedBytes
    # What changed since it was last computed (null: never computed before); UNEXPLAINED
    # where no miss was worked out (not computed, or stored before misses were).
    miss: dict[str, Any] | Unexplained | None = UNEXPLAINED
    nondeterministic: dict[str, Any] | None = None  # its output differs from its lineage's last one
    stored_history: list[Any] | None = None  # as stored: read it as ``history``

    @classmethod
    def of(cls, doc: dict[str, Any]) -> ActionRecord:
        get = doc.get
        # Positional, in the fields' order (as WorkflowRecord.of).
        return cls(
            doc["_id"], get("workflow_id"), get("local_id"), get("name"), get("hash"), get("decision"), get("state"),
            get("reason"), get("output_path"), get("follows"), get("type"), get("managed"), get("force", False),
            get("parent_local_ids", []), get("attempt", 0),
            tuple(AttemptRecord.of(r) for r in _pushed(doc, "attempt_log")), get("failed_attempts", 0),
            get("retry_at"), get("retries", DEFAULT_RETRIES), get("timeout_seconds"), get("submit_errors", 0),
            get("job_id"), get("created_at"), get("submitted_at"), get("started_at"), get("finished_at"),
            get("seconds"), get("size"), get("error"), get("followers", []), get("successor"), get("takeover_of"),
            get("definition"), get("input_changed"), get("held"), get("expected_bytes"),
            get("miss", UNEXPLAINED), get("nondeterministic"), get("history"),
        )  # fmt: skip


@dataclass(slots=True)
class UserRecord:
    """A user (docs/users.md): a revoked one keeps their record, and loses every token."""

    name: str
    admin: bool
    created_at: float | None
    revoked_at: float | None

    @classmethod
    def of(cls, doc: dict[str, Any]) -> UserRecord:
        get = doc.get
        return cls(doc["_id"], bool(get("admin")), get("created_at"), get("revoked_at"))

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(slots=True)
class KeyRecord:
    """An Idempotency-Key taken by a submission (docs/api.md, "Retrying a submission"):
    who holds it (``token``) for which workflow, and, once ``state`` is done, the answer
    given (``{status, location, body}``, the body compressed or None)."""

    id: Any  # the document's _id: what a guarded delete or take-over names
    user: str
    key: str
    fingerprint: str | None
    token: str | None
    workflow_id: str
    state: str | None
    created_at: float | None
    taken_at: float | None
    answer: dict[str, Any] | None

    @classmethod
    def of(cls, doc: dict[str, Any]) -> KeyRecord:
        get = doc.get
        return cls(
            doc["_id"], doc["user"], doc["key"], get("fingerprint"), get("token"), doc["workflow_id"], get("state"),
            get("created_at"), get("taken_at"), get("answer"),
        )  # fmt: skip


@dataclass(slots=True)
class Totals:
    """The history counters (``stats.COUNTERS``) summed over a span, and failed actions by
    reason: one bucket's, one user's, or the team's (docs/api.md, "History statistics")."""

    workflows_submitted: int = 0
    actions_computed: int = 0
    actions_reused: int = 0
    actions_skipped: int = 0
    compute_seconds: float = 0.0
    saved_seconds: float = 0.0
    saved_others_seconds: float = 0.0
    bytes_written: int = 0
    bytes_deleted: int = 0
    actions_nondeterministic: int = 0
    actions_cut_off: int = 0  # of actions_reused: cut off early at their start (docs/planning.md)
    failures: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_all(cls, items: Sequence[Totals]) -> Totals:
        """The sum of ``items``: a counter at a time (a field at a time is five times slower)."""
        failures: dict[str, int] = {}
        for t in items:
            for reason, n in t.failures.items():
                failures[reason] = failures.get(reason, 0) + n
        return cls(*(sum(map(attrgetter(name), items)) for name in COUNTERS), failures)  # type: ignore[arg-type]


@dataclass(slots=True)
class BucketRecord(Totals):
    """One time bucket of the history statistics: [start, end)."""

    start: float = 0.0
    end: float = 0.0

    @classmethod
    def of(cls, doc: dict[str, Any], width: int, failure_prefix: str) -> BucketRecord:
        get = doc.get
        cut = len(failure_prefix)
        failures = {k[cut:]: v for k, v in doc.items() if k.startswith(failure_prefix)}
        return cls(*(get(k, 0) for k in COUNTERS), failures, doc["start"], doc["start"] + width)  # type: ignore[arg-type]

    @classmethod
    def empty(cls, start: float, width: int) -> BucketRecord:
        return cls(start=start, end=start + width)


# The counters, in their order: what a history bucket counts besides its failures.
COUNTERS = tuple(name for name in Totals.__dataclass_fields__ if name != "failures")
