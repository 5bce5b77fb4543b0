"""The storage budget holds (docs/operations.md, "Storage budget"): an attempt reserves
room for its output before it starts, the decision service frees ahead of it, and an
action with no room stays READY, saying why, until room frees."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared.storage.local import ATTEMPTS_DIR
from tests.support.following import logging_conf
from tests.support.gates import Gate
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT, shell_action

KB = 1024


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str):
    return make_settings(tmp_path, mongo_url, capacity_bytes=200 * KB, threshold=0.9, target=0.8)


def attempts_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for f in files:
            try:
                total += os.stat(os.path.join(folder, f)).st_size
            except OSError:
                pass  # committed or discarded while we looked
    return total


async def usage(api: Api) -> int:
    """STORED + LEAF bytes in the catalogue, plus the bytes of the attempts being written."""
    stored = sum([int(d.get("size") or 0) async for d in api.db.datasets.find({"state": {"$in": ["STORED", "LEAF"]}})])
    return stored + await asyncio.to_thread(attempts_bytes, api.settings.managed_dir / ATTEMPTS_DIR)


async def budget(api: Api) -> dict:
    return await api.db.budget.find_one({"_id": "storage"}) or {}


async def peak_usage(system: Api, workflow_id: str) -> tuple[dict, int]:
    """The workflow once it ended, and the highest usage sampled while it ran."""
    peak = 0
    while (wf := await system.workflow(workflow_id))["state"] == "RUNNING":
        peak = max(peak, await usage(system))
        await asyncio.sleep(0.02)
    return wf, peak


async def stored_intermediates(system: Api) -> None:
    """140 KB of intermediates stored (nothing claims them once their workflow is done),
    and a 1 KB leaf."""
    seed = await system.run(
        {
            "name": "seed",
            "actions": [
                shell_action(1, "seed-a", size_kb=70),
                shell_action(2, "seed-b", [1], size_kb=70),
                shell_action(3, "seed-leaf", [2], size_kb=1),
            ],
        }
    )
    assert seed["state"] == "SUCCEEDED"


async def test_usage_never_passes_capacity_when_parallel_writes_would_pass_it(system: Api) -> None:
    # 140 KB of intermediates stored...
    await stored_intermediates(system)
    # ...then four 40 KB outputs written at once: 300 KB against a 200 KB capacity, had
    # each started as soon as a slot was free.
    wide = {
        "name": "wide",
        "actions": [
            *(shell_action(i, f"wide-{i}", seconds=0.5, size_kb=40, expectedBytes=40 * KB) for i in (1, 2, 3, 4)),
            shell_action(5, "wide-leaf", [1, 2, 3, 4], size_kb=1),
        ],
    }
    plan = await system.submit(wide)
    wf, peak = await peak_usage(system, plan["id"])
    assert wf["state"] == "SUCCEEDED", wf
    assert 0 < peak <= system.settings.capacity_bytes, peak
    # Every reservation was settled at its commit.
    assert (await budget(system))["reserved"] == 0


async def test_an_action_without_room_is_held_ready_with_its_reason_and_starts_once_room_frees(
    system: Api, gate: Gate
) -> None:
    # A 150 KB intermediate, claimed by a slow reader: nothing can be evicted while it reads
    # (it reads until the test has seen the other action held, at the gate).
    first = await system.submit(
        {
            "name": "claimed",
            "actions": [
                shell_action(1, "big", size_kb=150),
                shell_action(2, "slow-reader", [1], size_kb=1, configurationParameters=gate.conf),
            ],
        }
    )
    while (await system.db.actions.find_one({"_id": f"{first['id']}.2"}))["state"] != "RUNNING":
        await asyncio.sleep(0.1)
    second = await system.submit(
        {
            "name": "waits",
            "actions": [
                shell_action(1, "needs-room", size_kb=100, expectedBytes="100KiB"),
            ],
        }
    )
    action_id = f"{second['id']}.1"
    # Held: READY, with the reason, in the API's view and in pingo status.
    deadline = time.time() + 20
    while not (view := (await system.workflow(second["id"]))["actions"][0]).get("held"):
        assert time.time() < deadline, view
        await asyncio.sleep(0.1)
    assert view["state"] == "READY" and "storage" in view["held"] and "102400 B" in view["held"]
    assert view["expectedBytes"] == 100 * KB
    held = await system.db.actions.find_one({"_id": action_id})
    assert held["state"] == "READY" and not held.get("attempt")  # never started
    status = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pingo.cli", "status", second["id"]],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PINGO_URL": system.base, "COLUMNS": "200"},
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert "held: storage budget" in status.stdout and "waits for storage" in status.stdout
    gate.open()
    reader = await system.wait(first["id"])
    assert reader["state"] == "SUCCEEDED"
    # The reader done, the big intermediate is free to evict: the held action starts.
    done = await system.wait(second["id"], timeout=60)
    assert done["state"] == "SUCCEEDED"
    assert done["actions"][0].get("held") is None
    started = (await system.db.actions.find_one({"_id": action_id}))["submitted_at"]
    assert started >= reader["actions"][1]["finishedAt"]
    big = await system.db.datasets.find_one({"_id": reader["actions"][0]["hash"]})
    assert big["state"] in ("STORED_TO_DELETE", "PROCESSING", "DELETING", "DELETED")
    assert (await budget(system))["reserved"] == 0


async def test_a_failed_attempt_releases_its_reservation(system: Api, tmp_path: Path, gate: Gate) -> None:
    plan = await system.submit(
        {
            "name": "fails",
            "actions": [
                shell_action(
                    1,
                    "doomed",
                    size_kb=10,
                    expectedBytes=50 * KB,
                    configurationParameters=logging_conf(tmp_path / "exec.log", SYNTH_FAIL="always", **gate.env),
                ),
            ],
        }
    )
    # While it runs, its room is reserved...
    deadline = time.time() + 20
    while (await budget(system)).get("reserved") != 50 * KB:
        assert time.time() < deadline, await budget(system)
        await asyncio.sleep(0.05)
    action = await system.db.actions.find_one({"_id": f"{plan['id']}.1"})
    assert action["reservation"]["bytes"] == 50 * KB
    gate.open()
    # ...and once it failed, the room is free again.
    wf = await system.wait(plan["id"])
    assert wf["state"] == "FAILED"
    doc = await budget(system)
    assert doc["reserved"] == 0 and doc["holds"] == {}


async def test_an_action_whose_inputs_alone_fill_the_budget_starts_rather_than_waits_forever(system: Api) -> None:
    """Its parent's 150 KB output is claimed by it, nothing else runs and nothing can be
    evicted: no room can ever come, so it starts past the budget instead of being held."""
    wf = await system.run(
        {
            "name": "too-big",
            "actions": [
                shell_action(1, "parent", size_kb=150),
                shell_action(2, "child", [1], size_kb=1, expectedBytes="100KiB"),
            ],
        },
        timeout=60,
    )
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    assert [a["state"] for a in wf["actions"]] == ["FINISHED", "FINISHED"]
    assert (await budget(system)).get("reserved") == 0


async def test_an_action_reserves_what_its_name_remembers_worked_out_when_it_was_planned(
    system: Api, gate: Gate
) -> None:
    # A first output of the name "learner" teaches its size...
    first = await system.run({"name": "learns", "actions": [shell_action(1, "learn-v1", name="learner", size_kb=30)]})
    assert first["state"] == "SUCCEEDED"
    taught = await system.db.budget.find_one({"_id": "size:learner"})
    size = (await system.db.datasets.find_one({"_id": first["actions"][0]["hash"]}))["size"]
    assert taught["bytes"] == size > 30 * KB - 1
    # ...which another lineage of that name reserves: worked out at planning, carried by
    # its READY event, held while it runs.
    # (It runs until the test has seen its room reserved, at the gate.)
    learner = shell_action(1, "learn-v2", name="learner", size_kb=30, configurationParameters=gate.conf)
    plan = await system.submit({"name": "uses", "actions": [learner]})
    action_id = f"{plan['id']}.1"
    planned = await system.db.actions.find_one({"_id": action_id})
    assert planned["reserve_bytes"] == size and planned["named_bytes"] == size
    deadline = time.time() + 20
    while (await budget(system)).get("reserved") != size:
        assert time.time() < deadline, await budget(system)
        await asyncio.sleep(0.05)
    gate.open()
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    ready = [
        e.payload
        for e in system.ctx.bus.published
        if e.type.value == "action.ready" and e.subject.action_id == action_id
    ]
    assert ready and ready[0]["reserve_bytes"] == size
    assert (await budget(system))["reserved"] == 0
    # The same size again: its name's document is left as it was, not written again.
    assert await system.db.budget.find_one({"_id": "size:learner"}) == taught
    # A different size is remembered.
    third = await system.run({"name": "grows", "actions": [shell_action(1, "learn-v3", name="learner", size_kb=10)]})
    assert third["state"] == "SUCCEEDED"
    smaller = (await system.db.datasets.find_one({"_id": third["actions"][0]["hash"]}))["size"]
    assert smaller < size and (await system.db.budget.find_one({"_id": "size:learner"}))["bytes"] == smaller


async def test_a_first_run_reserves_what_its_largest_input_weighs(system: Api) -> None:
    """Actions never run under their names, with nothing declared: each child reserves the
    size of the largest dataset it reads, so their writes wait for the room the decision
    service frees instead of passing the budget (docs/operations.md, "Storage budget")."""
    await stored_intermediates(system)
    # 141 KB stored; a 40 KB root, then three 40 KB children at once: 301 KB had each
    # child started unreserved as soon as a slot was free.
    fresh = {
        "name": "fresh",
        "actions": [
            shell_action(1, "fresh-root", size_kb=40),
            *(shell_action(i, f"fresh-{i}", [1], seconds=0.5, size_kb=40) for i in (2, 3, 4)),
            shell_action(5, "fresh-leaf", [2, 3, 4], size_kb=1),
        ],
    }
    plan = await system.submit(fresh)
    planned = [a async for a in system.db.actions.find({"workflow_id": plan["id"]})]
    assert [a.get("reserve_bytes") for a in planned] == [None] * 5  # no size known at planning
    wf, peak = await peak_usage(system, plan["id"])
    assert wf["state"] == "SUCCEEDED", wf
    assert 0 < peak <= system.settings.capacity_bytes, peak
    # Each child reserved what the root's output weighs; the root, reading nothing, nothing.
    root = await system.db.datasets.find_one({"_id": wf["actions"][0]["hash"]})
    docs = {a["local_id"]: a async for a in system.db.actions.find({"workflow_id": plan["id"]})}
    assert [docs[i]["reservation"]["bytes"] for i in (2, 3, 4)] == [root["size"]] * 3
    assert docs[1].get("reservation") is None
    assert (await budget(system))["reserved"] == 0
