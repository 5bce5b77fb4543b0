"""WebHDFS storage: datasets on HDFS. Attempts are committed by RENAME, sizes and file
counts come from GETCONTENTSUMMARY, executables are fingerprinted and datasets
checksummed with GETFILECHECKSUM.

A committed managed dataset is sealed with SETPERMISSION (folders 555, files 444), so no
later job can add, replace or append to its files. HDFS checks the owner's bits too (only
its superuser bypasses them), and a recursive DELETE needs rwx on every folder below the
path: a refused delete opens the folders again and asks once more.

With users on, jobs run as their owner, so what they write is the owner's; only an inode's
owner may change its mode, so sealing and opening are done by each inode's owner through
``doas``, and an unmanaged output is written as its owner (docs/users.md, "On Hadoop")."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import posixpath
from collections.abc import Callable
from typing import Any

from shared.hadoop.webhdfs import FileNotFound, HdfsError, WebHdfs
from shared.storage.base import (
    ATTEMPTS_DIR,
    REPLACE_ROUNDS,
    Entry,
    InputTooLarge,
    Integrity,
    StorageRefused,
    check_fingerprint_size,
)
from shared.storage.names import aside_name, path_name

log = logging.getLogger(__name__)
# GETFILECHECKSUM requests in flight at once for one digest: each makes a DataNode read
# the file's block checksums, so a dataset of many files is not asked for one by one.
CHECKSUM_CONCURRENCY = 8
# The managed attempts folder: every user's jobs write there (sticky, as /tmp).
STAGING_PERMISSION = "1777"


class WebHdfsStorage:
    def __init__(self, hdfs: WebHdfs, root: str, identity: str | None = None) -> None:
        self.hdfs = hdfs
        self.root = posixpath.normpath(root)
        self.identity = identity or f"webhdfs:{hdfs.base}{self.root}"
        self._staging_ready: set[str] = set()

    def normalize(self, root: str, path: str) -> str:
        return posixpath.normpath(posixpath.join(root, path))

    def inside(self, path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def attempt_path(self, final: str, action_id: str, attempt: int) -> str:
        parent, name = posixpath.split(final)
        return posixpath.join(parent, ATTEMPTS_DIR, f"{name}.{path_name(action_id)}.{attempt}")

    def _fs(self, path: str, user: str | None) -> WebHdfs:
        """Who acts on ``path``: Pingo under the managed root, else the output's owner
        (``doas``), so an unmanaged output is written only where its owner may write."""
        if user is None or self.inside(path, [self.root]):
            return self.hdfs
        return self.hdfs.acting_as(user)

    def preparer(self, attempt: str, inputs: list[str], user: str | None = None) -> None:
        return None  # requests over the network: ``prepare`` and ``exists``, on the loop

    async def prepare(self, attempt: str, user: str | None = None) -> None:
        fs = self._fs(attempt, user)
        staging = posixpath.dirname(attempt)
        if fs is self.hdfs and self.inside(attempt, [self.root]):
            await self._open_staging(staging)
        else:
            await fs.mkdirs(staging)
        await self._remove(fs, attempt)  # a leftover of a crashed submit

    async def _open_staging(self, staging: str) -> None:
        """The managed attempts folder is where owners' jobs write (docs/users.md, "On
        Hadoop"): 1777, writable by all, each entry removable only by its owner and Pingo."""
        if staging in self._staging_ready:
            return
        st = await self.hdfs.status(staging)
        if st is None:
            await self.hdfs.mkdirs(staging)
        if st is None or st.get("permission") != STAGING_PERMISSION:
            try:
                await self.hdfs._json("PUT", staging, "SETPERMISSION", permission=STAGING_PERMISSION)
            except HdfsError as exc:
                log.warning("could not open %s to the jobs of Pingo's users: %s", staging, exc)
                return
        self._staging_ready.add(staging)

    async def commit(self, attempt: str, final: str, replace: bool = False, user: str | None = None) -> bool:
        fs = self._fs(final, user)
        parent, name = posixpath.split(final)
        aside = posixpath.join(parent, aside_name(name, posixpath.basename(attempt)))
        await fs.mkdirs(parent)
        if await fs.status(attempt) is None:
            if await fs.status(final) is not None:
                await self._seal(final)  # a repeated commit: done before (perhaps cut off before sealing)
                if replace:
                    await self._remove(fs, aside)  # ...or before it removed the output it replaced
                return True
            raise FileNotFoundError(f"the action reported success but its output {attempt} does not exist")
        if replace:
            await self._replace(fs, attempt, final, aside)
        else:
            if await fs.status(final) is not None:
                await self._remove(fs, attempt)
                return False
            # Old RENAME semantics: False rather than an error if the destination appeared meanwhile.
            if not await fs.rename(attempt, final):
                await self._remove(fs, attempt)
                return False
        await self._seal(final)
        if replace:
            await self._remove(fs, aside)
        return True

    async def commit_checked(
        self, attempt: str, final: str, replace: bool = False, user: str | None = None, checksum: bool = False
    ) -> tuple[bool, Integrity | None]:
        # Requests to the NameNode either way: nothing to gain from one step here.
        won = await self.commit(attempt, final, replace, user)
        return won, await self.integrity(final, checksum)

    async def _replace(self, fs: WebHdfs, attempt: str, final: str, aside: str) -> None:
        """Put ``attempt`` at ``final``, whatever is there: the current output is renamed
        aside, then the attempt renamed in (no RENAME overwrites a folder with contents), so
        for that instant ``final`` does not exist. The attempt goes in by the newer RENAME
        (``renameoptions=NONE``), which refuses an existing destination where the old one
        would move the attempt inside it; if another replacement took ``final`` between the
        two renames, its output is moved aside in turn (the last one to commit wins). The
        caller removes ``aside``; a commit cut off before that finds it on its retry."""
        for _ in range(REPLACE_ROUNDS):
            if await fs.status(final) is not None:
                await self._remove(fs, aside)  # a crashed earlier try's: the output it moved aside is obsolete too
                await fs.rename(final, aside)
            try:
                await fs._json("PUT", attempt, "RENAME", destination=final, renameoptions="NONE")
                return
            except HdfsError as exc:
                if exc.exception != "FileAlreadyExistsException":
                    raise
        raise HdfsError(409, "FileAlreadyExistsException", "kept being replaced by other commits", "RENAME", final)

    async def discard(self, path: str, user: str | None = None) -> None:
        await self._remove(self._fs(path, user), path)

    async def delete(self, path: str) -> None:
        await self._remove(self.hdfs, path)

    async def _remove(self, fs: WebHdfs, path: str) -> None:
        """A recursive DELETE by ``fs``'s user. HDFS wants rwx on every non-empty folder
        below the path: a sealed dataset, or an attempt another user's job wrote, is
        refused; then each folder is opened by its owner (``doas``) and the DELETE asked
        again."""
        try:
            await fs.delete(path, recursive=True)
            return
        except StorageRefused:
            pass
        try:
            await self._permissions(path, lambda owner: "755" if owner == fs.acting_user else "777", None)
        except FileNotFound:
            return  # gone meanwhile
        await fs.delete(path, recursive=True)

    async def _seal(self, final: str) -> None:
        """Managed datasets only: an unmanaged output is the user's, to do with as they like."""
        if not self.inside(final, [self.root]):
            return
        try:
            await self._permissions(final, lambda owner: "555", "444")
        except HdfsError as exc:
            log.warning("could not make %s read-only: %s", final, exc)

    async def _permissions(self, top: str, folders: Callable[[str], str], files: str | None) -> None:
        """SETPERMISSION on ``top`` and everything under it, each by its owner (only the
        owner of an inode may change its mode): a folder gets ``folders(owner)``, a file
        ``files`` (None: files unchanged). A folder is changed before it is listed;
        symbolic links are left alone."""
        st = await self.hdfs.status(top)
        stack = [(top, st)] if st is not None else []
        while stack:
            path, st = stack.pop()
            fs = self.hdfs.acting_as(st.get("owner"))
            if st["type"] == "DIRECTORY":
                await fs._json("PUT", path, "SETPERMISSION", permission=folders(st.get("owner") or ""))
                stack += [(posixpath.join(path, c["pathSuffix"]), c) for c in await fs.list(path)]
            elif st["type"] == "FILE" and files is not None:
                await fs._json("PUT", path, "SETPERMISSION", permission=files)

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

    async def input_print(
        self, path: str, checksum: bool, max_files: int, user: str | None = None
    ) -> dict[str, Any] | None:
        # As the owner: HDFS's permission checker decides what they may see of the path.
        fs = self.hdfs.acting_as(user)
        st = await fs.status(path)
        if st is None:
            return None
        if st["type"] != "DIRECTORY":
            if checksum:
                return {"kind": "file", "size": int(st["length"]), "checksum": _checksum_text(await fs.checksum(path))}
            return {"kind": "file", "size": int(st["length"]), "mtime_ms": int(st["modificationTime"])}
        files: list[tuple[str, dict]] = []
        stack = [path]
        while stack:
            d = stack.pop()
            for child in await fs.list(d):
                p = posixpath.join(d, child["pathSuffix"])
                if child["type"] == "DIRECTORY":
                    stack.append(p)
                    continue
                files.append((posixpath.relpath(p, path), child))
                if len(files) > max_files:
                    raise InputTooLarge(path, max_files)
        files.sort(key=lambda f: f[0])
        parts: list[str]
        if checksum:
            limit = asyncio.Semaphore(CHECKSUM_CONCURRENCY)

            async def one(rel: str) -> str:
                async with limit:
                    return _checksum_text(await fs.checksum(posixpath.join(path, rel)))

            parts = list(await asyncio.gather(*(one(rel) for rel, _ in files)))
        else:
            parts = [f"{int(c.get('length', 0))}\0{int(c['modificationTime'])}" for _, c in files]
        h = hashlib.sha256()
        for (rel, _), part in zip(files, parts, strict=True):
            h.update(f"{rel}\0{part}\0".encode())
        size = sum(int(c.get("length", 0)) for _, c in files)
        return {"kind": "folder", "size": size, "files": len(files), "digest": "sha256:" + h.hexdigest()}

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


def _checksum_text(ck: dict[str, Any]) -> str:
    """A GETFILECHECKSUM answer as one string: its algorithm and bytes."""
    return f"{ck['algorithm']}:{ck['bytes']}"
