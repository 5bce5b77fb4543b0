"""The evaluation (issue items 1-5): generator, simulator, ideal time, experiments CLI.
Pure computation: no services."""

from __future__ import annotations

import csv
import itertools
import json
import random
import re
import statistics
import warnings
from pathlib import Path

import networkx as nx
import pytest

from evaluation.experiments import run_experiment
from evaluation.generator import ShellScale, generate
from evaluation.ideal import ideal_seconds, knapsack
from evaluation.parameters import ParamsError, load_params, parse_params, shipped
from evaluation.simulator import KB, MB, Cost, Datasets, Window, no_reuse_seconds, params_cost, prepare, simulate
from evaluation.units import parse_date, parse_size
from pingo.cli import main as pingo_main
from shared.hashing import workflow_hashes
from shared.workflow_spec import parse_workflow

ALGORITHMS = ["adaptive", "gdsf", "lru", "mcu", "nectar", "reuse-rate"]


def small(**update) -> object:
    return shipped(1).model_copy(update={"nb_actions": 120, **update})


# ---------------------------------------------------------------- generator


@pytest.mark.parametrize("seed", range(4))
def test_generated_workflows_are_valid_acyclic_and_parse_cleanly(seed: int) -> None:
    h = generate(shipped(1), seed)
    assert sorted({a for w in h.workflows for a in w.parents}) == list(range(300)), "the pool is used up"
    for form in (h.command_line(), h.shell()):
        for body in form:
            spec, violations = parse_workflow(json.loads(json.dumps(body)))
            assert violations == [] and spec is not None
            assert nx.is_directed_acyclic_graph(spec.graph())
    for w in h.workflows:
        assert nx.is_directed_acyclic_graph(w.graph())
        assert all(p in w.parents for ps in w.parents.values() for p in ps)


def test_command_line_form_is_the_generators_format() -> None:
    body = generate(small(), 0).command_line()[3]
    a = body["actions"][-1]
    assert set(a) == {
        "actionId",
        "name",
        "type",
        "actionFolder",
        "mainClassName",
        "parentActions",
        "forceComputation",
        "additionalInput",
    }
    assert a["type"] == "COMMAND_LINE" and all(isinstance(p, int) for p in a["parentActions"])
    assert [p["key"] for p in a["additionalInput"]] == ["sizeInMB", "timeInSeconds", "nameNode", "uniqueRandomInput"]
    assert a["mainClassName"] == "io.biblia.workflows.job.Main"
    s = generate(small(), 0).shell(ShellScale(seconds_per_second=0.5, kb_per_mb=2.0, quantum_kb=4))[3]["actions"][-1]
    assert s["command"] == ["python3", "synth.py"] and s["actionFolder"] == "examples/jobs"
    label, seconds, size_kb = (p["value"] for p in s["additionalInput"])
    assert label.startswith(f"a{s['actionId']}-") and float(seconds) >= 0 and int(size_kb) % 4 == 0


def test_same_seed_same_history_other_seed_other_history() -> None:
    assert generate(small(), 7).command_line() == generate(small(), 7).command_line()
    assert generate(small(), 7).command_line() != generate(small(), 8).command_line()


def test_a_recurring_action_has_the_same_parents_and_lineage_hash_everywhere() -> None:
    h = generate(shipped(1), 3)
    parents: dict[int, tuple] = {}
    hashes: dict[int, str] = {}
    recurring = 0
    for body, w in zip(h.command_line(), h.workflows, strict=True):
        spec, _ = parse_workflow(body)
        got = workflow_hashes(spec)
        for a, ps in w.parents.items():
            if a in parents:
                recurring += 1
                assert parents[a] == ps and hashes[a] == got[a]
            parents[a], hashes[a] = ps, got[a]
        assert w.previous <= set(w.parents)
    assert recurring > 100


@pytest.mark.parametrize("share", [0.15, 0.5])
def test_share_of_previous_actions_is_near_the_parameter(share: float) -> None:
    p = shipped(2).with_share(share)
    # The first workflows have little to take from: look past them.
    got = statistics.fmean(w.share for seed in range(5) for w in generate(p, seed).workflows[5:])
    assert got == pytest.approx(share, abs=0.04)


