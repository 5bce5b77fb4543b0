"""The last lines of a log read in chunks, keeping only those lines in memory
(``tail=N`` of docs/api.md, "Action logs")."""

from __future__ import annotations

from collections import deque


class LineTail:
    """Feed it a log's chunks in order; ``text()`` is then its last ``n`` lines."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lines: deque[bytes] = deque(maxlen=n) if n > 0 else deque(maxlen=0)
        self.partial = b""  # the line being written: no newline yet

    def feed(self, chunk: bytes) -> None:
        parts = (self.partial + chunk).split(b"\n")
        self.partial = parts.pop()
        self.lines.extend(part + b"\n" for part in parts)

    def text(self) -> bytes:
        if self.n <= 0:
            return b""
        lines = [*self.lines, self.partial] if self.partial else list(self.lines)
        return b"".join(lines[-self.n :])
