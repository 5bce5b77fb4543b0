"""The simulator against the real system (issue items 6 and 8): a short generated history
of synth.py actions runs through all five services over real HTTP against nx-27017, and
the simulator, given the same budget, threshold, target and algorithm, computes and
reuses exactly the same actions in every workflow. Then ``pingo whatif`` replays what
was recorded.

Validated algorithms are those whose choice does not depend on measured compute times
(``adaptive``, ``lru``): the real system prices a dataset by the seconds it measured
(synth's sleep plus process start-up), the simulator by the generated ones.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evaluation.generator import ShellScale, generate
from evaluation.parameters import Normal, shipped
from evaluation.simulator import KB, prepare, simulate
from evaluation.whatif import what_if
from pingo.cli import main as pingo_main
from shared.eviction import Workload
from tests.support.sequential import budget_between_quanta, computed_ids, run_sequentially
from tests.support.system import Api, make_settings

QUANTUM = 32 * KB
SCALE = ShellScale(seconds_per_second=0.0, kb_per_mb=3.2, quantum_kb=QUANTUM // KB)


async def pingo(*args: str) -> int:
    """``pingo ...`` as from a shell: in a thread, since it runs its own event loop."""

    def run() -> int:
        try:
            pingo_main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    return await asyncio.to_thread(run)


def history(seed: int, nb_actions: int) -> list[dict]:
    params = shipped(1).model_copy(update={"nb_actions": nb_actions, "workflow_size": Normal(mean=6, std=2)})
    return generate(params, seed).shell(SCALE)


CASES = {
    # algorithm, threshold, target, budget wanted (bytes), history seed, pool size
    "adaptive": ("adaptive", 0.9, 0.8, 160 * KB, 2, 24),
    "lru": ("lru", 1.0, 1.0, 144 * KB, 2, 24),
    "mcu": ("mcu", 0.9, 0.7, 128 * KB, 3, 24),
}


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple:
    algorithm, threshold, target, wanted, seed, n = CASES[request.param]
    capacity = budget_between_quanta(wanted, QUANTUM, (threshold, target))
    return algorithm, threshold, target, capacity, seed, n


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str, case: tuple):
    algorithm, threshold, target, capacity, _, _ = case
    return make_settings(
        tmp_path,
        mongo_url,
        capacity_bytes=capacity,
        # The simulator models the thesis's decision service, which reserves nothing ahead.
        budget_reservations=False,
        threshold=threshold,
        target=target,
        algorithm=algorithm,
        decision_interval=0.2,
        scrape_interval=0.2,
        poll_interval=0.2,
    )


async def test_simulator_decides_as_the_real_system(system: Api, case: tuple) -> None:
    algorithm, threshold, target, capacity, seed, n = case
    bodies = history(seed, n)
    sim = simulate(prepare(bodies), algorithm, capacity, threshold, target, system.settings.history_window)
    assert sim.deletions > 0 and sum(map(len, sim.computed_sets())) > n, "the case must delete and recompute"

    real = await run_sequentially(system, bodies)

    assert [computed_ids(wf) for wf in real] == sim.computed_sets()
    # Deleted in the simulator = DELETED (or deleted, then computed again) on the real system.
    deleted = {d["_id"] async for d in system.db.datasets.find({"history.state": "DELETED"}, {"_id": 1})}
    assert len(deleted) == len({h for w in sim.workflows for h in w.deleted})

    # The lineage the cost-aware algorithms need, read as the decision service would.
    rows = [a async for a in system.db.actions.find({}, {"workflow_id": 1, "hash": 1, "created_at": 1})]
    projection = {"state": 1, "lineage.parents": 1, "compute_seconds_total": 1, "compute_count": 1}
    docs = [d async for d in system.db.datasets.find({"_id": {"$in": list({r["hash"] for r in rows})}}, projection)]
    window = Workload.from_actions(rows).with_datasets(docs)
    by_id = {a["_id"]: a async for a in system.db.actions.find({}, {"hash": 1, "parents": 1})}
    for a in by_id.values():
        assert window.parents[a["hash"]] == [by_id[p]["hash"] for p in a["parents"]]
    assert set(window.compute_time) == {a["hash"] for wf in real for a in wf["actions"]}
    present = {d["_id"] async for d in system.db.datasets.find({"state": {"$in": ["STORED", "LEAF"]}}, {"_id": 1})}
    assert window.stored == present


@pytest.mark.parametrize("case", ["lru"], indirect=True)
async def test_whatif_replays_the_recorded_history(
    system: Api, case: tuple, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    algorithm, threshold, target, capacity, seed, n = case
    bodies = history(seed, n)[:5]
    real = await run_sequentially(system, bodies)
    s = system.settings

    report = await what_if(s, [algorithm, "reuse-rate"], capacity)
    rec = report.recorded
    assert len(rec.workflows) == len(real)
    assert rec.actual_computed_ids == [computed_ids(wf) for wf in real]
    measured = [a["seconds"] async for a in system.db.actions.find({"decision": "compute"}, {"seconds": 1})]
    assert rec.actual_seconds == pytest.approx(sum(measured))
    rows = {r.series: r for r in report.rows}
    # Replayed with what the system ran with, the recorded history gives what happened.
    assert [set(ids) for ids in rows[algorithm].computed_ids] == rec.actual_computed_ids
    assert rows[algorithm].seconds == pytest.approx(rec.actual_seconds)
    assert rows["unlimited storage"].seconds <= rows["reuse-rate"].seconds <= rows["no reuse"].seconds

    # The command line, against the same database.
    for name, value in {
        "MONGO_URL": s.mongo_url,
        "MONGO_DB": s.mongo_db,
        "DATA_DIR": str(s.data_dir),
        "THRESHOLD": str(threshold),
        "TARGET": str(target),
        "ALGORITHM": algorithm,
    }.items():
        monkeypatch.setenv(f"PINGO_{name}", value)
    assert await pingo("whatif", "--capacity", f"{capacity}", "--algorithm", algorithm, "--algorithm", "mcu") == 0
    out = capsys.readouterr().out
    assert f"what-if over {len(real)} recorded workflows" in out
    lines = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert f"{algorithm} (configured)" in lines and "mcu" in lines and "actually happened" in lines
    assert f"{rec.actual_seconds:.1f}" in lines["actually happened"]

    assert await pingo("whatif", "--capacity", "2GiB", "--algorithm", algorithm, "--json", "--since", "2000-01-01") == 0
    body = json.loads(capsys.readouterr().out)
    assert body["capacityBytes"] == 2 * 1024**3 and body["workflows"] == len(real)

    assert await pingo("whatif", "--since", "2999-01-01") == 1
    assert "no recorded SUCCEEDED workflows since 2999-01-01" in capsys.readouterr().err
