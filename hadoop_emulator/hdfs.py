"""The emulated HDFS namespace: HDFS path ``/a/b`` is ``<root>/a/b`` on local disk.

Paths are normalized and never leave the root (``.``/``..``/``:`` components are invalid
HDFS names). ``hdfs://host:port/a/b`` URIs map the same way (the authority is ignored).
Owner, group, permission and replication live in an in-memory side table; a path nobody
set them for inherits owner and group from its nearest recorded ancestor.

Failures are :class:`HdfsError`, which carries the Java exception WebHDFS would report
and the HTTP status WebHDFS would answer (docs/hadoop-protocol.md, "Errors").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

DEFAULT_USER = "dr.who"
SUPERUSER = "hdfs"
SUPERGROUP = "supergroup"
REPLICATION = 3
BLOCK_SIZE = 128 * 1024 * 1024
BYTES_PER_CRC = 512

_JAVA_CLASSES = {
    "FileNotFoundException": "java.io.FileNotFoundException",
    "FileAlreadyExistsException": "org.apache.hadoop.fs.FileAlreadyExistsException",
    "ParentNotDirectoryException": "org.apache.hadoop.fs.ParentNotDirectoryException",
    "PathIsNotEmptyDirectoryException": "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
    "AccessControlException": "org.apache.hadoop.security.AccessControlException",
    "InvalidPathException": "org.apache.hadoop.fs.InvalidPathException",
    "IllegalArgumentException": "java.lang.IllegalArgumentException",
    "UnsupportedOperationException": "java.lang.UnsupportedOperationException",
    "IOException": "java.io.IOException",
    "EOFException": "java.io.EOFException",
    "StandbyException": "org.apache.hadoop.ipc.StandbyException",
    "SecurityException": "java.lang.SecurityException",
    "AuthorizationException": "org.apache.hadoop.security.authorize.AuthorizationException",
}
# IllegalArgument/UnsupportedOperation -> 400, FileNotFound -> 404, other IOExceptions -> 403.
_STATUS = {
    "FileNotFoundException": 404,
    "IllegalArgumentException": 400,
    "InvalidPathException": 400,
    "UnsupportedOperationException": 400,
}


class HdfsError(Exception):
    """A failure as WebHDFS reports it: ``{"RemoteException": {...}}`` with ``status``."""

    def __init__(self, exception: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.exception = exception
        self.java_class = _JAVA_CLASSES.get(exception, f"java.io.{exception}")
        self.message = message
        self.status = status if status is not None else _STATUS.get(exception, 403)

    def body(self) -> dict[str, Any]:
        return {
            "RemoteException": {
                "exception": self.exception,
                "javaClassName": self.java_class,
                "message": self.message,
            }
        }


@dataclass
class Meta:
    owner: str
    group: str = SUPERGROUP
    permission: str | None = None  # None: the type's default (644 files, 755 directories)
    replication: int = REPLICATION
    block_size: int = BLOCK_SIZE


def hdfs_path(path_or_uri: str) -> str:
    """The path part of an HDFS path or ``hdfs://authority/path`` URI, not yet normalized."""
    if "://" in path_or_uri:
        parts = urlsplit(path_or_uri)
        if parts.scheme not in ("hdfs", "webhdfs", "viewfs"):
            raise HdfsError("IllegalArgumentException", f"Wrong FS: {path_or_uri}, expected: hdfs://")
        return parts.path or "/"
    return path_or_uri


