"""``pingo evaluate`` and ``pingo whatif``: each parses its own arguments (``pingo`` hands
them over untouched) and imports numpy, matplotlib and the simulator only once it runs.
numpy and matplotlib are the ``evaluation`` extra (``pingo[evaluation]``): only ``pingo
evaluate`` needs them, and without them it says what to install."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluation.experiments import Point

# --quick: a fifth of the actions and of the storage, two seeds: seconds, for tests.
QUICK_FACTOR = 0.2


def add_evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiment", choices=["1", "2", "all"], default="all", help="thesis 4.2.1, 4.2.2, or both")
    p.add_argument("--seeds", type=int, default=None, help="generated histories per point (default 5; --quick 2)")
    p.add_argument("--out", default="evaluation-results", help="directory for the CSV files and plots")
    p.add_argument(
        "--params", help="generator parameters (JSON, thesis Appendix C); default evaluation/params/experimentN.json"
    )
    p.add_argument("--algorithms", help="comma-separated algorithm names (default: every registered one)")
    p.add_argument("--quick", action="store_true", help="small histories and budgets, 2 seeds (for tests)")


def add_whatif_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--algorithm",
        action="append",
        help="algorithm to replay (repeatable; default: every registered one)",
    )
    p.add_argument("--capacity", help="storage budget: 500MiB, 2GB, 1.5GiB or bytes (default PINGO_CAPACITY_BYTES)")
    p.add_argument("--since", help="only workflows submitted from this date (YYYY-MM-DD[THH:MM], local time)")
    p.add_argument("--threshold", type=float, help="decision threshold (default PINGO_THRESHOLD)")
    p.add_argument("--target", type=float, help="decision target (default PINGO_TARGET)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def main_evaluate(argv: list[str] | None = None, prog: str = "pingo evaluate") -> int:
    p = argparse.ArgumentParser(
        prog=prog, description="Thesis section 4.2 on the simulator: CSV and plots of every algorithm."
    )
    add_evaluate_arguments(p)
    return run_evaluate(p.parse_args(argv))


def main_whatif(argv: list[str] | None = None, prog: str = "pingo whatif") -> int:
    p = argparse.ArgumentParser(
        prog=prog, description="Replay this installation's recorded history under other algorithms and capacities."
    )
    add_whatif_arguments(p)
    return run_whatif(p.parse_args(argv))


def _fail(message: str) -> int:
    print(f"pingo: {message}", file=sys.stderr)
    return 2


# What `pingo evaluate` needs beyond the services: the `evaluation` extra (pyproject.toml).
EVALUATION_EXTRA = ("numpy", "matplotlib")


def missing_extra() -> list[str]:
    from importlib.util import find_spec

    return [name for name in EVALUATION_EXTRA if find_spec(name) is None]


def run_evaluate(args: argparse.Namespace) -> int:
    if missing := missing_extra():
        return _fail(
            f"evaluate needs {' and '.join(missing)}, which a light install of Pingo leaves out: "
            "pip install 'pingo[evaluation]' (from a clone: pip install -c constraints.txt -e '.[evaluation]')"
        )
    from evaluation.experiments import (
        beats_ideal,
        run_experiment,
        storage_note,
        summarize,
        table,
        write_runs,
        write_summary,
    )
    from evaluation.parameters import ParamsError, load_params, shipped
    from evaluation.plots import plot
    from evaluation.progress import Progress
    from shared.eviction import REGISTRY

    experiments = [1, 2] if args.experiment == "all" else [int(args.experiment)]
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    if seeds < 1:
        return _fail("--seeds must be at least 1")
    algorithms = sorted(REGISTRY)
    if args.algorithms:
        algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        unknown = [a for a in algorithms if a not in REGISTRY]
        if unknown:
            return _fail(f"unknown algorithm(s) {', '.join(unknown)}; known: {', '.join(sorted(REGISTRY))}")
    try:
        params = {e: load_params(args.params) if args.params else shipped(e) for e in experiments}
    except ParamsError as exc:
        return _fail(str(exc))
    if args.quick:
        for e, p in params.items():
            params[e] = p.model_copy(
                update={
                    "nb_actions": max(10, round(p.nb_actions * QUICK_FACTOR)),
                    "storage_mb": [x * QUICK_FACTOR for x in p.storage_mb],
                }
            )
    if 1 in params and isinstance(params[1].previous_actions.mean, list):
        return _fail("experiment 1 needs one share of previous actions (previous_actions.mean a number)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    total = sum(len(params[1].storage_mb) if e == 1 else len(params[e].previous_actions.means()) for e in experiments)
    progress = Progress(total * seeds)
    started = time.monotonic()
    runs = []
    try:
        for e in experiments:
            runs += run_experiment(e, params[e], seeds, algorithms, progress)
    finally:
        progress.close()
    points = summarize(runs)
    write_runs(runs, out / "runs.csv")
    write_summary(points, out / "summary.csv")
    figures = [plot(points, runs, e, out) for e in experiments]
    for e in experiments:
        print(table(points, e))
        print(storage_note(runs, e))
        print()
    if line := tightest(points):
        print(line)
    better = beats_ideal(runs)
    if better:
        print(f"{len(better)} runs beat the ideal time of Algorithm 7 (a heuristic reference, not a bound):")
        for r in better:
            x = f"{r.x:g} MB" if r.experiment == 1 else f"{r.x:.0%}"
            print(
                f"  experiment {r.experiment}, {x}, seed {r.seed}: {r.series} {r.seconds:.1f} s < ideal "
                f"{r.ideal_seconds:.1f} s"
            )
    else:
        print("no run beat the ideal time of Algorithm 7")
    print(f"wrote {out / 'runs.csv'}, {out / 'summary.csv'}, " + ", ".join(str(f) for f in figures))
    print(f"{len(runs)} results in {time.monotonic() - started:.1f} s")
    return 0


def tightest(points: list[Point], experiment: int = 1) -> str:
    """What the tightest budget shows, in words: which algorithm did best there, how much of
    the avoidable recomputation it avoided (and the worst one), how far from the ideal time
    it is."""
    from evaluation.experiments import REFERENCES

    mine = [p for p in points if p.experiment == experiment]
    if not mine:
        return ""
    x = min(p.x for p in mine)
    at = {p.series: p for p in mine if p.x == x}
    algos = sorted((p for s, p in at.items() if s not in REFERENCES), key=lambda p: p.merit_mean, reverse=True)
    if not algos:
        return ""
    best, worst = algos[0], algos[-1]
    line = (
        f"with the smallest budget ({x:g} MB), {best.series} did best: it avoided {best.merit_mean:.0%} of the "
        f"recomputation that unlimited storage avoids"
    )
    if len(algos) > 1:
        line += f" ({worst.series}: {worst.merit_mean:.0%})"
    if "ideal" in at and at["ideal"].seconds_mean > 0:
        slower = best.seconds_mean / at["ideal"].seconds_mean - 1
        if slower > 0.005:
            line += f", and took {slower:.0%} longer than the ideal time"
        elif slower < -0.005:
            line += f", and was {-slower:.0%} faster than the ideal time (a heuristic, not a bound)"
        else:
            line += ", in the ideal time"
    return line + "."


def run_whatif(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from evaluation.units import parse_date, parse_size
    from evaluation.whatif import render, what_if
    from shared.config import Settings
    from shared.eviction import get_algorithm

    try:
        capacity = parse_size(args.capacity) if args.capacity is not None else None
    except ValueError as exc:
        return _fail(f"--capacity: {exc}")
    try:
        since = parse_date(args.since) if args.since is not None else None
    except ValueError as exc:
        return _fail(f"--since: {exc}")
    for name in args.algorithm or []:
        try:
            get_algorithm(name)
        except ValueError as exc:
            return _fail(f"--algorithm: {exc}")
    try:
        settings = Settings()
    except Exception as exc:  # pydantic's ValidationError: a bad PINGO_* variable
        return _fail(f"bad PINGO_* configuration: {exc}")
    try:
        report = asyncio.run(what_if(settings, args.algorithm, capacity, since, args.threshold, args.target))
    except ValueError as exc:
        return _fail(str(exc))
    except Exception as exc:  # the database: unreachable, refused, ...
        print(
            f"pingo: cannot read the history from MongoDB ({settings.mongo_url or 'embedded'}): {exc}", file=sys.stderr
        )
        return 1
    if not report.recorded.workflows:
        print(
            "pingo: no recorded SUCCEEDED workflows" + (f" since {args.since}" if args.since else ""), file=sys.stderr
        )
        return 1
    if args.json:
        rec = report.recorded
        print(
            json.dumps(
                {
                    "workflows": len(rec.workflows),
                    "actions": rec.actions,
                    "skipped": rec.skipped,
                    "capacityBytes": report.capacity,
                    "threshold": report.threshold,
                    "target": report.target,
                    "configured": report.configured,
                    "actual": {"seconds": rec.actual_seconds, "computed": rec.actual_computed},
                    "replays": [
                        {"series": r.series, "seconds": r.seconds, "computed": r.computed, "deletions": r.deletions}
                        for r in report.rows
                    ],
                },
                indent=2,
            )
        )
    else:
        from pingo.display import human

        print(render(report, human))
    return 0
