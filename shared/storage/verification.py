"""Is a committed dataset still what was committed? The one check behind both the planner's
look before a reuse (``shared.lifecycle.claims.whole``) and the dataset manager's reconcile sweep
(docs/planning.md, "Lost datasets").

Levels (``PINGO_VERIFY_REUSE``), each including the ones before it:

- ``none``: nothing is read; the catalogue is trusted;
- ``exists``: the dataset's path is there;
- ``size``: its bytes equal the size recorded at commit;
- ``checksum``: its size, file count and content checksum equal those recorded at commit.
  A dataset committed before checksums were recorded is checked by size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from shared.storage.base import Integrity, Storage

Level = Literal["none", "exists", "size", "checksum"]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    # What the storage holds (None: missing, or not measured at this level).
    found: Integrity | None = None
    # Why it is not whole: missing, size, files or checksum.
    problem: str | None = None

    def lost_fields(self) -> dict[str, Any]:
        """What a move to LOST records of this verdict."""
        found = self.found
        return {
            "found_size": found.size if found else None,
            "found_files": found.files if found else None,
            "found_checksum": found.checksum if found else None,
            "lost_reason": self.problem,
            "lost_at": time.time(),
        }

    def describe(self, doc: dict[str, Any]) -> str:
        """One phrase for a log line: what was found against what was recorded."""
        if self.problem == "missing":
            return f"missing at {doc['path']}"
        found = self.found
        if self.problem == "size" and found is not None:
            return f"{found.size} B at {doc['path']} (recorded {doc.get('size')} B)"
        if self.problem == "files" and found is not None:
            return f"{found.files} files at {doc['path']} (recorded {doc.get('files')})"
        return f"content changed at {doc['path']} ({self.problem})"


WHOLE = Verdict(True)


async def verify(storage: Storage, doc: dict[str, Any], level: Level) -> Verdict:
    """Check the files of dataset ``doc`` (its ``path`` and what was recorded at commit:
    ``size``, ``files``, ``checksum``) at ``level``. A value that was never recorded is
    not compared."""
    if level == "none":
        return WHOLE
    path = doc["path"]
    if level == "exists":
        return WHOLE if await storage.exists(path) else Verdict(False, None, "missing")
    deep = level == "checksum" and doc.get("checksum") is not None
    found = await storage.integrity(path, checksum=deep)
    if found is None:
        return Verdict(False, None, "missing")
    if doc.get("size") is not None and found.size != doc["size"]:
        return Verdict(False, found, "size")
    if deep:
        if doc.get("files") is not None and found.files != doc["files"]:
            return Verdict(False, found, "files")
        if found.checksum != doc["checksum"]:
            return Verdict(False, found, "checksum")
    return Verdict(True, found)
