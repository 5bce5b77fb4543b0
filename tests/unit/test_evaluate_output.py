"""What ``pingo evaluate`` shows besides its CSV files: progress that suits where stderr goes,
and the zoom of Figure 4.5/4.6 on the differences from the ideal time (evaluation/plots.py)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from rich.cells import cell_len

from evaluation.experiments import Run
from evaluation.plots import extra_over_ideal, settled_from
from evaluation.progress import Progress

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_plain_line_per_step_off_a_terminal():
    out = StringIO()
    progress = Progress(3, out)
    for label in ("experiment 1: 500 MB, seed 0", "experiment 1: 1000 MB, seed 0", "experiment 2: share 5%, seed 0"):
        progress.step(label)
    progress.close()
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "1/3 experiment 1: 500 MB, seed 0",
        "2/3 experiment 1: 1000 MB, seed 0",
        "3/3 experiment 2: share 5%, seed 0",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_progress_on_a_terminal_is_a_bar_redrawn_within_its_width(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    progress = Progress(2, out)
    progress.step("experiment 1: 500 MB, seed 0 " + "with a label longer than the terminal is wide " * 2)
    progress.step("experiment 1: 1000 MB, seed 0")
    assert progress.bar is None  # stopped after the last step: the cursor is below it
    drawn = out.getvalue()
    assert "\x1b[" in drawn and "2/2" in drawn
    for line in ESCAPE.sub("", drawn).replace("\r", "\n").splitlines():
        assert cell_len(line) <= 80, line


def run(x: float, seed: int, series: str, seconds: float, ideal: float = 50.0, unlimited: float = 50.0) -> Run:
    return Run(1, x, seed, series, seconds, 100.0, unlimited, ideal, workflows=10, leaf_mb=0.0)


def test_the_zoom_pairs_each_run_with_the_ideal_time_of_its_own_history():
    # Two histories of very different ideal times: lru is 10 % over the ideal on both.
    runs = [
        run(500, 0, "lru", 55.0, ideal=50.0),
        run(500, 1, "lru", 88.0, ideal=80.0),
        run(500, 0, "unlimited", 50.0, ideal=50.0),
        run(500, 1, "unlimited", 76.0, ideal=80.0, unlimited=76.0),
        run(500, 0, "ideal", 50.0),
        run(500, 0, "no-reuse", 100.0),
    ]
    extra = extra_over_ideal(runs, 1)
    assert set(extra) == {"lru", "unlimited"}  # ideal is the zero line, no reuse is off the scale
    mean, std = extra["lru"][500]
    assert mean == pytest.approx(10.0) and std == pytest.approx(0.0)  # unpaired, the spread would be huge
    assert extra["unlimited"][500][0] == pytest.approx(-2.5)  # below the ideal: visible, not hidden under it


def test_the_range_where_every_algorithm_equals_unlimited_storage_is_found():
    runs = [
        run(500, 0, "lru", 55.0),
        run(1000, 0, "lru", 50.0),
        run(1000, 0, "mcu", 50.0),
        run(1500, 0, "lru", 50.0),
        run(1500, 0, "mcu", 50.0),
        run(1500, 0, "no-reuse", 100.0),  # references do not count
    ]
    assert settled_from(runs, 1) == 1000
    assert settled_from([*runs, run(1500, 1, "mcu", 51.0)], 1) is None  # not settled at the largest budget
    assert settled_from(runs, 2) is None
