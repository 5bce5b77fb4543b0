"""A WebHDFS client (the operations Pingo uses; see docs/hadoop-protocol.md, "WebHDFS").

Errors come back as ``RemoteException`` JSON bodies; they are raised as ``HdfsError``
with the Java exception's name and message, so a caller (and a user) sees what HDFS said.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import quote

from aiohttp_retry import RetryClient

from shared.errors import PingoError, Refused
from shared.hadoop.http import retrying_client
from shared.storage.base import StorageRefused

# What HDFS answers when the acting user may not do something (permission bits, a refused
# doas): asking again changes nothing.
REFUSALS = frozenset({"AccessControlException", "SecurityException", "AuthorizationException"})


class HdfsError(PingoError):
    def __init__(self, status: int, exception: str, message: str, op: str, path: str) -> None:
        self.status, self.exception, self.message = status, exception, message
        super().__init__(f"WebHDFS {op} {path}: HTTP {status} {exception}: {message}")

    @staticmethod
    def of(status: int, exception: str, message: str, op: str, path: str) -> HdfsError:
        """The error of an answer: 404 is ``FileNotFound``, a permission HDFS denies
        ``HdfsRefused`` (a standby NameNode's 403 is not one)."""
        refused = status in (401, 403) and exception in REFUSALS
        cls = FileNotFound if status == 404 else HdfsRefused if refused else HdfsError
        return cls(status, exception, message, op, path)

    @property
    def refusal(self) -> bool:
        return isinstance(self, Refused)


class FileNotFound(HdfsError):
    pass


class HdfsRefused(HdfsError, StorageRefused):
    """Final: a permission HDFS denies."""


class WebHdfs:
    """Pingo's identity on HDFS (``user.name``); :meth:`acting_as` gives the same client
    acting for another user through ``doas`` (docs/users.md, "On Hadoop")."""

    def __init__(self, base_url: str, user: str, client: RetryClient | None = None, doas: str | None = None) -> None:
        self.base = base_url.rstrip("/")
        self.user = user
        self.doas = doas
        self.client = client or retrying_client()
        self._for: dict[str, WebHdfs] = {}

    def acting_as(self, user: str | None) -> WebHdfs:
        """This client acting for ``user`` (itself for None or its own user); it shares the
        connection pool, and only the client it came from is closed."""
        if user is None or user == (self.doas or self.user):
            return self
        if user == self.user:
            return WebHdfs(self.base, self.user, self.client)
        if user not in self._for:
            self._for[user] = WebHdfs(self.base, self.user, self.client, doas=user)
        return self._for[user]

    @property
    def acting_user(self) -> str:
        return self.doas or self.user

    async def close(self) -> None:
        await self.client.close()

    def url(self, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"HDFS paths are absolute: {path!r}")
        return f"{self.base}/webhdfs/v1{quote(posixpath.normpath(path))}"

    def params(self, op: str, **extra: Any) -> dict[str, str]:
        out = {"op": op, "user.name": self.user}
        if self.doas:
            out["doas"] = self.doas
        out.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in extra.items()})
        return out

    async def _json(self, method: str, path: str, op: str, **params: Any) -> Any:
        headers = {"X-XSRF-HEADER": "pingo"}
        async with self.client.request(method, self.url(path), params=self.params(op, **params), headers=headers,
                                       allow_redirects=op in ("OPEN", "GETFILECHECKSUM")) as resp:  # fmt: skip
            if resp.status >= 400:
                await self._raise(resp, op, path)
            if op == "OPEN":
                return await resp.read()
            return await resp.json(content_type=None)

    @staticmethod
    async def _raise(resp, op: str, path: str) -> None:
        try:
            body = (await resp.json(content_type=None))["RemoteException"]
            exception, message = body.get("exception", "?"), body.get("message", "")
        except (ValueError, KeyError, TypeError):
            exception, message = resp.reason or "HTTP error", (await resp.text())[:300]
        raise HdfsError.of(resp.status, exception, message, op, path)

    async def mkdirs(self, path: str, permission: str = "755") -> bool:
        return (await self._json("PUT", path, "MKDIRS", permission=permission))["boolean"]

    async def create(self, path: str, data: bytes, overwrite: bool = False) -> None:
        """The two-step CREATE: the NameNode answers 307 with the DataNode URL, which takes the bytes."""
        headers = {"X-XSRF-HEADER": "pingo"}
        async with self.client.request("PUT", self.url(path), params=self.params("CREATE", overwrite=overwrite),
                                       headers=headers, allow_redirects=False) as resp:  # fmt: skip
            if resp.status >= 400:
                await self._raise(resp, "CREATE", path)
            if resp.status != 307 or "Location" not in resp.headers:
                raise HdfsError(resp.status, "Protocol", "CREATE did not redirect to a DataNode", "CREATE", path)
            location = resp.headers["Location"]
        upload = {**headers, "Content-Type": "application/octet-stream"}
        async with self.client.request("PUT", location, data=data, allow_redirects=False, headers=upload) as resp:
            if resp.status != 201:
                await self._raise(resp, "CREATE", path)

    async def open(self, path: str) -> bytes:
        return await self._json("GET", path, "OPEN")

    async def delete(self, path: str, recursive: bool = False) -> bool:
        return (await self._json("DELETE", path, "DELETE", recursive=recursive))["boolean"]

    async def rename(self, src: str, dst: str) -> bool:
        """Old rename semantics: False (not an error) for a missing source or parent, or an
        existing file; an existing directory receives the source *inside* it."""
        return (await self._json("PUT", src, "RENAME", destination=posixpath.normpath(dst)))["boolean"]

    async def status(self, path: str) -> dict[str, Any] | None:
        try:
            return (await self._json("GET", path, "GETFILESTATUS"))["FileStatus"]
        except FileNotFound:
            return None

    async def list(self, path: str) -> list[dict[str, Any]]:
        return (await self._json("GET", path, "LISTSTATUS"))["FileStatuses"]["FileStatus"]

    async def content_summary(self, path: str) -> dict[str, Any]:
        return (await self._json("GET", path, "GETCONTENTSUMMARY"))["ContentSummary"]

    async def checksum(self, path: str) -> dict[str, Any]:
        return (await self._json("GET", path, "GETFILECHECKSUM"))["FileChecksum"]