def test_parameters_files_load_and_errors_are_clear(tmp_path: Path) -> None:
    assert shipped(1).storage_mb == [500, 1000, 1500, 2000, 2500, 3000]
    assert shipped(2).previous_actions.means() == [0.05, 0.15, 0.25, 0.35, 0.45, 0.55]
    raw = json.loads(Path("evaluation/params/experiment1.json").read_text())
    with pytest.raises(ParamsError, match="nb_actionz: Extra inputs are not permitted"):
        parse_params({**raw, "nb_actionz": 3})
    with pytest.raises(ParamsError, match=r"previous_actions\.mean: Value error, a share must be between 0 and 1"):
        parse_params({**raw, "previous_actions": {"mean": 1.5, "std": 0.1}})
    bad = tmp_path / "p.json"
    bad.write_text("{ nope")
    with pytest.raises(ParamsError, match=r"p.json:1:3: not valid JSON"):
        load_params(bad)


# ---------------------------------------------------------------- simulator


def workflow(name: str, actions: list[tuple[int, str, list[int], int, float]]) -> dict:
    """(id, label, parents, size KB, seconds) -> a synth workflow."""
    return {
        "name": name,
        "actions": [
            {
                "id": i,
                "name": label,
                "type": "SHELL",
                "command": ["python3", "synth.py"],
                "parentActions": ps,
                "additionalInput": [
                    {"key": "label", "value": label},
                    {"key": "seconds", "value": str(sec)},
                    {"key": "sizeKB", "value": str(kb)},
                ],
            }
            for i, label, ps, kb, sec in actions
        ],
    }


def leafy() -> list:
    return prepare(
        [
            workflow("w0", [(1, "a", [], 10, 1.0), (2, "b", [1], 10, 2.0), (3, "c", [2], 1, 3.0)]),
            workflow("w1", [(1, "a", [], 10, 1.0), (2, "b", [1], 10, 2.0)]),  # b now a leaf
            workflow(
                "w2", [(1, "a", [], 10, 1.0), (2, "b", [1], 10, 2.0), (3, "c", [2], 1, 3.0), (4, "d", [3], 1, 4.0)]
            ),  # c (LEAF) now an intermediate
        ]
    )


def test_a_stored_dataset_reused_as_a_leaf_becomes_leaf_and_a_leaf_stays_leaf() -> None:
    wfs = leafy()
    r = simulate(wfs, "lru", capacity=20 * KB)
    # w1 reuses b as its leaf (a is skipped); w2 reuses c, LEAF though an intermediate there.
    assert r.computed_sets() == [{1, 2, 3}, set(), {4}]
    assert r.deletions == 0 and r.peak_stored_bytes == 20 * KB
    assert r.leaf_bytes == (10 + 1 + 1) * KB  # b, c, d: outside the budget
    assert r.seconds == 1 + 2 + 3 + 4 and no_reuse_seconds(wfs) == 6 + 3 + 10


def test_over_budget_a_stored_dataset_is_deleted_and_computed_again() -> None:
    r = simulate(leafy(), "lru", capacity=10 * KB)
    # After w0, a and b (20 KB) exceed 10 KB: one goes. Production touches computed datasets
    # children first (in plan order), so a was used last and b is the least recently used.
    assert len(r.workflows[0].deleted) == 1
    assert r.computed_sets() == [{1, 2, 3}, {2}, {4}]
    assert r.seconds == 6 + 2 + 4


def test_dataset_states_never_delete_a_leaf() -> None:
    ds = Datasets()
    ds.record("x", Cost(5 * KB, 1.0), leaf=True)
    assert ds.candidates() == [] and ds.stored_bytes == 0
    with pytest.raises(AssertionError):
        ds.delete("x")


def test_params_cost_reads_both_forms() -> None:
    h = generate(small(), 0)
    spec, _ = parse_workflow(h.command_line()[0])
    a = spec.actions[0]
    pool = h.pool[a.id]
    c = params_cost(a, "h")
    assert c.size == round(pool.size_mb * MB) and c.seconds == pytest.approx(pool.time_s)
    spec, _ = parse_workflow(workflow("w", [(1, "a", [], 12, 0.25)]))
    assert params_cost(spec.actions[0], "h").size == 12 * KB


def test_window_keeps_the_last_actions_grouped_by_workflow() -> None:
    w = Window(5)
    w.add(["a", "b", "c"])
    w.add(["d", "e"])
    w.add(["f", "g"])
    assert list(w.workflows) == [["c"], ["d", "e"], ["f", "g"]] and w.actions == 5


