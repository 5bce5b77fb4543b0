"""Previewing a submission (the dry run, ``POST /api/v1/workflows?dryRun=true``): what
would be computed, reused, skipped or followed, and why, without writing anything.

It runs the planner of a real submission (``shared.planning.plan``) through a gate that
only reads: the documents of the workflow's datasets are read in one batch, a stored one
counts as reusable when its files are whole now (checked as ``PINGO_VERIFY_REUSE`` says,
without marking anything LOST), one being computed counts as followable. No workflow,
action, claim, dataset or event is written. The plan is what a submission made now would
decide; a submission made later may decide otherwise (a dataset deleted or stored in the
meantime, a race for a claim lost). The gateway words it (``services/workflow_manager/dry_run.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from shared.hashing import workflow_hashes
from shared.lifecycle.claims import Claim, meaning, whole
from shared.lifecycle.cutoff_candidates import may_stand_in, stand_in, stand_ins
from shared.lifecycle.misses import Miss, explain
from shared.planning import PlannedAction, plan
from shared.storage import Storage
from shared.storage.verification import Level
from shared.store import Store
from shared.store import datasets as ds
from shared.store import inputs as seen_inputs
from shared.workflow_spec import ActionId, WorkflowSpec


class ReadOnlyGate:
    """The planner's view of datasets, read once and never written: no claim is taken.
    It asks the claim policy of a submission (``shared.lifecycle.claims``), read-only."""

    def __init__(self, storage: Storage, known: dict[str, dict[str, Any]], level: Level) -> None:
        self.storage, self.known, self.level = storage, known, level
        self.misses: dict[str, str] = {}  # hash -> why a dataset that exists is not reused
        self.twins: dict[str, str] = {}  # a cut-off hash -> the twin reused in its place

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        doc = self.known.get(h)
        if doc is None:
            return False
        if (twin := stand_in(doc)) is not None:  # docs/planning.md, "Early cutoff", step 3
            found_twin = self.known.get(twin)
            if not may_stand_in(found_twin):
                return False
            assert found_twin is not None
            if (await whole(self.storage, found_twin, self.level))[0].ok:
                self.twins[h] = twin
                return True
            return False
        found = meaning(doc, lineage)
        if not found.stored:
            self.misses[h] = found.why
            return False
        verdict, _ = await whole(self.storage, doc, self.level)  # no mover: nothing is marked
        if not verdict.ok:
            self.misses[h] = f"its stored output is not whole ({verdict.describe(doc)}): it would be computed again"
            return False
        return True

    async def try_follow(
        self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool
    ) -> str | None:
        doc = self.known.get(h)
        if doc is None or meaning(doc, lineage).claim is not Claim.FOLLOW:
            return None
        return doc["producers"][0]


@dataclass(frozen=True)
class Preview:
    """The plan a submission would make now, and what explains it."""

    planned: dict[ActionId, PlannedAction]
    known: dict[str, dict[str, Any]]  # the workflow's datasets, as read: by hash
    not_reused: dict[str, str]  # hash -> why a dataset that exists would not be reused
    previous: dict[str, dict[str, Any]]  # input path -> its fingerprint when a workflow was last planned on it
    misses: dict[ActionId, Miss]  # why each computed action would be computed
    twins: dict[str, str]  # a cut-off hash -> the twin reused in its place (early cutoff)


async def preview(
    store: Store, storage: Storage, level: Level, spec: WorkflowSpec, prints: dict[ActionId, str],
    owner: str | None = None,
) -> Preview:  # fmt: skip
    """The plan a submission of the validated ``spec`` by ``owner`` would make now, the
    reuse checked at ``level``; writes nothing."""
    hashes = workflow_hashes(spec, prints)
    known = await ds.get_many(store, list(hashes.values()))
    known.update(await ds.get_many(store, stand_ins(known)))
    gate = ReadOnlyGate(storage, known, level)
    planned = await plan(spec, hashes, gate, prints)
    previous = await seen_inputs.last_seen(store, [i["path"] for a in spec.actions for i in a.inputs])
    misses = await explain(store, spec.name, owner, planned, hashes, before=time.time())
    return Preview(planned, known, gate.misses, previous, misses, gate.twins)
