"""Figures 4.5 and 4.6: computation time as % of the no-reuse time, against storage and
against the share of previous actions, for every algorithm and the reference points.

Three panels on one x axis:

1. the thesis's figure: time as % of no reuse (mean ± std over seeds);
2. a zoom on what the first hides: each series' extra time over the ideal time, paired by
   history (each seed's run against that seed's ideal), so the differences between
   algorithms are not drowned by the differences between generated histories;
3. the figure of merit, (T_none - T) / (T_none - T_unlimited).

Series at one x are drawn side by side (a small horizontal offset each) so equal values do
not hide each other; unlimited storage is a wide grey band under the thin ideal line, so
both stay visible where they coincide; and the range where every algorithm already takes
the ideal time is shaded and labelled, rather than left as a bundle of lines drawn on top
of each other.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from evaluation.experiments import REFERENCES, Point, Run

TITLES = {
    1: ("Computation time as storage increases (cf. thesis Figure 4.5)", "storage for intermediate datasets (MB)"),
    2: (
        "Computation time as the share of actions from previous workflows increases (cf. Figure 4.6)",
        "actions from previous workflows (%)",
    ),
}
FILES = {1: "figure-4.5-storage.png", 2: "figure-4.6-previous-actions.png"}
REFERENCE_STYLE: dict[str, dict[str, Any]] = {
    "no-reuse": dict(color="black", linestyle="--", linewidth=1.2, label="no reuse (100 %)"),
    # Wide and pale, under the ideal line: where the two coincide, both are still seen.
    "unlimited": dict(color="0.6", linestyle="-", linewidth=6, alpha=0.45, zorder=1, label="unlimited storage"),
    "ideal": dict(color="black", linestyle="-.", linewidth=1.2, zorder=3, label="ideal (Algorithm 7)"),
}
SAME = 1e-9  # seconds: equal, as the simulator's sums go
DODGE = 0.009  # of the x range, between two series drawn at one x


def extra_over_ideal(runs: list[Run], experiment: int) -> dict[str, dict[float, tuple[float, float]]]:
    """series -> x -> (mean, std) over seeds of 100 * (T - T_ideal) / T_ideal, each run against
    the ideal time of its own history."""
    per: dict[str, dict[float, list[float]]] = {}
    for r in runs:
        if r.experiment != experiment or r.series in ("ideal", "no-reuse") or r.ideal_seconds <= 0:
            continue
        per.setdefault(r.series, {}).setdefault(r.x, []).append(100.0 * (r.seconds - r.ideal_seconds) / r.ideal_seconds)
    return {s: {x: (statistics.fmean(v), statistics.pstdev(v)) for x, v in by_x.items()} for s, by_x in per.items()}


def settled_from(runs: list[Run], experiment: int) -> float | None:
    """The smallest x from which every algorithm, on every history, takes exactly the time of
    unlimited storage: past it their lines coincide. None if they never all do."""
    xs = sorted({r.x for r in runs if r.experiment == experiment})
    settled = None
    for x in reversed(xs):
        at = [r for r in runs if r.experiment == experiment and r.x == x and r.series not in REFERENCES]
        if not at or any(abs(r.seconds - r.unlimited_seconds) > SAME for r in at):
            break
        settled = x
    return settled


def plot(points: list[Point], runs: list[Run], experiment: int, out_dir: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, safe in CI and over SSH
    import matplotlib.pyplot as plt

    mine = [p for p in points if p.experiment == experiment]
    by_series: dict[str, list[Point]] = {}
    for p in mine:
        by_series.setdefault(p.series, []).append(p)
    title, xlabel = TITLES[experiment]
    scale = 1.0 if experiment == 1 else 100.0
    xs_all = sorted({p.x * scale for p in mine}) or [0.0]
    step = DODGE * ((xs_all[-1] - xs_all[0]) or 1.0)
    algorithms = sorted(s for s in by_series if s not in REFERENCES)

    def dodged(series: str, xs: list[float]) -> list[float]:
        if series not in algorithms:
            return xs
        offset = (algorithms.index(series) - (len(algorithms) - 1) / 2) * step
        return [x + offset for x in xs]

    fig, (top, zoom, merit) = plt.subplots(3, 1, figsize=(9, 11), sharex=True, gridspec_kw={"height_ratios": [3, 2, 2]})
    colours: dict[str, Any] = {}
    markers = iter("osD^v<>ph*")
    for series in [*[s for s in REFERENCES if s in by_series], *algorithms]:
        pts = sorted(by_series[series], key=lambda p: p.x)
        xs = [p.x * scale for p in pts]
        if series in REFERENCES:
            top.plot(xs, [p.percent_mean for p in pts], **REFERENCE_STYLE[series])
            if series != "no-reuse":
                merit.plot(xs, [p.merit_mean for p in pts], **REFERENCE_STYLE[series])
            continue
        style = dict(marker=next(markers, "o"), markersize=4, capsize=3, linewidth=1.3, label=series, zorder=4)
        line = top.errorbar(
            dodged(series, xs), [p.percent_mean for p in pts], yerr=[p.percent_std for p in pts], **style
        )
        colours[series] = line[0].get_color()
        merit.errorbar(
            dodged(series, xs), [p.merit_mean for p in pts], yerr=[p.merit_std for p in pts], color=colours[series],
            **style,
        )  # fmt: skip

    zoom.axhline(0.0, **{**REFERENCE_STYLE["ideal"], "label": "ideal (Algorithm 7): 0"})
    extra = extra_over_ideal(runs, experiment)
    if "unlimited" in extra:
        xs = sorted(extra["unlimited"])
        zoom.plot(
            [x * scale for x in xs], [extra["unlimited"][x][0] for x in xs], **REFERENCE_STYLE["unlimited"]
        )  # fmt: skip
    zmarkers = iter("osD^v<>ph*")
    for series in algorithms:
        if series not in extra:
            continue
        xs = sorted(extra[series])
        zoom.errorbar(
            dodged(series, [x * scale for x in xs]), [extra[series][x][0] for x in xs],
            yerr=[extra[series][x][1] for x in xs], color=colours.get(series), marker=next(zmarkers, "o"),
            markersize=4, capsize=3, linewidth=1.3, label=series, zorder=4,
        )  # fmt: skip

    if (settled := settled_from(runs, experiment)) is not None and settled * scale > xs_all[0]:
        for ax in (top, zoom, merit):
            ax.axvspan(settled * scale - step * len(algorithms), xs_all[-1] + step * len(algorithms),
                       color="tab:green", alpha=0.07, zorder=0)  # fmt: skip
        unit = "MB" if experiment == 1 else "%"
        zoom.annotate(
            f"from {settled * scale:g} {unit}: every algorithm takes the\ntime of unlimited storage (lines coincide)",
            xy=(settled * scale, 0), xytext=(0.98, 0.92), textcoords="axes fraction", ha="right", va="top",
            fontsize=8, color="darkgreen",
        )  # fmt: skip

    n = mine[0].n if mine else 0
    top.set_title(title, fontsize=10)
    top.set_ylabel(f"computation time, % of no reuse\n(mean ± std over {n} seeds)")
    zoom.set_ylabel("extra time over the ideal,\n% of ideal (paired by history)")
    merit.set_ylabel("figure of merit\n(T_none - T) / (T_none - T_unlimited)")
    merit.set_xlabel(xlabel)
    for ax in (top, zoom, merit):
        ax.grid(True, alpha=0.3)
    top.legend(fontsize=8, loc="upper right", ncol=2)
    zoom.legend(fontsize=7, loc="best", ncol=2)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILES[experiment]
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
