"""Where datasets live: the storage port and its adapters (local filesystem; WebHDFS later)."""

from shared.config import Settings
from shared.storage.base import Storage
from shared.storage.identity import StorageIdentity


def make_storage(settings: Settings) -> Storage:
    identity = StorageIdentity.of(settings).key
    if settings.storage == "webhdfs":
        from shared.hadoop.webhdfs import WebHdfs
        from shared.storage.webhdfs import WebHdfsStorage

        return WebHdfsStorage(WebHdfs(settings.webhdfs_url, settings.hdfs_user), settings.managed_path(), identity)
    from shared.storage.local import LocalStorage

    return LocalStorage(settings.managed_dir, identity)


__all__ = ["Storage", "make_storage"]
