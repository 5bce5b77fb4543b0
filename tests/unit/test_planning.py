"""The planner's decisions about computations in flight (docs/planning.md, "Following a
computation in flight"): what follows, and what it means for the rest of the plan."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from shared.hashing import workflow_hashes
from shared.planning import PlannedAction, plan
from shared.workflow_spec import ActionId, parse_workflow


def act(aid: Any, label: str, parents: list = (), **extra: Any) -> dict[str, Any]:
    return {
        "id": aid, "name": label, "type": "SHELL", "command": ["true", label],
        "parentActions": [{"id": p} for p in parents], **extra,
    }  # fmt: skip


class InFlight:
    """A store in which the datasets of ``computing`` (hash -> producer) are being computed."""

    def __init__(self, computing: dict[str, str] | None = None) -> None:
        self.computing = computing or {}
        self.followed: list[tuple[ActionId, str]] = []

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        return False

    async def try_follow(self, aid: ActionId, h: str, lineage: dict, claimants: list, leaf: bool) -> str | None:
        if h in self.computing:
            self.followed.append((aid, self.computing[h]))
            return self.computing[h]
        return None


def planned(body: dict, gate: InFlight) -> tuple[dict[ActionId, PlannedAction], dict[ActionId, str]]:
    spec, violations = parse_workflow(body)
    assert spec is not None, violations
    hashes = workflow_hashes(spec)
    return asyncio.run(plan(spec, hashes, gate)), hashes


def sweep(i: int) -> dict:
    return {"name": "s", "actions": [act(1, "ingest"), act(2, "features", [1]), act(3, f"train-{i}", [2])]}


def test_an_action_whose_dataset_is_in_flight_follows_it_and_its_feeders_are_skipped():
    _, hashes = planned(sweep(0), InFlight())
    gate = InFlight({hashes[2]: "wf-other.2"})
    out, _ = planned(sweep(1), gate)
    assert (out[2].decision, out[2].reason, out[2].follows) == ("reuse", "in_flight", "wf-other.2")
    assert out[2].pending and not out[2].computed  # its children wait for it; it is not computed
    assert (out[1].decision, out[1].reason) == ("reuse", "feeds_only_reused")  # it only fed the follower
    assert (out[3].decision, out[3].reason) == ("compute", "not_stored")
    assert gate.followed == [(2, "wf-other.2")]


def test_two_identical_actions_of_one_workflow_compute_once():
    body = {"name": "twins", "actions": [act(1, "root"), act(2, "branch", [1]), act(3, "branch", [1]),
                                         act(4, "join", [2, 3])]}  # fmt: skip
    out, hashes = planned(body, InFlight())
    assert hashes[2] == hashes[3]
    computed, follower = sorted((2, 3), key=lambda a: out[a].reason != "not_stored")
    assert out[computed].computed and out[follower].reason == "in_flight"
    assert out[follower].follows_local == computed and out[follower].follows is None
    assert out[1].computed and out[4].computed


def test_forced_and_unmanaged_actions_never_follow():
    _, hashes = planned(sweep(0), InFlight())
    body = sweep(1)
    body["actions"][1]["forceComputation"] = True
    out, _ = planned(body, InFlight({hashes[2]: "wf-other.2"}))
    assert out[2].reason == "forced" and out[1].computed
    body = sweep(1)
    body["actions"][1] |= {"isManaged": False, "outputPath": "features"}
    out, _ = planned(body, InFlight({hashes[2]: "wf-other.2"}))
    assert out[2].reason == "unmanaged"


class Shuffled:
    """Some datasets stored, some in flight; each answer takes a random while, so claims
    asked at once come back in any order."""

    def __init__(self, stored: set[str], computing: dict[str, str], seed: int) -> None:
        self.stored, self.computing = stored, computing
        self.rng = random.Random(seed)
        self.at_once = self.most_at_once = 0

    async def answer(self) -> None:
        self.at_once += 1
        self.most_at_once = max(self.most_at_once, self.at_once)
        await asyncio.sleep(self.rng.random() / 1000)
        self.at_once -= 1

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        await self.answer()
        return h in self.stored

    async def try_follow(self, aid: ActionId, h: str, lineage: dict, claimants: list, leaf: bool) -> str | None:
        await self.answer()
        return self.computing.get(h)


def test_claims_asked_at_once_make_the_plan_made_one_by_one():
    # Layers of identical and distinct actions, several sharing a hash, some stored, some
    # in flight elsewhere: the decisions, and which twin computes, do not depend on the
    # order in which concurrent claims answer.
    rng = random.Random(7)
    actions = []
    for i in range(1, 121):
        parents = rng.sample(range(max(1, i - 12), i), k=min(i - 1, rng.randint(0, 3))) if i > 1 else []
        actions.append(act(i, f"step-{rng.randint(0, 40)}", parents))
    for i in range(121, 181):  # twins: leaves in threes, asked about at the same moment
        actions.append(act(i, f"twin-{(i - 121) // 3}", [1]))
    spec, violations = parse_workflow({"name": "layers", "actions": actions})
    assert spec is not None, violations
    hashes = workflow_hashes(spec)
    distinct = sorted(set(hashes.values()))
    assert len(distinct) < len(actions)  # twins exist
    stored, computing = set(distinct[::3]), {h: f"wf-other.{h[:6]}" for h in distinct[1::4]}
    one_by_one = asyncio.run(plan(spec, hashes, Shuffled(stored, computing, 1)))
    for seed in range(5):
        gate = Shuffled(stored, computing, seed)
        at_once = asyncio.run(plan(spec, hashes, gate, concurrency=8))
        assert at_once == one_by_one
        assert list(at_once) == list(one_by_one)
        assert 1 < gate.most_at_once <= 8
