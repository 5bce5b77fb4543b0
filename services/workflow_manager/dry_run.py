"""The dry run of a submission (``POST /api/v1/workflows?dryRun=true``): what would be
computed, reused, skipped or followed, and why, without writing anything.

It runs the planner of a real submission (``shared.planning.plan``) through a gate that
only reads: the documents of the workflow's datasets are read in one batch, a stored one
counts as reusable when its files are whole now (checked as ``PINGO_VERIFY_REUSE`` says,
without marking anything LOST), one being computed counts as followable. No workflow,
action, claim, dataset or event is written. The plan is what a submission made now would
decide; a submission made later may decide otherwise (a dataset deleted or stored in the
meantime, a race for a claim lost).
"""

from __future__ import annotations

import posixpath
import time
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from services.workflow_manager.queries import Query
from services.workflow_manager.views import InputView, Miss, View, input_views
from shared.hashing import workflow_hashes
from shared.inputs import changes
from shared.lifecycle.claims import Claim, meaning, whole
from shared.lifecycle.cutoff_candidates import may_stand_in, stand_in, stand_ins
from shared.lifecycle.misses import explain
from shared.planning import PlannedAction, plan
from shared.runtime import Context
from shared.storage import Storage
from shared.storage.verification import Level
from shared.store import datasets as ds
from shared.store import inputs as seen_inputs
from shared.workflow_spec import ActionId, WorkflowSpec, id_order

DryDecision = Literal["compute", "reuse", "skip", "follow"]


def _flag(raw: Any) -> bool:
    if isinstance(raw, str) and raw.lower() in ("true", "1", "false", "0"):
        return raw.lower() in ("true", "1")
    raise ValueError(f"must be true or false, not {raw!r}")


class SubmitQuery(Query):
    dryRun: Annotated[bool, BeforeValidator(_flag)] = Field(
        False, description="Answer 200 with the plan and write nothing"
    )


class DryRunInput(InputView):
    previous: dict[str, Any] | None = Field(
        description="The fingerprint it had when a workflow was last planned on it; null if never"
    )
    changes: list[str] = Field(description="What differs from the previous fingerprint: 'size 10 -> 12'")


class DryRunAction(View):
    localId: ActionId
    name: str
    hash: str = Field(description="The lineage hash: the dataset this action produces")
    decision: DryDecision
    reason: str = Field(
        description="The planner's: stored, in_flight, feeds_only_reused, not_stored, forced, unmanaged"
    )
    explanation: str = Field(description="Why, in words")
    parents: list[ActionId]
    outputPath: str | None = Field(description="Where its output is (reuse) or would be written (compute)")
    follows: str | None = Field(
        None, description="follow: the action whose computation it would wait for (null when it is another user's)"
    )
    shared: bool = Field(False, description="It would follow a computation of another user's workflow")
    inputs: list[DryRunInput] = Field(
        default_factory=list, description="The external inputs it reads, and how each changed since last used"
    )
    miss: Miss | None = Field(None, description="compute: what changed since the same action was last computed")


class DryRunTotals(View):
    compute: int
    reuse: int
    skip: int
    follow: int


class DryRun(View):
    """A dry run's answer (200): nothing was written."""

    dryRun: Literal[True] = True
    name: str
    actions: list[DryRunAction]
    totals: DryRunTotals


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
            found = self.known.get(twin)
            if not may_stand_in(found) or not meaning(found).stored:
                return False
            assert found is not None
            if (await whole(self.storage, found, self.level))[0].ok:
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


def _decision(p: PlannedAction) -> DryDecision:
    if p.computed:
        return "compute"
    if p.reason == "in_flight":
        return "follow"
    return "skip" if p.reason == "feeds_only_reused" else "reuse"


def _explanation(p: PlannedAction, gate: ReadOnlyGate) -> str:
    if p.reason == "unmanaged":
        return "unmanaged (isManaged: false): always computed, into its outputPath"
    if p.reason == "forced":
        return "forceComputation: computed whether or not its output is stored"
    if p.reason == "not_stored":
        return gate.misses.get(p.hash, "no stored output has this lineage")
    if p.reason == "stored" and p.hash in gate.twins:
        return f"early cutoff: its action was cut off to {gate.twins[p.hash]}, byte-identical inputs: reused"
    if p.reason == "stored":
        return "its output is stored: reused"
    if p.reason == "feeds_only_reused":
        return "not needed: every action that reads its output is reused or skipped"
    if p.follows_local is not None:
        return f"an identical action of this workflow ({p.follows_local!r}) computes it: waits for that one"
    return f"being computed right now by {p.follows}: waits for that computation"


async def dry_run(
    ctx: Context, spec: WorkflowSpec, paths: dict, prints: dict[ActionId, str], owner: str | None = None
) -> DryRun:
    """The plan a submission of the validated ``spec`` by ``owner`` would make now; writes nothing."""
    hashes = workflow_hashes(spec, prints)
    known = await ds.get_many(ctx.store, list(hashes.values()))
    known.update(await ds.get_many(ctx.store, stand_ins(known)))
    gate = ReadOnlyGate(ctx.storage, known, ctx.settings.verify_reuse)
    planned = await plan(spec, hashes, gate, prints)
    previous = await seen_inputs.last_seen(ctx.store, [i["path"] for a in spec.actions for i in a.inputs])
    misses = await explain(ctx.store, spec.name, owner, planned, hashes, before=time.time())
    rows = []
    for aid in sorted(planned, key=id_order):
        p = planned[aid]
        decision = _decision(p)
        if not p.spec.isManaged:
            output = paths.get(aid, {}).get("output_path")
        elif decision == "reuse":
            output = known[gate.twins.get(p.hash, p.hash)]["path"]
        elif decision == "compute":
            output = posixpath.join(ctx.storage.root, p.hash)
        else:
            output = None
        follows = p.follows if p.follows is not None else (None if p.follows_local is None else str(p.follows_local))
        inputs = [
            DryRunInput(
                **i.model_dump(), previous=previous.get(i.path),
                changes=changes(previous[i.path], i.fingerprint) if i.path in previous else [],
            )
            for i in input_views({"inputs": p.spec.inputs})
        ]  # fmt: skip
        explanation = _explanation(p, gate)
        if decision == "compute" and (changed := [i for i in inputs if i.changes]):
            told = "; ".join(f"input {i.path} changed: {', '.join(i.changes)}" for i in changed)
            explanation = f"{told}; {explanation}"
        rows.append(
            DryRunAction(
                localId=aid, name=p.spec.name, hash=p.hash, decision=decision, reason=p.reason,
                explanation=explanation, parents=p.spec.parents, outputPath=output, follows=follows, inputs=inputs,
                miss=Miss.model_validate(misses[aid].document()) if aid in misses else None,
            )
        )  # fmt: skip
    totals = {d: sum(r.decision == d for r in rows) for d in ("compute", "reuse", "skip", "follow")}
    return DryRun(name=spec.name, actions=rows, totals=DryRunTotals(**totals))
