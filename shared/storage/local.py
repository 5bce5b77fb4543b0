"""Local filesystem storage: the embedded default.

A committed managed dataset is sealed: the write bits of its files and folders are
cleared, so a later job (or a slip of a user) cannot change it in place and poison every
workflow that reuses it. Deleting one (deletion, forced replacement, the orphan sweep)
gives its folders their owner's write bit back first. Symbolic links are never followed.
This stops accidents, not a hostile job running as Pingo's own user: it could chmod the
files back (README, "What the local executor does not isolate").
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.storage.base import (
    ATTEMPTS_DIR,
    REPLACE_ROUNDS,
    Entry,
    InputsGone,
    InputTooLarge,
    Integrity,
    check_fingerprint_size,
)
from shared.storage.names import aside_name, path_name

log = logging.getLogger(__name__)


def _walk(top: Path):
    """``top`` and everything under it, as (path, lstat), folders before their contents;
    each folder is listed only after ``_walk``'s caller has handled it (it may make it readable)."""
    try:
        st = os.lstat(top)
    except FileNotFoundError:
        return
    yield top, st
    if not stat.S_ISDIR(st.st_mode):
        return
    stack = [top]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            yield Path(e.path), est
            if stat.S_ISDIR(est.st_mode):
                stack.append(Path(e.path))


def seal(top: Path) -> None:
    """Clear every write bit under ``top`` (files keep their owner's read, folders their
    owner's read and search); symbolic links and their targets are left alone."""
    failed = 0
    for path, st in _walk(top):
        if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
            keep = 0o500 if stat.S_ISDIR(st.st_mode) else 0o400
            try:
                os.chmod(path, (stat.S_IMODE(st.st_mode) & ~0o222) | keep)
            except OSError:
                failed += 1
    if failed:
        log.warning("could not make %d entries of %s read-only", failed, top)


def unseal_folders(top: Path) -> None:
    """Give every folder under ``top`` its owner's read, write and search bits back, so
    that its entries can be removed."""
    for path, st in _walk(top):
        if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
            try:
                os.chmod(path, stat.S_IMODE(st.st_mode) | 0o700)
            except OSError:
                pass  # not ours: rmtree will leave what it cannot remove


def remove_tree(p: Path) -> None:
    """``rm -rf p``, sealed or not; a missing path is not an error."""
    if p.is_dir() and not p.is_symlink():
        unseal_folders(p)
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


