"""A dataset found missing or changed moves to LOST (docs/planning.md, "Lost datasets").

The planner before a reuse, re-planning before it reads an ended parent's output, and
the dataset manager's reconcile sweep all check a dataset the same way
(``shared.storage.verification.verify``) and make the same guarded move after a failed
check: never while a producer is recomputing it (its commit replaces the files and
records them again), and only from the state the caller saw.
"""

from __future__ import annotations

from typing import Any

from shared.lifecycle.moves import Mover
from shared.states import DatasetState
from shared.storage import Storage
from shared.storage.verification import Level, Verdict, verify


async def check_whole(
    storage: Storage, mover: Mover, doc: dict[str, Any], level: Level, where: dict[str, Any] | None = None
) -> tuple[Verdict, dict[str, Any] | None]:
    """Check ``doc``'s files at ``level``; if they are not whole, move it to LOST (the
    move further guarded by ``where``). The verdict, and the LOST document if this call
    moved it."""
    verdict = await verify(storage, doc, level)
    if verdict.ok:
        return verdict, None
    return verdict, await mark_lost(mover, doc, verdict, where)


async def mark_lost(
    mover: Mover, doc: dict[str, Any], verdict: Verdict, where: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Move ``doc``, found not whole (``verdict``), to LOST from the state it was read in;
    the LOST document, or None if it moved or gained a producer meanwhile."""
    return await mover.dataset(
        doc["_id"], DatasetState.LOST, sources=[doc["state"]], where={"producers": {"$size": 0}, **(where or {})},
        set=verdict.lost_fields(), note="lost",
    )  # fmt: skip
