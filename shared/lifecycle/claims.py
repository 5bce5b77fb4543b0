"""What a dataset means for an action that would read or produce it: the one claim
policy (docs/planning.md, "Claims").

Submitting (``shared.lifecycle.submitting``), the dry run (read-only) and re-planning
(``shared.lifecycle.replanning``) ask ``meaning`` of the dataset document they read, and
``whole`` before they promise a stored one. The policy decides; the caller acts: a
submission claims and marks what it finds lost, re-planning claims, the dry run only
reports. ``whole`` without a mover never writes, and nothing here deletes files.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.lifecycle.lost import check_whole
from shared.lifecycle.moves import Mover
from shared.states import DATASET_IN_FLIGHT, DATASET_REUSABLE, DatasetState
from shared.storage import Storage
from shared.storage.verification import WHOLE, Level, Verdict, verify
from shared.store import datasets as ds

D = DatasetState
COLLISION = "a stored dataset has this hash but another lineage (a hash collision)"


class Claim(StrEnum):
    REUSE = "reuse"  # stored: claim it for the readers
    REVIVE = "revive"  # marked for deletion but still there: taken back by the claim
    FOLLOW = "follow"  # being computed: follow its producer
    COMPUTE = "compute"  # absent, or in no state to read: compute it
    LOST = "lost"  # its files were found missing or changed: compute it again


@dataclass(frozen=True)
class Meaning:
    claim: Claim
    why: str  # in words, for a dataset that is not reused
    collision: bool = False  # its lineage is another's: no later read makes it reusable

    @property
    def stored(self) -> bool:
        """A claim may take it, once its files are found whole (``whole``)."""
        return self.claim in (Claim.REUSE, Claim.REVIVE)


def meaning(doc: dict[str, Any] | None, lineage: dict[str, Any] | None = None) -> Meaning:
    """What ``doc`` (as read; None: no dataset has this hash) means for an action of
    ``lineage`` (None: the document's own, as re-planning reads it)."""
    if doc is None:
        return Meaning(Claim.COMPUTE, "no stored output has this lineage")
    state = doc["state"]
    busy = f"its dataset exists but is {state}"
    if state in DATASET_REUSABLE:
        if lineage is not None and not ds.lineage_matches(doc, lineage):
            return Meaning(Claim.COMPUTE, COLLISION, collision=True)
        if changed := doc.get("input_changed"):  # its commit replaces it (docs/planning.md, "External inputs")
            paths = ", ".join(c["path"] for c in changed)
            return Meaning(Claim.COMPUTE, f"its output was made from input(s) that changed while it ran: {paths}")
        return Meaning(Claim.REUSE if state in (D.STORED, D.LEAF) else Claim.REVIVE, "its output is stored")
    if state in DATASET_IN_FLIGHT and doc.get("producers"):
        if lineage is not None and not ds.lineage_matches(doc, lineage):
            return Meaning(Claim.COMPUTE, COLLISION, collision=True)
        return Meaning(Claim.FOLLOW, busy)
    if state == D.INVALIDATED:  # a user withdrew it (docs/api.md, "Datasets by hand")
        withdrawn = doc.get("withdrawn") or {}
        return Meaning(Claim.COMPUTE, f"its dataset was {withdrawn.get('reason') or 'invalidated'} by "
                       f"{withdrawn.get('by') or 'a user'}")  # fmt: skip
    return Meaning(Claim.LOST if state == D.LOST else Claim.COMPUTE, busy)


def to_check(doc: dict[str, Any]) -> bool:
    """Its files are checked before a claim: a stored dataset, unless it is being deleted
    (the claim takes it back only if it still can)."""
    return doc["state"] in DATASET_REUSABLE and doc["state"] != D.PROCESSING


async def whole(
    storage: Storage, doc: dict[str, Any], level: Level, mover: Mover | None = None
) -> tuple[Verdict, dict[str, Any] | None]:
    """Are the files of stored ``doc`` whole, checked at ``level``? With ``mover``, one
    found not whole is moved to LOST (the LOST document is returned); without, nothing is
    written (a query)."""
    if not to_check(doc):
        return WHOLE, None
    if mover is None:
        return await verify(storage, doc, level), None
    return await check_whole(storage, mover, doc, level)
