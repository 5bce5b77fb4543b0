"""The job runner's calls of notification URLs, made on its event loop (docs/architecture.md,
"The local job runner"): a plain HTTP/1.1 GET over a connection kept alive, a few per
server, so a job's end reaches the callback service without a worker thread's hand-off
and, after the first call, without connecting. The runner stays light: asyncio streams
and the standard library only (``ssl`` for an https URL).

A call's errors are swallowed and never logged, as ``local_job.notify``'s are: their text
could hold the URL, and so the callback secret. A lost notification only delays the
job's end until the poller's next look."""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from typing import TYPE_CHECKING

from shared.executors.local_job import notify_target

# Idle connections kept per server, and how long one call may take.
KEEP = 8
CALL_TIMEOUT = 10.0
TRIES = 3

if TYPE_CHECKING:
    import ssl

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class LoopNotifier:
    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}

    async def notify(self, url: str, job_id: str, state: str) -> None:
        """Best effort, three tries, as ``local_job.notify``."""
        if not url:
            return
        target = notify_target(url, job_id, state)
        for attempt in range(TRIES):
            with contextlib.suppress(Exception):
                if await asyncio.wait_for(self.call(target), CALL_TIMEOUT):
                    return
            await asyncio.sleep(0.5 * (attempt + 1))

    async def call(self, url: str) -> bool:
        """One GET; True if answered 200. Raises on a connection error."""
        parts = urllib.parse.urlsplit(url)
        secure = parts.scheme == "https"
        key = (parts.scheme, parts.hostname or "", parts.port or (443 if secure else 80))
        idle = self._idle.setdefault(key, [])
        conn = idle.pop() if idle else None
        kept = conn is not None
        if conn is None:
            conn = await asyncio.open_connection(key[1], key[2], ssl=_client_context() if secure else None)
        try:
            status, reusable = await _exchange(conn, parts)
        except Exception:
            conn[1].close()
            if kept:  # the server closed a kept connection meanwhile: once more, on a new one
                return await self.call(url)
            raise
        if reusable and len(idle) < KEEP:
            idle.append(conn)
        else:
            conn[1].close()
        return status == 200

    def close(self) -> None:
        for idle in self._idle.values():
            for _, writer in idle:
                writer.close()
        self._idle.clear()


def _client_context() -> ssl.SSLContext:
    """For an https callback URL: the default verification, as ``local_job.notify``'s."""
    import ssl

    return ssl.create_default_context()


async def _exchange(conn: Connection, parts: urllib.parse.SplitResult) -> tuple[int, bool]:
    """Send the GET and read its whole answer: its status, and whether the connection may
    carry another request."""
    reader, writer = conn
    target = f"{parts.path or '/'}{'?' + parts.query if parts.query else ''}"
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept-Encoding: identity\r\n\r\n".encode())
    await writer.drain()
    line = await reader.readline()
    version, _, rest = line.partition(b" ")
    if not rest:
        raise ConnectionResetError("no answer")
    status = int(rest[:3])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    reusable = version == b"HTTP/1.1" and "close" not in headers.get("connection", "")
    if "chunked" in headers.get("transfer-encoding", ""):
        while size := int((await reader.readline()).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # trailers
    elif "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    else:  # the body ends with the connection
        await reader.read()
        reusable = False
    return status, reusable
