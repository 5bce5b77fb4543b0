"""Local filesystem storage: the embedded default."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import shutil
import uuid
from pathlib import Path

from shared.storage.base import ATTEMPTS_DIR, Entry


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


class LocalStorage:
    def __init__(self, root: Path) -> None:
        self.root = str(root)
        Path(root, ATTEMPTS_DIR).mkdir(parents=True, exist_ok=True)
        # Content digests by (path, size, mtime): a folder of jars is read once, not per submission.
        self._digests: dict[tuple[str, int, int], str] = {}

    def normalize(self, root: str, path: str) -> str:
        return str((Path(root) / path).resolve())

    def inside(self, path: str, roots: list[str]) -> bool:
        p = Path(path)
        return any(p == Path(r) or p.is_relative_to(r) for r in roots)

    async def is_dir(self, path: str) -> bool:
        return await asyncio.to_thread(Path(path).is_dir)

    async def usage(self) -> int:
        return await self.size(self.root) or 0

    async def fingerprint(self, folder: str) -> str:
        """A digest of every file under ``folder``: relative path and content hash."""
        return await asyncio.to_thread(self._fingerprint, Path(folder))

    def _fingerprint(self, folder: Path) -> str:
        h = hashlib.sha256()
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            st = f.stat()
            key = (str(f), st.st_size, st.st_mtime_ns)
            if key not in self._digests:
                self._digests[key] = hashlib.sha256(f.read_bytes()).hexdigest()
            h.update(f"{f.relative_to(folder)}\0{self._digests[key]}\0".encode())
        return h.hexdigest()

    async def close(self) -> None:
        pass

    def attempt_path(self, final: str, action_id: str, attempt: int) -> str:
        parent = Path(final).parent / ATTEMPTS_DIR
        return str(parent / f"{Path(final).name}.{_safe(action_id)}.{attempt}")

    async def prepare(self, attempt: str) -> None:
        await asyncio.to_thread(self._prepare, Path(attempt))

    @staticmethod
    def _prepare(attempt: Path) -> None:
        attempt.parent.mkdir(parents=True, exist_ok=True)
        if attempt.exists():
            shutil.rmtree(attempt, ignore_errors=True)  # a leftover of a crashed submit

    async def commit(self, attempt: str, final: str, replace: bool = False) -> bool:
        return await asyncio.to_thread(self._commit, Path(attempt), Path(final), replace)

    def _commit(self, attempt: Path, final: Path, replace: bool) -> bool:
        final.parent.mkdir(parents=True, exist_ok=True)
        if not attempt.exists():
            if final.exists():
                return True  # a repeated commit: done before
            raise FileNotFoundError(f"the action reported success but its output {attempt} does not exist")
        if replace and final.exists():
            trash = final.with_name(f".{final.name}.replaced.{uuid.uuid4().hex[:8]}")
            os.rename(final, trash)
            os.rename(attempt, final)
            shutil.rmtree(trash, ignore_errors=True)
            return True
        try:
            if final.exists():
                raise FileExistsError(final)
            os.rename(attempt, final)
            return True
        except OSError as exc:
            if not isinstance(exc, FileExistsError) and exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            self._delete(attempt)
            return False

    async def discard(self, path: str) -> None:
        await self.delete(path)

    async def delete(self, path: str) -> None:
        await asyncio.to_thread(self._delete, Path(path))

    @staticmethod
    def _delete(p: Path) -> None:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

    async def size(self, path: str) -> int | None:
        return await asyncio.to_thread(self._size, Path(path))

    @staticmethod
    def _size(p: Path) -> int | None:
        if not p.exists():
            return None
        if p.is_file():
            return p.stat().st_size
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())

    async def exists(self, path: str) -> bool:
        return await asyncio.to_thread(Path(path).exists)

    async def list_root(self) -> list[Entry]:
        def scan() -> list[Entry]:
            out = []
            for base in (Path(self.root), Path(self.root, ATTEMPTS_DIR)):
                if base.is_dir():
                    for e in os.scandir(base):
                        if e.name != ATTEMPTS_DIR:
                            rel = e.name if base == Path(self.root) else f"{ATTEMPTS_DIR}/{e.name}"
                            out.append(Entry(rel, e.stat(follow_symlinks=False).st_mtime))
            return out

        return await asyncio.to_thread(scan)
