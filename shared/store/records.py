"""Typed records of stored documents, as the API reads them.

A document leaves the store as a raw dict; the reads the API makes (``workflows.record``,
``workflows.newest``, ``workflows.briefs``, ``datasets.record``, ``datasets.newest``) decode
it here once, into a plain record with slots, and the views read attributes. Decoding
checks nothing (the guarded writer wrote the document): one constructor call per document,
no validation per read (docs/architecture.md, "Typed records at the edge").

Engine code that moves documents keeps reading dicts: it writes back what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.store.transitions import decode


@dataclass(slots=True)
class Move:
    """One entry of a document's history: the state it entered, when, who moved it and why."""

    state: str
    at: float
    by: str | None
    note: str | None


def history(doc: dict[str, Any]) -> tuple[Move, ...]:
    """A document's history (read back as dicts on every store: ``transitions.decode``)."""
    items = decode({"history": doc.get("history")}) if doc.get("history") else None
    return tuple(Move(h["state"], h["at"], h.get("by"), h.get("note")) for h in (items or {}).get("history") or ())


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
class WorkflowRecord:
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
    history: tuple[Move, ...] = ()

    @classmethod
    def of(cls, doc: dict[str, Any]) -> WorkflowRecord:
        get = doc.get
        # Positional, in the fields' order: twice as fast as keywords on a list of thousands.
        return cls(
            doc["_id"], doc["state"], get("name"), get("owner"), get("counts"), get("outcome"), get("open_actions"),
            get("created_at"), get("finished_at"), get("error"), bool(get("kill_requested")),
            get("kill_requested_at"), get("killed_by"), history(doc) if "history" in doc else (),
        )  # fmt: skip


@dataclass(slots=True)
class DatasetRecord:
    """A stored dataset (docs/state-machines.md, "Dataset"); ``lineage`` is None and
    ``history`` empty where the read left them out."""

    id: str  # its lineage hash
    state: str
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
    history: tuple[Move, ...] = ()

    @classmethod
    def of(cls, doc: dict[str, Any]) -> DatasetRecord:
        get = doc.get
        # Positional, in the fields' order (as WorkflowRecord.of).
        return cls(
            doc["_id"], doc["state"], get("path"), get("size"), get("files"), get("checksum"), get("committed_at"),
            get("compute_seconds_total") or 0.0, int(get("compute_count") or 0), get("use_count", 0),
            get("claims", []), get("producers", []), get("produced_by"), get("owner"), get("last_used_at"),
            get("created_at"), get("updated_at"), get("lineage"), history(doc) if "history" in doc else (),
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
