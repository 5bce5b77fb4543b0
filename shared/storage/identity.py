"""Which storage a process's settings name: its kind and managed root (and, on HDFS, the
filesystem). A catalogue describes the datasets of one storage (docs/planning.md,
"One catalogue, one storage"): the catalogue records it, every dataset records it at
commit, and the reconcile sweep judges only the datasets of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.config import Settings


@dataclass(frozen=True)
class StorageIdentity:
    kind: str  # local or webhdfs (PINGO_STORAGE)
    root: str  # the managed root in the storage's namespace
    # HDFS only: the filesystem (PINGO_NAME_NODE, its fs.defaultFS) and the address it is
    # reached at (PINGO_WEBHDFS_URL). Only the filesystem is part of the identity: one
    # NameNode may be reached at several addresses (another host name, an HA proxy).
    name_node: str | None = None
    webhdfs_url: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> StorageIdentity:
        if settings.on_hdfs:
            return cls("webhdfs", settings.managed_path(), settings.name_node.rstrip("/"), settings.webhdfs_url)
        return cls("local", settings.managed_path())

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> StorageIdentity:
        return cls(str(doc["kind"]), str(doc["root"]), doc.get("name_node"), doc.get("webhdfs_url"))

    def as_doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "root": self.root, "name_node": self.name_node, "webhdfs_url": self.webhdfs_url,
                "key": self.key}  # fmt: skip

    @property
    def key(self) -> str:
        """What a dataset records of where it lives, and what two identities are compared by."""
        if self.kind == "webhdfs":
            return f"webhdfs:{self.name_node}{self.root}"
        return f"{self.kind}:{self.root}"

    def describe(self) -> str:
        """The settings that name this storage, as a person would set them."""
        if self.kind == "webhdfs":
            return (
                f"PINGO_STORAGE=webhdfs on {self.name_node} (PINGO_NAME_NODE, reached at {self.webhdfs_url}), "
                f"managed root {self.root}"
            )
        return f"PINGO_STORAGE={self.kind}, managed root {self.root}"
