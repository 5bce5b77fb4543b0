from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

ATTEMPTS_DIR = ".pingo-attempts"


@dataclass(frozen=True)
class Entry:
    name: str
    mtime: float


class Storage(Protocol):
    root: str

    def normalize(self, root: str, path: str) -> str:
        """``path`` (absolute, or relative to ``root``) in canonical form: no ``..``, no links."""

    def inside(self, path: str, roots: list[str]) -> bool: ...

    async def is_dir(self, path: str) -> bool: ...

    async def usage(self) -> int:
        """Bytes under the managed root."""

    async def fingerprint(self, folder: str) -> str:
        """A digest of the files in an action folder: part of the lineage hash."""

    async def close(self) -> None: ...

    def attempt_path(self, final: str, action_id: str, attempt: int) -> str:
        """The private path one attempt writes to; committed to ``final`` by rename."""

    async def prepare(self, attempt: str) -> None:
        """Make the attempt path's parent; clear a leftover attempt of the same name."""

    async def commit(self, attempt: str, final: str, replace: bool = False) -> bool:
        """Move the attempt's output to ``final``. The first commit wins: a later one is
        discarded (False) unless ``replace``. Repeating a done commit is True. No output
        at either path raises FileNotFoundError: the action did not keep its contract."""

    async def discard(self, path: str) -> None: ...

    async def delete(self, path: str) -> None:
        """Recursive; a missing path is not an error."""

    async def size(self, path: str) -> int | None: ...

    async def exists(self, path: str) -> bool: ...

    async def list_root(self) -> list[Entry]:
        """Entries directly under the managed root, and under its attempts folder."""
