"""Names that stand in a path for ids that may hold any character (job folders, attempt
paths, Oozie application paths): a readable prefix and a digest of the whole id, so two
ids differing only in characters a path cannot hold ("a b", "a_b") never share a path."""

from __future__ import annotations

import hashlib

READABLE = 48


def path_name(name: str) -> str:
    readable = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "_" for c in name[:READABLE])
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    # No leading dot: the name of a hidden file is easily overlooked, and ".." is no name.
    return f"{readable.lstrip('.')}-{digest}"


def aside_name(final_name: str, attempt_name: str) -> str:
    """Where a replacement moves the output it replaces, next to it, before removing it:
    named from the attempt, so that a commit retried after a crash finds (and removes) what
    it had moved aside, and two attempts replacing one output at once never collide."""
    digest = hashlib.sha256(attempt_name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f".{final_name[:READABLE]}.replaced.{digest}"
