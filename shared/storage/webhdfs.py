"""WebHDFS storage: datasets on HDFS. Attempts are committed by RENAME, sizes and file
counts come from GETCONTENTSUMMARY, executables are fingerprinted and datasets
checksummed with GETFILECHECKSUM.

A committed managed dataset is sealed with SETPERMISSION (folders 555, files 444), so no
later job can add, replace or append to its files. HDFS checks the owner's bits too (only
its superuser bypasses them), and a recursive DELETE needs rwx on every folder below the
path: deleting a dataset first gives its folders 755 back."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import posixpath

from shared.hadoop.webhdfs import FileNotFound, HdfsError, WebHdfs
from shared.storage.base import ATTEMPTS_DIR, REPLACE_ROUNDS, Entry, Integrity, check_fingerprint_size
from shared.storage.names import aside_name, path_name

log = logging.getLogger(__name__)
# GETFILECHECKSUM requests in flight at once for one digest: each makes a DataNode read
# the file's block checksums, so a dataset of many files is not asked for one by one.
CHECKSUM_CONCURRENCY = 8


class WebHdfsStorage:
    def __init__(self, hdfs: WebHdfs, root: str) -> None:
        self.hdfs = hdfs
        self.root = posixpath.normpath(root)

    def normalize(self, root: str, path: str) -> str:
        return posixpath.normpath(posixpath.join(root, path))

    def inside(self, path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def attempt_path(self, final: str, action_id: str, attempt: int) -> str:
        parent, name = posixpath.split(final)
        return posixpath.join(parent, ATTEMPTS_DIR, f"{name}.{path_name(action_id)}.{attempt}")

    async def prepare(self, attempt: str) -> None:
        await self.hdfs.mkdirs(posixpath.dirname(attempt))
        await self.hdfs.delete(attempt, recursive=True)  # a leftover of a crashed submit

    async def commit(self, attempt: str, final: str, replace: bool = False) -> bool:
        parent, name = posixpath.split(final)
        aside = posixpath.join(parent, aside_name(name, posixpath.basename(attempt)))
        await self.hdfs.mkdirs(parent)
        if await self.hdfs.status(attempt) is None:
            if await self.hdfs.status(final) is not None:
                await self._seal(final)  # a repeated commit: done before (perhaps cut off before sealing)
                if replace:
                    await self.delete(aside)  # ...or before it removed the output it replaced
                return True
            raise FileNotFoundError(f"the action reported success but its output {attempt} does not exist")
        if replace:
            await self._replace(attempt, final, aside)
        else:
            if await self.hdfs.status(final) is not None:
                await self.hdfs.delete(attempt, recursive=True)
                return False
            # Old RENAME semantics: False rather than an error if the destination appeared meanwhile.
            if not await self.hdfs.rename(attempt, final):
                await self.hdfs.delete(attempt, recursive=True)
                return False
        await self._seal(final)
        if replace:
            await self.delete(aside)
        return True

    async def _replace(self, attempt: str, final: str, aside: str) -> None:
        """Put ``attempt`` at ``final``, whatever is there: the current output is renamed
        aside, then the attempt renamed in (no RENAME overwrites a folder with contents), so
        for that instant ``final`` does not exist. The attempt goes in by the newer RENAME
        (``renameoptions=NONE``), which refuses an existing destination where the old one
        would move the attempt inside it; if another replacement took ``final`` between the
        two renames, its output is moved aside in turn (the last one to commit wins). The
        caller removes ``aside``; a commit cut off before that finds it on its retry."""
        for _ in range(REPLACE_ROUNDS):
            if await self.hdfs.status(final) is not None:
                await self.delete(aside)  # a crashed earlier try's: the output it moved aside is obsolete too
                await self.hdfs.rename(final, aside)
            try:
                await self.hdfs._json("PUT", attempt, "RENAME", destination=final, renameoptions="NONE")
                return
            except HdfsError as exc:
                if exc.exception != "FileAlreadyExistsException":
                    raise
        raise HdfsError(409, "FileAlreadyExistsException", "kept being replaced by other commits", "RENAME", final)

    async def discard(self, path: str) -> None:
        await self.hdfs.delete(path, recursive=True)

    async def delete(self, path: str) -> None:
        if self.inside(path, [self.root]):
            try:
                await self._permissions(path, "755", None)  # a sealed dataset: make it deletable
            except FileNotFound:
                pass  # gone meanwhile
        await self.hdfs.delete(path, recursive=True)

    async def _seal(self, final: str) -> None:
        """Managed datasets only: an unmanaged output is the user's, to do with as they like."""
        if not self.inside(final, [self.root]):
            return
        try:
            await self._permissions(final, "555", "444")
        except HdfsError as exc:
            log.warning("could not make %s read-only: %s", final, exc)

    async def _permissions(self, top: str, folders: str, files: str | None) -> None:
        """SETPERMISSION on ``top`` and everything under it (``files`` None: files unchanged).
        A folder is changed before it is listed; symbolic links are left alone."""
        st = await self.hdfs.status(top)
        stack = [(top, st)] if st is not None else []
        while stack:
            path, st = stack.pop()
            if st["type"] == "DIRECTORY":
                await self.hdfs._json("PUT", path, "SETPERMISSION", permission=folders)
                stack += [(posixpath.join(path, c["pathSuffix"]), c) for c in await self.hdfs.list(path)]
            elif st["type"] == "FILE" and files is not None:
                await self.hdfs._json("PUT", path, "SETPERMISSION", permission=files)

    async def size(self, path: str) -> int | None:
        if await self.hdfs.status(path) is None:
            return None
        return int((await self.hdfs.content_summary(path))["length"])

    async def exists(self, path: str) -> bool:
        return await self.hdfs.status(path) is not None

    async def is_dir(self, path: str) -> bool:
        st = await self.hdfs.status(path)
        return st is not None and st["type"] == "DIRECTORY"

    async def usage(self) -> int:
        return int((await self.hdfs.content_summary(self.root))["length"])

    async def list_root(self) -> list[Entry]:
        out = []
        for base, prefix in ((self.root, ""), (posixpath.join(self.root, ATTEMPTS_DIR), f"{ATTEMPTS_DIR}/")):
            if await self.hdfs.status(base) is None:
                continue
            for st in await self.hdfs.list(base):
                if st["pathSuffix"] != ATTEMPTS_DIR:
                    out.append(Entry(prefix + st["pathSuffix"], st["modificationTime"] / 1000.0))
        return out

    async def integrity(self, path: str, checksum: bool) -> Integrity | None:
        try:
            summary = await self.hdfs.content_summary(path)
        except FileNotFound:
            return None
        digest = None
        if checksum:
            try:
                # A file's summary counts no directory; a directory's counts itself.
                files = [("", path)] if int(summary["directoryCount"]) == 0 else await self._files(path)
                digest = await self._digest(files)
            except FileNotFound:
                return None  # removed while it was read: not whole
        return Integrity(int(summary["length"]), int(summary["fileCount"]), digest)

    async def fingerprint(self, folder: str) -> str:
        """A digest of every file under ``folder``: relative path and HDFS file checksum."""
        return await self._digest(await self._files(folder, limited=True))

    async def _files(self, folder: str, limited: bool = False) -> list[tuple[str, str]]:
        """(relative path, path) of every file under ``folder``, by LISTSTATUS; ``limited``
        stops at the size an action folder's fingerprint may cover."""
        stack = [folder]
        files: list[tuple[str, str]] = []
        size = 0
        while stack:
            d = stack.pop()
            for st in await self.hdfs.list(d):
                path = posixpath.join(d, st["pathSuffix"])
                if st["type"] == "DIRECTORY":
                    stack.append(path)
                else:
                    files.append((posixpath.relpath(path, folder), path))
                    size += int(st.get("length", 0))
                    if limited:
                        check_fingerprint_size(len(files), size)
        return files

    async def _digest(self, files: list[tuple[str, str]]) -> str:
        """SHA-256 over each file's relative path, checksum algorithm and checksum bytes,
        in path order."""
        limit = asyncio.Semaphore(CHECKSUM_CONCURRENCY)

        async def one(path: str) -> dict:
            async with limit:
                return await self.hdfs.checksum(path)

        ordered = sorted(files)
        checksums = await asyncio.gather(*(one(path) for _, path in ordered))
        h = hashlib.sha256()
        for (rel, _), ck in zip(ordered, checksums, strict=True):
            h.update(f"{rel}\0{ck['algorithm']}\0{ck['bytes']}\0".encode())
        return h.hexdigest()

    async def close(self) -> None:
        await self.hdfs.close()
