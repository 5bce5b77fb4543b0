"""Reuse planning: thesis Algorithm 4, corrected.

Actions are visited children first. An action is *needed* when it is a leaf or feeds a
computed child. A needed managed action whose dataset is stored is reused, but only once
its claim (for every computed child) is taken atomically through the ``DatasetGate``;
a lost race means computing it. One whose dataset is being computed right now, by
another workflow or by an identical action of this one, *follows* that computation
(reason ``in_flight``): it is not computed, its children wait for it, and it ends
REUSED when the producer commits (docs/planning.md, "Following a computation in
flight"). An action that is not needed is skipped with every ancestor that only fed it.
Unmanaged and forced actions always compute, needed or not (the thesis's leaf-first
search would never reach one whose children all reuse).

The same function plans for the workflow manager (gate over MongoDB) and for the
simulator (gate over an in-memory set), so both decide identically.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal, Protocol

import networkx as nx

from shared.hashing import lineage_of
from shared.workflow_spec import ActionId, ActionSpec, WorkflowSpec, id_order

Decision = Literal["compute", "reuse"]
# Decisions made one by one between two turns of the event loop: a big workflow's plan
# leaves the gateway answering meanwhile.
YIELD_EVERY = 200


class DatasetGate(Protocol):
    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool: ...

    async def try_follow(
        self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool
    ) -> str | None:
        """The id of a live action of another workflow computing ``h`` that ``aid`` now
        follows (its claimants' claims taken), or None."""
        ...


@dataclass
class PlannedAction:
    spec: ActionSpec
    hash: str
    lineage: dict
    leaf: bool
    decision: Decision
    reason: str
    children: list[ActionId] = field(default_factory=list)
    # in_flight: the action it follows, an action id of another workflow or, for an
    # identical action of this workflow, its local id (``follows_local``).
    follows: str | None = None
    follows_local: ActionId | None = None

    @property
    def computed(self) -> bool:
        return self.decision == "compute"

    @property
    def pending(self) -> bool:
        """Its children must wait for it: it is computed here or followed."""
        return self.computed or self.reason == "in_flight"


async def plan(
    spec: WorkflowSpec,
    hashes: dict[ActionId, str],
    gate: DatasetGate,
    fingerprints: dict[ActionId, str] | None = None,
    concurrency: int = 1,
) -> dict[ActionId, PlannedAction]:
    """Every action's decision. ``concurrency`` > 1: up to that many actions ask the gate
    at once (each store claim is a round trip); an action still waits for its children,
    and for an earlier action of the same hash, so the plan is the one made one by one."""
    g = spec.graph()
    by_id = spec.by_id()
    out: dict[ActionId, PlannedAction] = {}
    computing: dict[str, ActionId] = {}  # hash -> the action of this workflow computing it

    async def decide(aid: ActionId) -> None:
        a = by_id[aid]
        children = sorted(g.successors(aid), key=id_order)
        computed_children = [c for c in children if out[c].computed]
        leaf = not children
        lineage = lineage_of(a, hashes, fingerprints)
        decision: Decision
        follows: str | None = None
        follows_local: ActionId | None = None
        if not a.isManaged:
            decision, reason = "compute", "unmanaged"
        elif a.forceComputation:
            decision, reason = "compute", "forced"
        elif not leaf and not computed_children:
            decision, reason = "reuse", "feeds_only_reused"
        elif await gate.try_reuse(hashes[aid], lineage, computed_children, leaf):
            decision, reason = "reuse", "stored"
        elif hashes[aid] in computing:
            decision, reason, follows_local = "reuse", "in_flight", computing[hashes[aid]]
        elif (follows := await gate.try_follow(aid, hashes[aid], lineage, computed_children, leaf)) is not None:
            decision, reason = "reuse", "in_flight"
        else:
            decision, reason = "compute", "not_stored"
        if decision == "compute" and a.isManaged:
            computing.setdefault(hashes[aid], aid)
        out[aid] = PlannedAction(a, hashes[aid], lineage, leaf, decision, reason, children, follows, follows_local)

    order = list(reversed(list(nx.topological_sort(g))))  # children first
    if concurrency <= 1:
        for i, aid in enumerate(order):
            await decide(aid)
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)  # a decision that asks no store does not yield: others' turn
        return out
    # What each decision reads of the others: its children's, and (``computing``) those
    # of the earlier actions of its hash.
    done = {aid: asyncio.Event() for aid in order}
    before: dict[ActionId, ActionId] = {}
    last_of: dict[str, ActionId] = {}
    for aid in order:
        if (prev := last_of.get(hashes[aid])) is not None:
            before[aid] = prev
        last_of[hashes[aid]] = aid
    slots = asyncio.Semaphore(concurrency)

    async def in_turn(aid: ActionId) -> None:
        for other in [*g.successors(aid), *([before[aid]] if aid in before else [])]:
            await done[other].wait()
        async with slots:
            await decide(aid)
        done[aid].set()

    async with asyncio.TaskGroup() as tasks:
        for aid in order:
            tasks.create_task(in_turn(aid))
    return {aid: out[aid] for aid in order}