class LocalStorage:
    def __init__(self, root: Path, identity: str | None = None) -> None:
        self.root = str(root)
        self.identity = identity or f"local:{self.root}"
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
        files, size = [], 0
        for p in folder.rglob("*"):
            if p.is_file():
                files.append((p, p.stat()))
                size += files[-1][1].st_size
                check_fingerprint_size(len(files), size)  # stops a walk of a huge tree early
        h = hashlib.sha256()
        for f, st in sorted(files, key=lambda fs: fs[0]):
            key = (str(f), st.st_size, st.st_mtime_ns)
            if key not in self._digests:
                self._digests[key] = hashlib.sha256(f.read_bytes()).hexdigest()
            h.update(f"{f.relative_to(folder)}\0{self._digests[key]}\0".encode())
        return h.hexdigest()

    async def input_print(
        self, path: str, checksum: bool, max_files: int, user: str | None = None
    ) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._input_print, Path(path), checksum, max_files)

    def _content(self, f: Path, st: os.stat_result) -> str:
        key = (str(f), st.st_size, st.st_mtime_ns)
        if key not in self._digests:
            self._digests[key] = hashlib.sha256(f.read_bytes()).hexdigest()
        return "sha256:" + self._digests[key]

    def _input_print(self, top: Path, checksum: bool, max_files: int) -> dict[str, Any] | None:
        try:
            st = os.stat(top)  # the input as named: a link to it is followed
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISDIR(st.st_mode):
            if checksum:
                return {"kind": "file", "size": st.st_size, "checksum": self._content(top, st)}
            return {"kind": "file", "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        files: list[tuple[str, Path, os.stat_result]] = []
        for p, pst in _walk(top):  # links inside are not followed: a link counts as a file
            if not stat.S_ISDIR(pst.st_mode):
                files.append((str(p.relative_to(top)), p, pst))
                if len(files) > max_files:
                    raise InputTooLarge(str(top), max_files)
        h = hashlib.sha256()
        for rel, p, pst in sorted(files, key=lambda f: f[0]):
            if checksum and stat.S_ISREG(pst.st_mode):
                part = self._content(p, pst)
            elif checksum:  # a link: its target's name
                part = os.readlink(p) if stat.S_ISLNK(pst.st_mode) else ""
            else:
                part = f"{pst.st_size}\0{pst.st_mtime_ns}"
            h.update(f"{rel}\0{part}\0".encode())
        size = sum(pst.st_size for _, _, pst in files)
        return {"kind": "folder", "size": size, "files": len(files), "digest": "sha256:" + h.hexdigest()}

    async def close(self) -> None:
        pass

    def attempt_path(self, final: str, action_id: str, attempt: int) -> str:
        parent = Path(final).parent / ATTEMPTS_DIR
        return str(parent / f"{Path(final).name}.{path_name(action_id)}.{attempt}")

    async def prepare(self, attempt: str, user: str | None = None) -> None:
        await asyncio.to_thread(self._prepare, Path(attempt))

    def preparer(self, attempt: str, inputs: list[str], user: str | None = None) -> Callable[[], None]:
        def prepare() -> None:
            if gone := [p for p in inputs if not os.path.exists(p)]:
                raise InputsGone(gone)
            self._prepare(Path(attempt))

        return prepare

    @staticmethod
    def _prepare(attempt: Path) -> None:
        attempt.parent.mkdir(parents=True, exist_ok=True)
        if attempt.exists() or attempt.is_symlink():
            remove_tree(attempt)  # a leftover of a crashed submit

    async def commit(self, attempt: str, final: str, replace: bool = False, user: str | None = None) -> bool:
        return await asyncio.to_thread(self._commit, Path(attempt), Path(final), replace)

    async def commit_checked(
        self, attempt: str, final: str, replace: bool = False, user: str | None = None, checksum: bool = False
    ) -> tuple[bool, Integrity | None]:
        return await asyncio.to_thread(self._commit_checked, Path(attempt), Path(final), replace, checksum)

    def _commit_checked(
        self, attempt: Path, final: Path, replace: bool, checksum: bool
    ) -> tuple[bool, Integrity | None]:
        won = self._commit(attempt, final, replace)
        return won, self._integrity(final, checksum)

    def _commit(self, attempt: Path, final: Path, replace: bool) -> bool:
        final.parent.mkdir(parents=True, exist_ok=True)
        aside = final.with_name(aside_name(final.name, attempt.name))
        if not os.path.lexists(attempt):
            if os.path.lexists(final):
                self._seal(final)  # a repeated commit: done before (perhaps cut off before sealing)
                if replace:
                    remove_tree(aside)  # ...or before it removed the output it replaced
                return True
            raise FileNotFoundError(f"the action reported success but its output {attempt} does not exist")
        if replace:
            self._replace(attempt, final, aside)
        else:
            try:
                if os.path.lexists(final):
                    raise FileExistsError(final)
                os.rename(attempt, final)
            except OSError as exc:
                if not isinstance(exc, FileExistsError) and exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                self._delete(attempt)
                return False
        self._seal(final)
        if replace:
            remove_tree(aside)
        return True

    @staticmethod
    def _replace(attempt: Path, final: Path, aside: Path) -> None:
        """Put ``attempt`` at ``final``, whatever is there. A rename over a file (or an empty
        folder) is atomic; a folder with contents cannot be renamed over, so it is first
        renamed aside: for that instant ``final`` does not exist, and a reader sees either
        the old output, nothing, or the new one, never a mix. The caller removes ``aside``
        once the new output is in; a commit cut off in between finds it there on its retry.
        Another replacement committing at the same moment can take ``final`` between the
        two renames: then its output is moved aside too (the last one to commit wins)."""
        for _ in range(REPLACE_ROUNDS):
            try:
                os.rename(attempt, final)
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
                    raise
            remove_tree(aside)  # a crashed earlier try's: the output it moved aside is obsolete too
            try:
                os.rename(final, aside)
            except FileNotFoundError:
                pass  # moved away meanwhile: the next rename finds the path free
        raise OSError(errno.EBUSY, f"{final} kept being replaced by other commits; {attempt} left in place")

    async def discard(self, path: str, user: str | None = None) -> None:
        await self.delete(path)

    async def delete(self, path: str) -> None:
        await asyncio.to_thread(self._delete, Path(path))

    @staticmethod
    def _delete(p: Path) -> None:
        remove_tree(p)

    def _seal(self, final: Path) -> None:
        """Managed datasets only: an unmanaged output is the user's, to do with as they like."""
        if final.is_relative_to(self.root):
            seal(final)

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

    async def integrity(self, path: str, checksum: bool) -> Integrity | None:
        return await asyncio.to_thread(self._integrity, Path(path), checksum)

    @staticmethod
    def _integrity(top: Path, checksum: bool) -> Integrity | None:
        """Regular files count with their bytes; a symbolic link counts as a file whose
        content is its target (never followed: a dataset is what lies under its path)."""
        entries = list(_walk(top))
        if not entries:
            return None
        files = [(p, st) for p, st in entries if not stat.S_ISDIR(st.st_mode)]
        size = sum(st.st_size for _, st in files if stat.S_ISREG(st.st_mode))
        if not checksum:
            return Integrity(size, len(files))
        # The order and the line format of ``_fingerprint``: a folder of regular files has
        # the same digest either way. No cache here: a same-size rewrite that kept the
        # modification time must still be seen.
        h = hashlib.sha256()
        try:
            for p, st in sorted(files, key=lambda fs: fs[0]):
                if stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as f:
                        digest = hashlib.file_digest(f, "sha256").hexdigest()
                elif stat.S_ISLNK(st.st_mode):
                    digest = f"link:{os.readlink(p)}"
                else:
                    digest = f"mode:{stat.S_IFMT(st.st_mode):o}"
                h.update(f"{p.relative_to(top)}\0{digest}\0".encode())
        except FileNotFoundError:
            return None  # removed while it was read: not whole
        return Integrity(size, len(files), h.hexdigest())

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
