"""History statistics: buckets kept as transitions happen agree with a recount from raw documents."""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from shared.lifecycle import moves
from shared.store import stats
from shared.store.transitions import decode
from tests.support.gates import Gate
from tests.support.sequential import hold_decisions
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action

KB = 1024


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    return make_settings(tmp_path, mongo_url, capacity_bytes=60 * KB, threshold=0.9, target=0.5)


def random_workflow(rng: random.Random, n: int) -> dict:
    actions = []
    for i in range(rng.randint(2, 5)):
        parents = sorted(rng.sample(range(i), k=min(i, rng.randint(0, 2))))
        if rng.random() < 0.12:
            actions.append({"id": i, "name": "boom", "type": "SHELL", "actionFolder": "examples/jobs",
                            "command": ["python3", "fail.py"], "parentActions": [{"id": p} for p in parents],
                            "additionalInput": [{"value": f"boom-{n}"}]})  # fmt: skip
        else:
            label = f"h-{rng.randint(0, 6)}-{i}"  # a small pool: identical actions recur across workflows
            actions.append(shell_action(i, label, parents, size_kb=rng.choice([4, 8, 16])))
    return {"name": f"random-{n}", "actions": actions}


async def settled(api: Api) -> None:
    async with asyncio.timeout(60):
        while await api.db.datasets.count_documents(
            {"state": {"$in": ["STORED_TO_DELETE", "PROCESSING", "DELETING", "TO_STORE", "TO_LEAF"]}}
        ):
            await asyncio.sleep(0.2)


async def quiet(api: Api) -> None:
    """No eviction is decided from here on (the decision lease held, as another replica
    would hold it), and none is under way: nothing was deleted for two decision intervals.
    ``settled`` alone leaves a window on a loaded machine: a decision run late after the
    last workflow evicts once it has returned, between the statistics and their recount."""
    await hold_decisions(api)
    async with asyncio.timeout(60):
        while True:
            await settled(api)
            deleted = await api.db.datasets.count_documents({"state": "DELETED"})
            await asyncio.sleep(2 * api.settings.decision_interval)
            if await api.db.datasets.count_documents({"state": "DELETED"}) == deleted:
                return


async def recount(api: Api, width: int) -> dict[float, Counter]:
    """The same statistics, from the raw workflow, action and dataset documents."""
    out: dict[float, Counter] = defaultdict(Counter)

    def add(at: float, **kv: float) -> None:
        out[stats.bucket_start(at, width)].update(kv)

    async for w in api.db.workflows.find():
        add(w["created_at"], workflows_submitted=1)
    async for a in api.db.actions.find():
        if a["state"] == "FINISHED":
            add(a["finished_at"], actions_computed=1, compute_seconds=a["seconds"], bytes_written=a["size"] or 0,
                actions_nondeterministic=1 if a.get("nondeterministic") else 0)  # fmt: skip
        elif a["state"] in ("REUSED", "SKIPPED"):
            add(a["created_at"], **{f"actions_{a['state'].lower()}": 1}, saved_seconds=a["saved_seconds"])
        elif a["state"] in ("FAILED", "KILLED"):
            add(a["finished_at"], **{f"failures:{a['reason']}": 1})
    async for d in api.db.datasets.find():
        hist = decode(d)["history"]
        for before, after in itertools.pairwise(hist):
            if before["state"] == "DELETING" and after["state"] == "DELETED":
                add(after["at"], bytes_deleted=d["size"])
    return out


async def test_buckets_agree_with_a_raw_recount_after_a_random_run(system: Api) -> None:
    rng = random.Random(20261120)
    for n in range(10):
        await system.run(random_workflow(rng, n))
        await settled(system)
    await quiet(system)
    assert await system.db.datasets.count_documents({"state": "DELETED"}) > 0, "the budget never bit"
    assert await system.db.actions.count_documents({"state": "FAILED"}) > 0, "nothing failed"
    assert await system.db.actions.count_documents({"state": "REUSED"}) > 0, "nothing was reused"
    first = min([w["created_at"] async for w in system.db.workflows.find()])
    for resolution, width in stats.RESOLUTIONS.items():
        status, body = await system.request(
            "GET", "/api/v1/history/stats",
            params={"resolution": resolution, "from": str(first - width), "to": str(time.time() + 1)},
        )  # fmt: skip
        assert status == 200, body
        raw = await recount(system, width)
        for b in body["buckets"]:
            expected = raw.get(b["start"], Counter())
            got = {k: b[k] for k in stats.COUNTERS if b[k]}
            got.update({f"failures:{k}": v for k, v in b["failures"].items()})
            want = {k: v for k, v in expected.items() if v}
            assert got.keys() == want.keys(), (resolution, b["start"], got, want)
            for k in want:
                assert math.isclose(got[k], want[k], rel_tol=1e-9, abs_tol=1e-6), (resolution, k, got[k], want[k])
        assert sum(b["workflows_submitted"] for b in body["buckets"]) == 10


async def test_bad_history_queries_get_every_problem_listed(system: Api) -> None:
    status, body = await system.request("GET", "/api/v1/history/stats",
                                        params={"resolution": "1h", "from": "yesterday"})  # fmt: skip
    assert status == 400
    messages = {v["loc"]: v["message"] for v in body["violations"]}
    assert messages["resolution"].startswith("resolution must be one of 1m, 30m, 1d, 10d")
    assert messages["from"].startswith("from must be an ISO 8601 time")
    status, body = await system.request("GET", "/api/v1/history/stats",
                                        params={"resolution": "1m", "from": "2020-01-01T00:00:00Z"})  # fmt: skip
    assert status == 400 and "use a coarser resolution" in body["detail"]
    backwards = {"resolution": "1d", "from": "2026-01-02", "to": "2026-01-01"}
    status, body = await system.request("GET", "/api/v1/history/stats", params=backwards)
    assert status == 400 and "from must be before to" in body["detail"]
    status, body = await system.request("GET", "/api/v1/history/stats", params={"resolution": "10d"})
    assert status == 200 and len(body["buckets"]) in (1, 2)


async def computed_so_far(api: Api, since: float) -> float:
    status, body = await api.request(
        "GET", "/api/v1/history/stats", params={"resolution": "1d", "from": str(since), "to": str(time.time() + 1)}
    )
    assert status == 200, body
    return sum(b["actions_computed"] for b in body["buckets"])


async def test_a_long_workflows_finished_actions_are_counted_while_it_runs_and_once(
    system: Api, monkeypatch: pytest.MonkeyPatch, gate: Gate
) -> None:
    # A finished action's statistics are held in its workflow's document and counted when
    # the workflow settles: at its end, or, while it runs on, once they were held for
    # HOLD_STATS (docs/performance.md, "A chain's hop"); none is ever counted twice.
    monkeypatch.setattr(moves, "HOLD_STATS", 0.0)
    since = time.time() - 1
    # The second runs until the first one was counted (it waits at the gate).
    second = shell_action(2, "held-b", [1], configurationParameters=gate.conf)
    plan = await system.submit({"name": "long", "actions": [shell_action(1, "held-a"), second]})
    async with asyncio.timeout(30):
        while await computed_so_far(system, since) < 1:  # the first one, while the second runs
            assert (await system.workflow(plan["id"]))["state"] == "RUNNING"
            await asyncio.sleep(0.1)
    gate.open()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    assert await computed_so_far(system, since) == 2
