"""Which datasets early cutoff looks at (docs/planning.md, "Early cutoff"): pure rules on
documents, apart from ``cutoff`` so that the planners' gates can ask them without importing
the engine above them. Which actions it looks at is a question of why each is computed,
answered once at planning (``misses.Miss.may_be_cut_off``) and recorded on the action."""

from __future__ import annotations

from typing import Any

from shared.states import DATASET_REUSABLE, DatasetState


def stable(doc: dict[str, Any]) -> bool:
    """Its output is a function of its lineage: not made from an input that changed while it
    ran, and never found to differ when computed again (the determinism audit)."""
    return not doc.get("input_changed") and not doc.get("nondeterministic_count")


def stand_in(doc: dict[str, Any] | None) -> str | None:
    """The dataset standing in for ``doc``: an action cut off early records on its own
    dataset the twin lineage's output it reused instead. It stands in where that dataset
    cannot be reused itself: never made (DELETED), gone since (LOST), or made from an input
    that changed while it ran; never where a user withdrew it (INVALIDATED: recompute)."""
    twin = (doc or {}).get("twin") or {}
    if doc is None or not twin.get("hash"):
        return None
    state = doc.get("state")
    if state in (DatasetState.DELETED, DatasetState.LOST) or (state in DATASET_REUSABLE and doc.get("input_changed")):
        return twin["hash"]
    return None


def stand_ins(known: dict[str, dict[str, Any]]) -> set[str]:
    """The hashes standing in for datasets of ``known`` that are not read yet."""
    return {h for d in known.values() if (h := stand_in(d)) is not None} - set(known)


def may_stand_in(doc: dict[str, Any] | None) -> bool:
    """A twin a plan may reuse in place of a cut-off dataset: stored, with its checksum
    recorded, and a function of its lineage (which the claim policy's REUSE implies). The
    one rule a submission's gate and the dry run's ask of a twin."""
    if doc is None or doc.get("state") not in (DatasetState.STORED, DatasetState.LEAF):
        return False
    return doc.get("checksum") is not None and stable(doc)
