from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shared.errors import PingoError, Refused
from shared.path_limits import ATTEMPTS_DIR as ATTEMPTS_DIR  # the path limits count its length
from shared.sizes import human

# Rounds of "move the current output aside, rename ours in" before a replacement gives up
# (each lost round is another commit replacing the same output at that moment).
REPLACE_ROUNDS = 5
# An action folder is fingerprinted on every submission that names it: a folder larger
# than this (say, a whole home directory) is refused rather than hashed each time.
MAX_FINGERPRINT_FILES = 5_000
MAX_FINGERPRINT_BYTES = 4 * 1024**3


# What a storage raises on purpose (shared/errors.py), besides the built-in FileNotFoundError
# of ``commit`` and a failure to reach it, which is its client's own.
class StorageError(PingoError):
    """The base of the storage port's errors."""


class StorageRefused(StorageError, Refused):
    """The storage refused who acts (HDFS: a permission denied, a ``doas`` not allowed):
    final, asking again is refused the same way."""


class FolderTooLarge(StorageError, ValueError):
    """An action folder with more files or bytes than a fingerprint may cover."""

    def __init__(self, files: int, size: int) -> None:
        super().__init__(
            f"actionFolder holds {files if files <= MAX_FINGERPRINT_FILES else f'more than {MAX_FINGERPRINT_FILES}'} "
            f"files and {human(size)}; an action folder may hold at most {MAX_FINGERPRINT_FILES} files and "
            f"{human(MAX_FINGERPRINT_BYTES)} (point actionFolder at the folder of the action's own files)"
        )


def check_fingerprint_size(files: int, size: int) -> None:
    if files > MAX_FINGERPRINT_FILES or size > MAX_FINGERPRINT_BYTES:
        raise FolderTooLarge(files, size)


class InputTooLarge(StorageError, ValueError):
    """An input folder with more files than its fingerprint may cover (``PINGO_INPUT_MAX_FILES``)."""

    def __init__(self, path: str, limit: int) -> None:
        self.path, self.limit = path, limit
        super().__init__(
            f"input {path} holds more than {limit} files, more than an input's fingerprint may cover "
            f'(PINGO_INPUT_MAX_FILES); name a smaller folder, or mark the value {{"input": false}} '
            "to leave it out of the key"
        )


class InputsGone(StorageError):
    """Inputs of an attempt found missing just before its start (``Storage.preparer``)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        super().__init__(f"input {', '.join(paths)} gone")


@dataclass(frozen=True)
class Entry:
    name: str
    mtime: float


@dataclass(frozen=True)
class Integrity:
    """What a committed dataset is made of: its bytes, its files and, when asked for, a
    digest of every file's relative path and content (SHA-256 locally, over HDFS file
    checksums on WebHDFS). ``checksum`` None: not computed."""

    size: int
    files: int
    checksum: str | None = None


class Storage(Protocol):
    root: str
    # Where its datasets live, as each records it at commit (``StorageIdentity.key``).
    identity: str

    def normalize(self, root: str, path: str) -> str:
        """``path`` (absolute, or relative to ``root``) in canonical form: no ``..``, no links."""

    def inside(self, path: str, roots: list[str]) -> bool: ...

    async def is_dir(self, path: str) -> bool: ...

    async def usage(self) -> int:
        """Bytes under the managed root."""

    async def fingerprint(self, folder: str) -> str:
        """A digest of the files in an action folder: part of the lineage hash. Raises
        ``FolderTooLarge`` past ``MAX_FINGERPRINT_FILES`` or ``MAX_FINGERPRINT_BYTES``."""

    async def input_print(
        self, path: str, checksum: bool, max_files: int, user: str | None = None
    ) -> dict[str, Any] | None:
        """The fingerprint of an external input (docs/planning.md, "External inputs"):
        ``kind`` (file or folder), ``size``, and for a file its modification time
        (``mtime_ns`` locally, ``mtime_ms`` on HDFS) or, with ``checksum``, its content's
        ``checksum``; for a folder its ``files`` and a ``digest`` of every file's relative
        path and fingerprint. None if the path does not exist. Read as ``user`` where the
        storage knows users (HDFS: ``doas``). Raises ``InputTooLarge`` past ``max_files``."""

    async def close(self) -> None: ...

    def attempt_path(self, final: str, action_id: str, attempt: int) -> str:
        """The private path one attempt writes to; committed to ``final`` by rename."""

    async def prepare(self, attempt: str, user: str | None = None) -> None:
        """Make the attempt path's parent; clear a leftover attempt of the same name.

        ``user`` (here and in commit and discard): the owner of the action, as whom an
        unmanaged output is written where the storage knows users (HDFS: ``doas``); the
        managed root is the storage's own. A local storage runs everything as Pingo."""

    def preparer(self, attempt: str, inputs: list[str], user: str | None = None) -> Callable[[], None] | None:
        """``prepare`` and an ``exists`` of each of ``inputs``, as one plain blocking call,
        for a caller to run in a worker thread it runs anyway (the local executor's, which
        makes the job's folder: docs/architecture.md, "The local job runner"): it raises
        ``InputsGone`` with the inputs missing, before preparing anything. None where the
        storage's work is not a blocking local call (WebHDFS): ``prepare`` and ``exists``
        then."""

    async def commit(self, attempt: str, final: str, replace: bool = False, user: str | None = None) -> bool:
        """Move the attempt's output to ``final``. The first commit wins: a later one is
        discarded (False) unless ``replace``, whose output takes the place of what is there
        (moved aside, then removed; the last replacing commit wins). Repeating a done
        commit is True, and finishes a replacement cut off before it removed the old
        output. No output at either path raises FileNotFoundError: the action did not keep
        its contract. Raises ``StorageRefused`` if the storage refuses who commits."""

    async def commit_checked(
        self, attempt: str, final: str, replace: bool = False, user: str | None = None, checksum: bool = False
    ) -> tuple[bool, Integrity | None]:
        """``commit``, then ``integrity(final, checksum)``: what a success's end records
        of its output. One step where the storage allows it (locally, one worker thread:
        a chain's hop waits for one hand-off, not two; docs/performance.md, "A chain's
        hop"); raises as ``commit`` does, and then checks nothing."""

    async def discard(self, path: str, user: str | None = None) -> None: ...

    async def delete(self, path: str) -> None:
        """Recursive; a missing path is not an error."""

    async def size(self, path: str) -> int | None: ...

    async def integrity(self, path: str, checksum: bool) -> Integrity | None:
        """Size and file count of ``path`` (a dataset), with its content digest if
        ``checksum``; None if the path is missing (or parts of it vanish while it is
        read). A checksum reads every byte locally, and costs one request per file on
        WebHDFS."""

    async def exists(self, path: str) -> bool: ...

    async def list_root(self) -> list[Entry]:
        """Entries directly under the managed root, and under its attempts folder."""
