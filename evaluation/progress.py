"""A text progress bar on stderr (the results go to stdout and files)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.started = time.monotonic()

    def step(self, label: str) -> None:
        self.done += 1
        filled = self.width * self.done // self.total
        elapsed = time.monotonic() - self.started
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {elapsed:5.1f}s {label:<40.40}")
        if self.done >= self.total:
            self.stream.write("\n")
        self.stream.flush()