class Namespace:
    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._meta: dict[str, Meta] = {"/": Meta(owner=SUPERUSER)}

    # -- paths ------------------------------------------------------------------------
    def normalize(self, path_or_uri: str) -> str:
        """``/a//b/`` -> ``/a/b``; relative paths and ``.``/``..``/``:`` components are invalid."""
        path = hdfs_path(path_or_uri)
        if not path.startswith("/"):
            raise HdfsError("InvalidPathException", f"Invalid path name Path is not absolute: {path}")
        parts = [p for p in path.split("/") if p]
        for p in parts:
            if p in (".", "..") or ":" in p or "\0" in p:
                raise HdfsError("InvalidPathException", f"Invalid path name Invalid file name: {path}")
        return "/" + "/".join(parts)

    def local(self, path_or_uri: str) -> Path:
        """The local file of an HDFS path or URI (normalized, inside the root)."""
        norm = self.normalize(path_or_uri)
        local = self.root.joinpath(*norm.split("/")[1:]) if norm != "/" else self.root
        # Symlinks written by jobs must not lead out of the namespace.
        real = Path(os.path.realpath(local))
        if real != self.root and self.root not in real.parents:
            raise HdfsError("AccessControlException", f"Permission denied: {norm} leaves the namespace")
        return local

    # -- metadata ---------------------------------------------------------------------
    def meta(self, path: str) -> Meta:
        if path in self._meta:
            return self._meta[path]
        parent = path
        while parent != "/":
            parent = parent.rsplit("/", 1)[0] or "/"
            if parent in self._meta:
                m = self._meta[parent]
                return Meta(owner=m.owner, group=m.group)
        return Meta(owner=SUPERUSER)

    def _move_meta(self, src: str, dst: str) -> None:
        for key in [k for k in self._meta if k == src or k.startswith(src + "/")]:
            self._meta[dst + key[len(src) :]] = self._meta.pop(key)

    def _drop_meta(self, path: str) -> None:
        for key in [k for k in self._meta if k == path or k.startswith(path + "/")]:
            del self._meta[key]

    # -- reads ------------------------------------------------------------------------
    @staticmethod
    def _stat(local: Path) -> os.stat_result | None:
        try:
            return local.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def file_status(self, path: str, local: Path, st: os.stat_result, suffix: str) -> dict[str, Any]:
        is_dir = stat.S_ISDIR(st.st_mode)
        m = self.meta(path)
        children = 0
        if is_dir:
            try:
                children = sum(1 for _ in os.scandir(local))
            except OSError:
                children = 0
        return {
            "accessTime": 0 if is_dir else int(st.st_atime * 1000),
            "blockSize": 0 if is_dir else m.block_size,
            "childrenNum": children,
            "fileId": st.st_ino,
            "group": m.group,
            "length": 0 if is_dir else st.st_size,
            "modificationTime": int(st.st_mtime * 1000),
            "owner": m.owner,
            "pathSuffix": suffix,
            "permission": m.permission or ("755" if is_dir else "644"),
            "replication": 0 if is_dir else m.replication,
            "storagePolicy": 0,
            "type": "DIRECTORY" if is_dir else "FILE",
        }

    def status(self, path_or_uri: str) -> dict[str, Any]:
        path = self.normalize(path_or_uri)
        local = self.local(path)
        st = self._stat(local)
        if st is None:
            raise HdfsError("FileNotFoundException", f"File does not exist: {path}")
        return self.file_status(path, local, st, "")

    def exists(self, path_or_uri: str) -> bool:
        return self._stat(self.local(path_or_uri)) is not None

    def is_dir(self, path_or_uri: str) -> bool:
        return self.local(path_or_uri).is_dir()

    def is_file(self, path_or_uri: str) -> bool:
        return self.local(path_or_uri).is_file()

    def list(self, path_or_uri: str) -> list[dict[str, Any]]:
        path = self.normalize(path_or_uri)
        local = self.local(path)
        st = self._stat(local)
        if st is None:
            raise HdfsError("FileNotFoundException", f"File {path} does not exist.")
        if not stat.S_ISDIR(st.st_mode):
            return [self.file_status(path, local, st, "")]
        out = []
        for name in sorted(os.listdir(local)):
            child = local / name
            cst = self._stat(child)
            if cst is not None:
                out.append(self.file_status(f"{path.rstrip('/')}/{name}", child, cst, name))
        return out

    def content_summary(self, path_or_uri: str) -> dict[str, Any]:
        path = self.normalize(path_or_uri)
        local = self.local(path)
        st = self._stat(local)
        if st is None:
            raise HdfsError("FileNotFoundException", f"File does not exist: {path}")
        dirs = files = length = consumed = 0
        for sub, st_ in self._walk(path, local, st):
            if stat.S_ISDIR(st_.st_mode):
                dirs += 1
            else:
                files += 1
                length += st_.st_size
                consumed += st_.st_size * self.meta(sub).replication
        return {
            "directoryCount": dirs,
            "ecPolicy": "Replicated",
            "fileCount": files,
            "length": length,
            "quota": -1,
            "spaceConsumed": consumed,
            "spaceQuota": -1,
            "typeQuota": {},
        }

    def _walk(self, path: str, local: Path, st: os.stat_result) -> Iterator[tuple[str, os.stat_result]]:
        yield path, st
        if stat.S_ISDIR(st.st_mode):
            for name in sorted(os.listdir(local)):
                cst = self._stat(local / name)
                if cst is not None:
                    yield from self._walk(f"{path.rstrip('/')}/{name}", local / name, cst)

    def open_file(self, path_or_uri: str) -> tuple[str, Path, int]:
        """(normalized path, local file, length) of an existing file."""
        path = self.normalize(path_or_uri)
        local = self.local(path)
        st = self._stat(local)
        if st is None:
            raise HdfsError("FileNotFoundException", f"File does not exist: {path}")
        if stat.S_ISDIR(st.st_mode):
            raise HdfsError("FileNotFoundException", f"Path is not a file: {path}")
        return path, local, st.st_size

    def checksum(self, path_or_uri: str) -> dict[str, Any]:
        """A stable digest of the content in the shape of HDFS's MD5-of-MD5-of-CRC checksum:
        bytesPerCRC (4), crcPerBlock (8), then an MD5 of the content (16), then 4 zero bytes:
        Apache Hadoop 3.4's NameNode sends those 32 bytes in ``bytes`` while ``length`` says
        28 (docs/hadoop-protocol.md, "Emulator and real cluster"). The MD5 is of the bytes,
        not of their CRCs as HDFS's is: equal content, equal checksum, on either.

        As HDFS: crcPerBlock is 0 for a file of one block, and the CRCs in a full block for
        a longer one; an empty file has no block and gets HDFS's fixed answer (CRC32, 0 bytes
        per CRC, the MD5 of 32 zero bytes), whatever it was written with."""
        path, local, length = self.open_file(path_or_uri)
        if length == 0:
            return {
                "FileChecksum": {
                    "algorithm": "MD5-of-0MD5-of-0CRC32",
                    "bytes": f"{0:08x}{0:016x}{hashlib.md5(bytes(32)).hexdigest()}{0:08x}",
                    "length": 28,
                }
            }
        block_size = self.meta(path).block_size
        crc_per_block = -(-block_size // BYTES_PER_CRC) if length > block_size else 0
        digest = hashlib.md5()
        with open(local, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return {
            "FileChecksum": {
                "algorithm": f"MD5-of-{crc_per_block}MD5-of-{BYTES_PER_CRC}CRC32C",
                "bytes": f"{BYTES_PER_CRC:08x}{crc_per_block:016x}{digest.hexdigest()}{0:08x}",
                "length": 28,
            }
        }

    # -- writes -----------------------------------------------------------------------
    def _check_ancestors(self, path: str) -> str | None:
        """Raise if an ancestor is a file; return the deepest missing ancestor, if any."""
        parts = path.split("/")[1:-1]
        current = ""
        for p in parts:
            current += "/" + p
            local = self.local(current)
            st = self._stat(local)
            if st is None:
                return current
            if not stat.S_ISDIR(st.st_mode):
                raise HdfsError("ParentNotDirectoryException", f"{current} (is not a directory)")
        return None

    def mkdirs(self, path_or_uri: str, user: str, permission: str | None = None) -> bool:
        path = self.normalize(path_or_uri)
        local = self.local(path)
        st = self._stat(local)
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                return True
            raise HdfsError("FileAlreadyExistsException", f"Path is not a directory: {path}")
        self._check_ancestors(path)
        created = []
        current = ""
        for p in path.split("/")[1:]:
            current += "/" + p
            if not self.local(current).exists():
                created.append(current)
        local.mkdir(parents=True, exist_ok=True)
        for c in created:
            # A new inode's group is its parent's (HDFS follows the BSD rule).
            self._meta[c] = Meta(owner=user, group=self.meta(c.rsplit("/", 1)[0] or "/").group, permission=permission)
        return True

    def create(
        self,
        path_or_uri: str,
        user: str,
        *,
        overwrite: bool = False,
        permission: str | None = None,
        replication: int | None = None,
        block_size: int | None = None,
        create_parent: bool = True,
        client: str = "127.0.0.1",
    ) -> BinaryIO:
        """Open a new file for writing (the caller writes the bytes and closes it)."""
        path = self.normalize(path_or_uri)
        if path == "/":
            raise HdfsError("FileAlreadyExistsException", "/ already exists as a directory")
        local = self.local(path)
        st = self._stat(local)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise HdfsError("FileAlreadyExistsException", f"{path} already exists as a directory")
        if st is not None and not overwrite:
            raise HdfsError("FileAlreadyExistsException", f"{path} for client {client} already exists")
        missing = self._check_ancestors(path)
        if missing is not None:
            if not create_parent:
                raise HdfsError("FileNotFoundException", f"Parent directory doesn't exist: {path.rsplit('/', 1)[0]}")
            self.mkdirs(path.rsplit("/", 1)[0], user)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            fd = os.open(local, flags, 0o644)
        except FileExistsError:
            raise HdfsError("FileAlreadyExistsException", f"{path} for client {client} already exists") from None
        self._meta[path] = Meta(
            owner=user,
            group=self.meta(path.rsplit("/", 1)[0] or "/").group,
            permission=permission,
            replication=replication or REPLICATION,
            block_size=block_size or BLOCK_SIZE,
        )
        return os.fdopen(fd, "wb")

    def delete(self, path_or_uri: str, recursive: bool = False) -> bool:
        path = self.normalize(path_or_uri)
        if path == "/":
            return False  # the root is never deleted
        local = self.local(path)
        st = self._stat(local) if not local.is_symlink() else local.lstat()
        if st is None:
            return False
        if stat.S_ISDIR(st.st_mode):
            if any(os.scandir(local)) and not recursive:
                raise HdfsError("PathIsNotEmptyDirectoryException", f"`{path} is non empty': Directory is not empty")
            shutil.rmtree(local)
        else:
            local.unlink()
        self._drop_meta(path)
        return True

    def rename(self, src_or_uri: str, dst_raw: str) -> bool:
        """Old ``FileSystem.rename`` semantics (docs/hadoop-protocol.md, "RENAME"): failures are ``False``."""
        src = self.normalize(src_or_uri)
        try:
            dst = self.normalize(dst_raw)
        except HdfsError:
            raise HdfsError("IOException", f"Invalid name: {dst_raw}") from None
        src_local = self.local(src)
        if src == "/" or self._stat(src_local) is None:
            return False
        if src == dst:
            return True
        dst_local = self.local(dst)
        dst_st = self._stat(dst_local)
        if dst_st is not None:
            if not stat.S_ISDIR(dst_st.st_mode):
                return False
            dst = f"{dst.rstrip('/')}/{src.rsplit('/', 1)[1]}"
            dst_local = self.local(dst)
            if src == dst:
                return True
            if self._stat(dst_local) is not None:
                return False
        if dst.startswith(src + "/"):
            raise HdfsError("IOException", f"Rename destination {dst} is a directory or file under source {src}")
        parent = self._stat(dst_local.parent)
        if parent is None or not stat.S_ISDIR(parent.st_mode):
            return False
        os.rename(src_local, dst_local)
        self._move_meta(src, dst)
        return True

    def claim(self, path_or_uri: str, user: str, since: float) -> None:
        """Record ``user`` as the owner of what a job running as that user wrote directly to
        disk: ``path`` and everything below it changed at or after ``since`` that has no
        owner recorded yet (docs/emulator.md, "Permissions")."""
        try:
            path = self.normalize(path_or_uri)
            local = self.local(path)
        except HdfsError:
            return
        st = self._stat(local)
        if st is None or path == "/":
            return
        for sub, st_ in self._walk(path, local, st):
            if sub not in self._meta and st_.st_mtime >= since:
                self._meta[sub] = Meta(owner=user, group=self.meta(sub.rsplit("/", 1)[0] or "/").group)

    def set_permission(self, path_or_uri: str, permission: str | None) -> None:
        path = self.normalize(path_or_uri)
        self.status(path)
        m = self.meta(path)
        self._meta[path] = Meta(m.owner, m.group, permission, m.replication, m.block_size)

    def set_replication(self, path_or_uri: str, replication: int | None) -> bool:
        path = self.normalize(path_or_uri)
        if self.status(path)["type"] != "FILE":
            return False
        m = self.meta(path)
        self._meta[path] = Meta(m.owner, m.group, m.permission, replication or m.replication, m.block_size)
        return True

    def set_owner(self, path_or_uri: str, owner: str | None, group: str | None) -> None:
        path = self.normalize(path_or_uri)
        self.status(path)
        m = self.meta(path)
        self._meta[path] = Meta(owner or m.owner, group or m.group, m.permission, m.replication, m.block_size)