@pytest.fixture(scope="module")
def histories() -> list[tuple[int, object]]:
    """Twelve generated histories (six seeds, two shares), prepared once."""
    out = []
    for seed in range(6):
        for share in (0.15, 0.5):
            out.append((seed, share, prepare(generate(shipped(2).with_share(share), seed).command_line())))
    return out


@pytest.mark.parametrize("capacity_mb", [100, 500])
def test_every_algorithm_lies_between_unlimited_and_no_reuse(histories, capacity_mb: int) -> None:
    beaten = []
    for seed, share, wfs in histories:
        t_none = no_reuse_seconds(wfs)
        t_unl = simulate(wfs, None, None).seconds
        t_ideal = ideal_seconds(wfs, capacity_mb * MB).seconds
        assert t_unl - 1e-6 <= t_ideal <= t_none + 1e-6
        for name in ALGORITHMS:
            r = simulate(wfs, name, capacity_mb * MB)
            assert t_unl - 1e-6 <= r.seconds <= t_none + 1e-6, (name, seed, share)
            assert r.peak_stored_bytes >= 0
            if r.seconds < t_ideal - 1e-6:
                beaten.append(
                    f"{name} seed {seed} share {share} at {capacity_mb} MB: {r.seconds:.0f} s < {t_ideal:.0f} s"
                )
    if beaten:  # Algorithm 7 is a heuristic, not a bound: say where it is beaten.
        warnings.warn("beat the ideal time: " + "; ".join(beaten), stacklevel=1)


def test_unlimited_storage_computes_each_dataset_once(histories) -> None:
    for _, _, wfs in histories:
        r = simulate(wfs, None, None)
        distinct = {wf.hashes[a.id]: wf.costs[a.id].seconds for wf in wfs for a in wf.spec.actions}
        assert r.seconds == pytest.approx(sum(distinct.values()))
        assert r.deletions == 0


def test_the_simulator_is_deterministic(histories) -> None:
    _, _, wfs = histories[1]
    for name in ALGORITHMS:
        a, b = simulate(wfs, name, 200 * MB), simulate(wfs, name, 200 * MB)
        assert a.computed_sets() == b.computed_sets() and a.seconds == b.seconds


def test_thresholds_like_the_decision_service() -> None:
    wfs = prepare([workflow(f"w{i}", [(1, f"a{i}", [], 10, 1.0), (2, f"b{i}", [1], 1, 1.0)]) for i in range(6)])
    # 10 KB intermediates; capacity 50 KB; decide past 90 % (45 KB), free down to 60 % (30 KB).
    r = simulate(wfs, "lru", 50 * KB, threshold=0.9, target=0.6)
    assert [len(w.deleted) for w in r.workflows] == [0, 0, 0, 0, 2, 0]


# ---------------------------------------------------------------- ideal


def test_knapsack_is_exact_at_unit_granularity() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(0, 7)
        sizes = [rng.randint(1, 9) for _ in range(n)]
        values = [rng.random() for _ in range(n)]
        cap = rng.randint(0, 25)
        best = max(
            (
                sum(values[i] for i in c)
                for k in range(n + 1)
                for c in itertools.combinations(range(n), k)
                if sum(sizes[i] for i in c) <= cap
            ),
            default=0.0,
        )
        got = knapsack(sizes, values, cap, 1)
        assert sum(sizes[i] for i in got) <= cap
        assert sum(values[i] for i in got) == pytest.approx(best)


def test_knapsack_rounds_sizes_up_so_the_choice_fits() -> None:
    got = knapsack([15, 15, 15], [1.0, 1.0, 1.0], capacity=31, granularity=10)
    assert sum([15, 15, 15][i] for i in got) <= 31 and len(got) == 1


def test_ideal_keeps_what_the_future_uses() -> None:
    wfs = prepare(
        [
            workflow("w0", [(1, "x", [], 10, 5.0), (2, "y", [], 10, 1.0), (3, "leaf0", [1, 2], 1, 0.0)]),
            workflow("w1", [(1, "x", [], 10, 5.0), (2, "leaf1", [1], 1, 0.0)]),
            workflow("w2", [(1, "y", [], 10, 1.0), (2, "leaf2", [1], 1, 0.0)]),
        ]
    )
    # Room for one: keep x (used again, dearer) at t=1, y at t=2.
    assert ideal_seconds(wfs, 10 * KB, granularity=KB).per_workflow == [6.0, 0.0, 0.0]
    assert ideal_seconds(wfs, 5 * KB, granularity=KB).per_workflow == [6.0, 5.0, 1.0]


