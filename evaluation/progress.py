"""Progress of ``pingo evaluate`` on stderr (the results go to stdout and files).

On a terminal: one bar, redrawn in place by rich at the terminal's width. Anywhere else
(a pipe, a log file, CI): one plain line per finished step, never a carriage return."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self.bar: Any = None  # rich's Progress, on a terminal only
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=Console(file=self.stream),
            )
            self.task = self.bar.add_task("", total=self.total)
            self.bar.start()

    def step(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=label)
            if self.done >= self.total:
                self.close()
            return
        elapsed = time.monotonic() - self.started
        self.stream.write(f"{self.done}/{self.total} {label} ({elapsed:.1f} s)\n")
        self.stream.flush()

    def close(self) -> None:
        """Leave the terminal's cursor below the bar (also when the run stops early)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
