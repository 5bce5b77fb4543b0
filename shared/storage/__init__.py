"""Where datasets live: the storage port and its adapters (local filesystem; WebHDFS later)."""

from shared.config import Settings
from shared.storage.base import Storage


def make_storage(settings: Settings) -> Storage:
    from shared.storage.local import LocalStorage

    return LocalStorage(settings.managed_dir)


__all__ = ["Storage", "make_storage"]