# ---------------------------------------------------------------- experiments and CLI


def test_experiment_runs_carry_references_and_merit() -> None:
    p = shipped(1).model_copy(update={"nb_actions": 60, "storage_mb": [50, 400]})
    runs = run_experiment(1, p, seeds=2, algorithms=["adaptive", "reuse-rate"])
    assert {r.series for r in runs} == {"no-reuse", "unlimited", "ideal", "adaptive", "reuse-rate"}
    for r in runs:
        assert r.unlimited_seconds <= r.seconds <= r.no_reuse_seconds + 1e-6
        if r.series == "no-reuse":
            assert r.merit == 0.0 and r.percent == 100.0
        if r.series == "unlimited":
            assert r.merit == 1.0


def test_pingo_evaluate_quick_writes_csv_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        pingo_main(["evaluate", "--quick", "--out", str(tmp_path), "--algorithms", "adaptive,reuse-rate"])
    assert done.value.code == 0
    out, err = capsys.readouterr()
    assert "Experiment 1" in out and "Experiment 2" in out and "reuse-rate" in out
    # Progress off a terminal: a line per step, (6 budgets + 6 shares) x 2 seeds, no carriage returns.
    steps = [line for line in err.splitlines() if re.match(r"\d+/24 experiment [12]: ", line)]
    assert len(steps) == 24 and steps[-1].startswith("24/24 ") and "\r" not in err
    assert "NOT met" not in out and "with the smallest budget (100 MB), " in out  # said in words
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert {r["series"] for r in rows} == {"no-reuse", "unlimited", "ideal", "adaptive", "reuse-rate"}
    assert len(list(csv.DictReader((tmp_path / "summary.csv").open()))) == (6 + 6) * 5
    for png in ("figure-4.5-storage.png", "figure-4.6-previous-actions.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_pingo_evaluate_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for args, message in (
        (["--algorithms", "nope"], "unknown algorithm(s) nope"),
        (["--seeds", "0"], "--seeds must be at least 1"),
        (["--params", str(tmp_path / "missing.json")], "cannot read"),
    ):
        with pytest.raises(SystemExit) as done:
            pingo_main(["evaluate", "--out", str(tmp_path), *args])
        assert done.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--capacity", "5XB"], "--capacity: cannot read '5XB' as a size"),
        (["--capacity", "0"], "--capacity: a size must be at least 1 byte"),
        (["--since", "yesterday"], "--since: cannot read 'yesterday' as a date"),
        (["--algorithm", "nope"], "--algorithm: unknown decision algorithm 'nope'"),
    ],
)
def test_whatif_rejects_bad_input_clearly(args: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        pingo_main(["whatif", *args])
    assert done.value.code == 2
    assert message in capsys.readouterr().err


def test_sizes_and_dates() -> None:
    # pydantic's ByteSize, as settings read sizes: KB/MB/GB decimal, KiB/MiB/GiB binary.
    assert parse_size("500MiB") == 500 * MB
    assert parse_size("2GB") == 2 * 1000**3
    assert parse_size("1.5 GiB") == int(1.5 * 1024**3)
    assert parse_size("4096") == 4096
    assert parse_size("64kib") == 64 * KB
    for bad in ("", "MB", "5XB", "-3MB", "1e3"):
        with pytest.raises(ValueError, match="cannot read"):
            parse_size(bad)
    assert parse_date("2024-05-01T00:00:00+00:00") == 1714521600.0
    with pytest.raises(ValueError, match="cannot read 'soon' as a date"):
        parse_date("soon")


def test_generator_writes_workflow_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from evaluation.generator import main

    params = Path("evaluation/params/experiment2.json")
    assert main([str(params), "--share", "0.25", "--seed", "3", "--out", str(tmp_path), "--shell"]) == 0
    files = sorted(tmp_path.glob("workflow-*.json"))
    assert files and "workflows" in capsys.readouterr().out
    bodies = [json.loads(f.read_text()) for f in files]
    assert bodies == generate(shipped(2).with_share(0.25), 3).shell()
