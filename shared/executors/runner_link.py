"""An executor's connection to this host's job runner, kept for many hand-overs
(docs/architecture.md, "The local job runner"): each hand-over is a request line, its
reply the line the runner writes in the same order. The lines asked for in one turn of
the event loop (the jobs of one claim) leave in one write, and the runner answers them in
one. A connection the runner closes (it exits when idle) fails what is still waiting for
a reply: the executor asks again on a new one, and a job handed over twice is the same
job."""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path


class RunnerLink(asyncio.Protocol):
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[asyncio.Future[bytes]] = deque()
        self.outbox: list[bytes] = []
        self.buffer = b""
        self.closed = False

    @classmethod
    async def open(cls, sock: Path) -> RunnerLink:
        """A new connection; FileNotFoundError or ConnectionRefusedError if no runner answers."""
        _, link = await asyncio.get_running_loop().create_unix_connection(cls, str(sock))
        return link

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        for line in lines:
            if self.waiting and not (reply := self.waiting.popleft()).done():
                reply.set_result(line)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        while self.waiting:
            if not (reply := self.waiting.popleft()).done():
                reply.set_exception(ConnectionResetError("the job runner closed the connection"))

    async def ask(self, line: bytes) -> bytes:
        """The runner's reply to one request ``line`` (ending with a newline)."""
        if self.closed:
            raise ConnectionResetError("the job runner closed the connection")
        reply = self.loop.create_future()
        self.waiting.append(reply)
        if not self.outbox:
            self.loop.call_soon(self._flush)
        self.outbox.append(line)
        return await reply

    def _flush(self) -> None:
        lines, self.outbox = self.outbox, []
        if self.transport is not None and not self.closed:
            self.transport.write(b"".join(lines))

    def close(self) -> None:
        """Stop using it (a reply that did not come: the order of the rest is not to be trusted)."""
        if self.transport is not None:
            self.transport.abort()  # calls connection_lost, which fails what still waits
