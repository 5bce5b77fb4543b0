"""The experiments of thesis section 4.2, run on the simulator.

Experiment 1 (4.2.1, Figure 4.5): storage from 500 MB to 3000 MB, half the actions of a
workflow from previous ones. Experiment 2 (4.2.2, Figure 4.6): 500 MB, share of previous
actions from 5 % to 55 %. Each point is run on ``seeds`` generated histories (seed
``params.seed + i``); every algorithm replays the same histories.

Beside every result: T_none (every action computed), T_unlimited (nothing ever deleted)
and T_ideal (Algorithms 7-8, evaluation/ideal.py), and the figure of merit
``(T_none - T) / (T_none - T_unlimited)``: the share of the avoidable recomputation an
algorithm avoids (1 = as good as unlimited storage).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from evaluation.generator import generate
from evaluation.ideal import ideal_seconds
from evaluation.parameters import GeneratorParams
from evaluation.progress import Progress
from evaluation.simulator import MB, PreparedWorkflow, SimulationResult, no_reuse_seconds, prepare, simulate
from shared.eviction import REGISTRY

REFERENCES = ("no-reuse", "unlimited", "ideal")


@dataclass(frozen=True)
class Run:
    """One series (algorithm or reference) on one generated history at one point."""

    experiment: int
    x: float  # storage in MB (experiment 1) or share of previous actions (experiment 2)
    seed: int
    series: str
    seconds: float
    no_reuse_seconds: float
    unlimited_seconds: float
    ideal_seconds: float
    workflows: int
    leaf_mb: float  # LEAF outputs, outside the budget (the same whatever the algorithm)
    peak_stored_mb: float = 0.0  # the most STORED bytes after any workflow, before deciding
    deletions: int = 0

    @property
    def percent(self) -> float:
        return 100.0 * self.seconds / self.no_reuse_seconds

    @property
    def merit(self) -> float:
        avoidable = self.no_reuse_seconds - self.unlimited_seconds
        return (self.no_reuse_seconds - self.seconds) / avoidable if avoidable > 0 else 1.0

    @property
    def beats_ideal(self) -> bool:
        return self.series not in REFERENCES and self.seconds < self.ideal_seconds - 1e-6


@dataclass(frozen=True)
class Point:
    """Mean and standard deviation over seeds of one series at one point."""

    experiment: int
    x: float
    series: str
    n: int
    percent_mean: float
    percent_std: float
    merit_mean: float
    merit_std: float
    seconds_mean: float


def run_point(
    experiment: int,
    x: float,
    seed: int,
    workflows: list[PreparedWorkflow],
    capacity: int,
    params: GeneratorParams,
    algorithms: list[str],
    t_none: float,
    unlimited: SimulationResult,
) -> list[Run]:
    d = params.decision
    t_ideal = ideal_seconds(workflows, capacity, max(1, round(params.ideal.granularity_mb * MB))).seconds
    base = dict(
        experiment=experiment,
        x=x,
        seed=seed,
        no_reuse_seconds=t_none,
        unlimited_seconds=unlimited.seconds,
        ideal_seconds=t_ideal,
        workflows=len(workflows),
        leaf_mb=unlimited.leaf_bytes / MB,
    )
    runs = [
        Run(series="no-reuse", seconds=t_none, **base),
        Run(series="unlimited", seconds=unlimited.seconds, peak_stored_mb=unlimited.peak_stored_bytes / MB, **base),
        Run(series="ideal", seconds=t_ideal, **base),
    ]
    for name in algorithms:
        r = simulate(workflows, name, capacity, d.threshold, d.target, d.history_window)
        runs.append(
            Run(series=name, seconds=r.seconds, deletions=r.deletions, peak_stored_mb=r.peak_stored_bytes / MB, **base)
        )
    return runs


def run_experiment(
    experiment: int,
    params: GeneratorParams,
    seeds: int,
    algorithms: list[str] | None = None,
    progress: Progress | None = None,
) -> list[Run]:
    algorithms = algorithms or sorted(REGISTRY)
    runs: list[Run] = []
    if experiment == 1:
        if isinstance(params.previous_actions.mean, list):
            raise ValueError("experiment 1 takes one share of previous actions (previous_actions.mean a number)")
        for i in range(seeds):
            seed = params.seed + i
            workflows = prepare(generate(params, seed).command_line())
            t_none, unlimited = no_reuse_seconds(workflows), simulate(workflows, None, None)
            for mb in params.storage_mb:
                runs += run_point(1, mb, seed, workflows, round(mb * MB), params, algorithms, t_none, unlimited)
                if progress:
                    progress.step(f"experiment 1: {mb:g} MB, seed {seed}")
    elif experiment == 2:
        capacity = round(params.storage_mb[0] * MB)
        for share in params.previous_actions.means():
            for i in range(seeds):
                seed = params.seed + i
                workflows = prepare(generate(params.with_share(share), seed).command_line())
                t_none, unlimited = no_reuse_seconds(workflows), simulate(workflows, None, None)
                runs += run_point(2, share, seed, workflows, capacity, params, algorithms, t_none, unlimited)
                if progress:
                    progress.step(f"experiment 2: share {share:.0%}, seed {seed}")
    else:
        raise ValueError(f"no experiment {experiment}")
    return runs


def summarize(runs: Iterable[Run]) -> list[Point]:
    groups: dict[tuple[int, float, str], list[Run]] = {}
    for r in runs:
        groups.setdefault((r.experiment, r.x, r.series), []).append(r)
    out = []
    for (experiment, x, series), rs in groups.items():
        pct = [r.percent for r in rs]
        merit = [r.merit for r in rs]
        out.append(
            Point(
                experiment,
                x,
                series,
                len(rs),
                statistics.fmean(pct),
                statistics.pstdev(pct) if len(pct) > 1 else 0.0,
                statistics.fmean(merit),
                statistics.pstdev(merit) if len(merit) > 1 else 0.0,
                statistics.fmean(r.seconds for r in rs),
            )
        )
    return out


def write_runs(runs: list[Run], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "experiment",
                "x",
                "seed",
                "series",
                "seconds",
                "percent_of_no_reuse",
                "merit",
                "no_reuse_seconds",
                "unlimited_seconds",
                "ideal_seconds",
                "beats_ideal",
                "workflows",
                "deletions",
                "peak_stored_mb",
                "leaf_mb",
            ]
        )
        for r in runs:
            w.writerow(
                [
                    r.experiment,
                    r.x,
                    r.seed,
                    r.series,
                    f"{r.seconds:.3f}",
                    f"{r.percent:.4f}",
                    f"{r.merit:.5f}",
                    f"{r.no_reuse_seconds:.3f}",
                    f"{r.unlimited_seconds:.3f}",
                    f"{r.ideal_seconds:.3f}",
                    int(r.beats_ideal),
                    r.workflows,
                    r.deletions,
                    f"{r.peak_stored_mb:.2f}",
                    f"{r.leaf_mb:.2f}",
                ]
            )


def write_summary(points: list[Point], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(asdict(points[0])) if points else ["experiment"])
        w.writeheader()
        for p in points:
            w.writerow({k: (round(v, 5) if isinstance(v, float) else v) for k, v in asdict(p).items()})


def x_text(experiment: int, x: float) -> str:
    return f"{x:g} MB" if experiment == 1 else f"{x:.0%}"


def table(points: list[Point], experiment: int) -> str:
    """The table behind a figure: % of no-reuse time and merit, mean ± std over seeds."""
    mine = [p for p in points if p.experiment == experiment]
    if not mine:
        return ""
    xs = sorted({p.x for p in mine})
    series = [s for s in REFERENCES if s != "no-reuse"] + sorted({p.series for p in mine} - set(REFERENCES))
    at = {(p.x, p.series): p for p in mine}
    head = "storage" if experiment == 1 else "share"
    n = mine[0].n
    lines = [
        f"Experiment {experiment}: computation time as % of no reuse (100 %) and figure of merit "
        f"(T_none - T)/(T_none - T_unlimited), mean ± std over {n} seed{'s' if n != 1 else ''}",
        f"{head:>8}  " + "  ".join(f"{s:>25}" for s in series),
    ]
    for x in xs:
        cells = []
        for s in series:
            p = at.get((x, s))
            cells.append(
                f"{p.percent_mean:5.1f}±{p.percent_std:3.1f}% {p.merit_mean:5.3f}±{p.merit_std:5.3f}" if p else "-"
            )
        lines.append(f"{x_text(experiment, x):>8}  " + "  ".join(f"{c:>25}" for c in cells))
    return "\n".join(lines)


def beats_ideal(runs: list[Run]) -> list[Run]:
    """Cases where an online algorithm did better than Algorithm 7 (a heuristic, not a bound)."""
    return [r for r in runs if r.beats_ideal]


def storage_note(runs: list[Run], experiment: int) -> str:
    """LEAF outputs are outside the budget: how big they and the unlimited STORED peak are."""
    unl = [r for r in runs if r.experiment == experiment and r.series == "unlimited"]
    if not unl:
        return ""
    leaf = statistics.fmean(r.leaf_mb for r in unl)
    peak = statistics.fmean(r.peak_stored_mb for r in unl)
    return (
        f"outside the budget, LEAF outputs: {leaf:.0f} MB per history (mean); with unlimited storage the "
        f"STORED intermediates peak at {peak:.0f} MB"
    )
