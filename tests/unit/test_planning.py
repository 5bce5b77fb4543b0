"""The planner's decisions about computations in flight (docs/planning.md, "Following a
computation in flight"): what follows, and what it means for the rest of the plan."""

from __future__ import annotations

import asyncio
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
