"""External inputs: the files and folders an action reads that no action of Pingo made
(docs/planning.md, "External inputs").

A value of ``additionalInput`` that names an existing path on the action's storage is an
input; its fingerprint (``Storage.input_print``) is part of the action's definition, so of
its lineage hash: a changed input is a miss, and so are its descendants. This module says
which values name one (``candidates``) and how two fingerprints differ (``changes``); the
gateway checks where they point and fingerprints them (``services/workflow_manager/
submission.py``), and a commit fingerprints them again (``shared/lifecycle/ending.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from shared.storage.base import InputTooLarge, Storage
from shared.workflow_spec import ActionSpec

# The fields of a fingerprint, in the order a change is told (``changes``).
PRINT_FIELDS = ("kind", "size", "files", "mtime_ns", "mtime_ms", "checksum", "digest")


@dataclass(frozen=True)
class Candidate:
    """A value that may name an input: its place in ``additionalInput`` and the path."""

    index: int
    path: str  # as written: an absolute path, or an hdfs:// URI's path
    declared: bool  # {"input": true} or {"input": "/path"}: it must exist and be readable
    problem: str | None = None  # a declared input that names no path of the storage


def _path_of(value: str, on_hdfs: bool) -> str | None:
    """The storage path ``value`` names, if it has the shape of one: an absolute path, or
    on HDFS an ``hdfs://`` URI (its path; the authority is the cluster's own)."""
    if on_hdfs and value.startswith("hdfs://"):
        return urlsplit(value).path or None
    return value if value.startswith("/") else None


def candidates(a: ActionSpec, on_hdfs: bool) -> list[Candidate]:
    """The values of ``a.additionalInput`` that may name an input, in order."""
    out: list[Candidate] = []
    for j, p in enumerate(a.additionalInput):
        if p.input is False:
            continue
        declared = p.input is not None
        written = p.input if isinstance(p.input, str) else p.value
        path = _path_of(written, on_hdfs)
        if path is not None:
            out.append(Candidate(j, path, declared))
        elif declared:
            shape = "an absolute path or an hdfs:// URI" if on_hdfs else "an absolute path"
            out.append(Candidate(j, written, True, f"input {written!r} must be {shape}"))
    return out


def changes(before: dict[str, Any], after: dict[str, Any] | None) -> list[str]:
    """What differs between two fingerprints of one input, in words: ``size 10 -> 12``;
    ``["missing"]`` if it is gone."""
    if after is None:
        return ["missing"]
    return [
        f"{field} {_short(before.get(field))} -> {_short(after.get(field))}"
        for field in PRINT_FIELDS
        if before.get(field) != after.get(field)
    ]


def _short(value: Any) -> Any:
    """A digest cut to what tells two apart at a glance; the whole is in the fingerprints."""
    return f"{value[:19]}…" if isinstance(value, str) and len(value) > 20 else value


async def changed_since(
    storage: Storage, recorded: list[dict[str, Any]], checksum: bool, max_files: int, user: str | None
) -> list[dict[str, Any]]:
    """The inputs among ``recorded`` (an action's, as fingerprinted at planning) whose
    fingerprint taken now differs: ``{"path", "changes"}`` each. Asked when its output is
    committed: an input changed while the action ran makes an output of neither version."""
    out: list[dict[str, Any]] = []
    for before in recorded:
        fingerprint = {k: v for k, v in before.items() if k != "path"}
        try:
            now = await storage.input_print(before["path"], checksum, max_files, user)
        except InputTooLarge as exc:
            out.append({"path": before["path"], "changes": [str(exc)]})
            continue
        if now != fingerprint:
            out.append({"path": before["path"], "changes": changes(fingerprint, now)})
    return out
