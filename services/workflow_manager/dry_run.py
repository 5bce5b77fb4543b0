"""The dry run's answer (``POST /api/v1/workflows?dryRun=true``): the plan a submission
would make now (``shared.lifecycle.previewing``), in words, with nothing written."""

from __future__ import annotations

import posixpath
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from services.workflow_manager.queries import Query
from services.workflow_manager.views import InputView, Miss, View, input_views
from shared.inputs import changes
from shared.lifecycle.previewing import Preview
from shared.planning import PlannedAction
from shared.workflow_spec import ActionId, id_order

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
    hash: str = Field(
        description="The lineage hash: the dataset this action produces or reuses (early cutoff: the twin it reuses)"
    )
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


def _decision(p: PlannedAction) -> DryDecision:
    if p.computed:
        return "compute"
    if p.reason == "in_flight":
        return "follow"
    return "skip" if p.reason == "feeds_only_reused" else "reuse"


def _explanation(p: PlannedAction, not_reused: dict[str, str], twins: dict[str, str]) -> str:
    if p.reason == "unmanaged":
        return "unmanaged (isManaged: false): always computed, into its outputPath"
    if p.reason == "forced":
        return "forceComputation: computed whether or not its output is stored"
    if p.reason == "not_stored":
        return not_reused.get(p.hash, "no stored output has this lineage")
    if p.reason == "stored" and p.hash in twins:
        return f"early cutoff: its lineage {p.hash[:12]} was cut off to this one, byte-identical inputs: reused"
    if p.reason == "stored":
        return "its output is stored: reused"
    if p.reason == "feeds_only_reused":
        return "not needed: every action that reads its output is reused or skipped"
    if p.follows_local is not None:
        return f"an identical action of this workflow ({p.follows_local!r}) computes it: waits for that one"
    return f"being computed right now by {p.follows}: waits for that computation"


def reused_hash(p: PlannedAction, twins: dict[str, str]) -> str:
    """The dataset the action produces, or the twin the submission reuses in place of its
    cut-off lineage's (docs/planning.md, "Early cutoff", step 3), as the submitted action says."""
    return twins.get(p.hash, p.hash) if p.reason == "stored" else p.hash


def dry_run(found: Preview, name: str, paths: dict, root: str) -> DryRun:
    """A dry run's answer for the workflow ``name``: ``found`` in words, with the unmanaged
    outputs' ``paths`` and the managed ``root``."""
    planned, known, previous, misses = found.planned, found.known, found.previous, found.misses
    rows = []
    for aid in sorted(planned, key=id_order):
        p = planned[aid]
        decision = _decision(p)
        if not p.spec.isManaged:
            output = paths.get(aid, {}).get("output_path")
        elif decision == "reuse":
            output = known[reused_hash(p, found.twins)]["path"]
        elif decision == "compute":
            output = posixpath.join(root, p.hash)
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
        explanation = _explanation(p, found.not_reused, found.twins)
        if decision == "compute" and (changed := [i for i in inputs if i.changes]):
            told = "; ".join(f"input {i.path} changed: {', '.join(i.changes)}" for i in changed)
            explanation = f"{told}; {explanation}"
        rows.append(
            DryRunAction(
                localId=aid, name=p.spec.name, hash=reused_hash(p, found.twins), decision=decision, reason=p.reason,
                explanation=explanation, parents=p.spec.parents, outputPath=output, follows=follows, inputs=inputs,
                miss=Miss.model_validate(misses[aid].document()) if aid in misses else None,
            )
        )  # fmt: skip
    totals = {d: sum(r.decision == d for r in rows) for d in ("compute", "reuse", "skip", "follow")}
    return DryRun(name=name, actions=rows, totals=DryRunTotals(**totals))
