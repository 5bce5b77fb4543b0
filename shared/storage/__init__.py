"""Where datasets live: the storage port and its adapters (local filesystem; WebHDFS later)."""

from shared.config import Settings
from shared.storage.base import Storage


def make_storage(settings: Settings) -> Storage:
    if settings.storage == "webhdfs":
        from shared.hadoop.webhdfs import WebHdfs
        from shared.storage.webhdfs import WebHdfsStorage

        return WebHdfsStorage(WebHdfs(settings.webhdfs_url, settings.hdfs_user), settings.managed_path())
    from shared.storage.local import LocalStorage

    return LocalStorage(settings.managed_dir)


__all__ = ["Storage", "make_storage"]
