"""Figures 4.5 and 4.6: computation time as % of the no-reuse time, against storage and
against the share of previous actions, for every algorithm and the reference points."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, safe in CI and over SSH

import matplotlib.pyplot as plt

from evaluation.experiments import Point

TITLES = {
    1: ("Computation time as storage increases (cf. thesis Figure 4.5)", "storage for intermediate datasets (MB)"),
    2: (
        "Computation time as the share of actions from previous workflows increases (cf. Figure 4.6)",
        "actions from previous workflows (%)",
    ),
}
FILES = {1: "figure-4.5-storage.png", 2: "figure-4.6-previous-actions.png"}
REFERENCE_STYLE = {
    "no-reuse": dict(color="black", linestyle="--", marker=None, label="no reuse (100 %)"),
    "unlimited": dict(color="grey", linestyle=":", marker=None, label="unlimited storage"),
    "ideal": dict(color="black", linestyle="-.", marker=None, label="ideal (Algorithm 7)"),
}


def plot(points: list[Point], experiment: int, out_dir: Path) -> Path:
    """Top: the thesis's figure (time as % of no reuse). Bottom: the figure of merit."""
    mine = [p for p in points if p.experiment == experiment]
    by_series: dict[str, list[Point]] = {}
    for p in mine:
        by_series.setdefault(p.series, []).append(p)
    title, xlabel = TITLES[experiment]
    scale = 1.0 if experiment == 1 else 100.0
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 8.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    markers = iter("osD^v<>ph*")
    for series in sorted(by_series, key=lambda s: (s not in REFERENCE_STYLE, s)):
        pts = sorted(by_series[series], key=lambda p: p.x)
        xs = [p.x * scale for p in pts]
        if series in REFERENCE_STYLE:
            top.plot(xs, [p.percent_mean for p in pts], linewidth=1.2, **REFERENCE_STYLE[series])
            if series != "no-reuse":
                bottom.plot(xs, [p.merit_mean for p in pts], linewidth=1.2, **REFERENCE_STYLE[series])
            continue
        style = dict(marker=next(markers, "o"), markersize=4, capsize=3, linewidth=1.4, label=series)
        line = top.errorbar(xs, [p.percent_mean for p in pts], yerr=[p.percent_std for p in pts], **style)
        bottom.errorbar(
            xs, [p.merit_mean for p in pts], yerr=[p.merit_std for p in pts], color=line[0].get_color(), **style
        )
    n = mine[0].n if mine else 0
    top.set_title(title, fontsize=10)
    top.set_ylabel(f"computation time, % of no reuse\n(mean ± std over {n} seeds)")
    bottom.set_ylabel("figure of merit\n(T_none - T) / (T_none - T_unlimited)")
    bottom.set_xlabel(xlabel)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    top.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILES[experiment]
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
