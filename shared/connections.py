"""How many connections Pingo's HTTP servers (the gateway, the callback service) may hold at
once, and how long one may take to say what it wants (docs/operations.md, "Connections").

Each open connection holds a file descriptor. Unbounded, idle connections (a client that
connects and sends nothing, or sends its headers a byte at a time: slowloris) pile up until
the process reaches its open-file limit; then ``accept()`` fails (EMFILE), the server stops
answering anyone, and the store's sockets, the logs and the jobs' files cannot be opened
either. Two limits keep descriptors for the work:

- **Header timeout** (``PINGO_HEADER_TIMEOUT``): a connection that has not sent a whole
  request line and headers that long after it opened, or after its last answer, is closed.
  This is aiohttp's keep-alive timer, which it arms when a connection opens and which bytes
  that do not complete a request do not push back; a request being answered is not timed
  by it (a body has ``PINGO_BODY_TIMEOUT``, the gateway guard's).
- **Connection cap** (``PINGO_MAX_CONNECTIONS``; by default half the open-file limit), for
  the whole process (``pingo dev`` serves the gateway and the callback service from one): a
  connection beyond it is answered ``503`` with ``Retry-After`` and a problem document, what
  it sends is read and discarded for a moment (closing on unread input would reset the
  connection, and a reset can destroy the answer before the client reads it), and it is
  closed. At most ``slots`` such answers are under way at once; beyond them a connection is
  closed at once, unanswered, so that a flood cannot spend the descriptors kept for the work.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

from aiohttp import web

from shared.config import Settings
from shared.errors import CannotStart
from shared.logs import Throttle
from shared.problems import PROBLEM_JSON, Problem, render, title_of

log = logging.getLogger(__name__)
# One line per period however many connections are refused: a flood must not fill the disk.
log.addFilter(Throttle(period=30.0))

AUTO_MIN, AUTO_MAX = 8, 10_000  # the default cap: half the open-file limit, within these
SLOTS_MIN, SLOTS_MAX = 4, 64  # refusals under way at once: a quarter of the cap, within these
REFUSAL_LINGER = 1.0  # seconds a refused connection is read from before it is closed
RETRY_AFTER = 1  # seconds: a slot frees as soon as a request ends or an idle connection times out
UNMADE = 10.0  # seconds after which a protocol whose connection was never made is forgotten


def open_file_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 4 * AUTO_MAX if soft == resource.RLIM_INFINITY else soft


def slots_for(cap: int) -> int:
    return min(SLOTS_MAX, max(SLOTS_MIN, cap // 4))


def limits(settings: Settings) -> tuple[int, int]:
    """The connection cap and the number of refusals that may be under way at once. Refused
    when they would leave less than a quarter of the open-file limit to the store, the logs
    and the jobs."""
    files = open_file_limit()
    cap = settings.max_connections or min(AUTO_MAX, max(AUTO_MIN, files // 2))
    budget = files * 3 // 4
    if cap + slots_for(cap) > budget:
        given = f"PINGO_MAX_CONNECTIONS={cap}" if settings.max_connections else f"the default cap ({cap})"
        fits = [c for c in range(min(cap, budget), 0, -1) if c + slots_for(c) <= budget]
        advice = f"set PINGO_MAX_CONNECTIONS to at most {fits[0]}, or raise the limit" if fits else "raise the limit"
        raise CannotStart(
            f"{given} leaves too few of this process's {files} open files (ulimit -n) to the store, the logs "
            f"and the jobs: {advice}"
        )
    return cap, slots_for(cap)


def busy_answer(cap: int) -> bytes:
    """The whole HTTP answer to a connection over the cap: a 503 problem document."""
    body = render(
        Problem(
            title=title_of(503),
            status=503,
            detail=f"Pingo has {cap} connections open, its limit (PINGO_MAX_CONNECTIONS): try again in {RETRY_AFTER} s",
            retryAfter=RETRY_AFTER,
        )
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        f"Content-Type: {PROBLEM_JSON}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Retry-After: {RETRY_AFTER}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class Tally:
    """The connections of one kind: those open, and those accepted whose transport is not
    made yet. asyncio accepts up to a backlog's worth of connections before it makes any of
    their transports, so counting only made ones would let a burst overshoot the cap."""

    def __init__(self) -> None:
        self.open: set[asyncio.BaseProtocol] = set()
        self.opening: dict[asyncio.BaseProtocol, float] = {}

    def __len__(self) -> int:
        if self.opening:
            stale = time.monotonic() - UNMADE
            for p in [p for p, at in self.opening.items() if at < stale]:
                del self.opening[p]  # its transport failed before the connection was made
        return len(self.open) + len(self.opening)

    def accepted(self, p: asyncio.BaseProtocol) -> None:
        self.opening[p] = time.monotonic()

    def made(self, p: asyncio.BaseProtocol) -> None:
        self.opening.pop(p, None)
        self.open.add(p)

    def lost(self, p: asyncio.BaseProtocol) -> None:
        self.opening.pop(p, None)
        self.open.discard(p)


# For the whole process: the cap is on its file descriptors, whichever server holds them.
HANDLED = Tally()
REFUSALS = Tally()


class Refusal(asyncio.Protocol):
    """A connection over the cap: answered 503, read from for ``REFUSAL_LINGER``, closed."""

    def __init__(self, server: CappedServer, answer: bool) -> None:
        self.server = server
        self.answer = answer
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.server.refusals.made(self)
        if not self.answer:
            transport.abort()
            return
        transport.write(self.server.busy)
        self.timer = asyncio.get_running_loop().call_later(REFUSAL_LINGER, transport.close)

    def data_received(self, data: bytes) -> None:
        pass  # read and discarded: see the module's docstring

    def eof_received(self) -> bool:
        return False  # the client is done: close

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.refusals.lost(self)
        if self.timer is not None:
            self.timer.cancel()


class CappedServer(web.Server):
    """aiohttp's server, with at most ``cap`` connections of the process handled at once."""

    def __init__(self, handler: Any, *, cap: int, slots: int, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.cap = cap
        self.slots = slots
        self.busy = busy_answer(cap)
        self.handled = HANDLED
        self.refusals = REFUSALS

    def __call__(self) -> Any:  # the protocol of one accepted connection
        if len(self.handled) < self.cap:
            handler = super().__call__()
            self.handled.accepted(handler)
            return handler
        answer = len(self.refusals) < self.slots
        log.warning(
            "refused a connection: %d are open in this process, the limit (PINGO_MAX_CONNECTIONS); %s",
            self.cap,
            "answered 503" if answer else "closed unanswered, too many refusals under way",
        )
        refusal = Refusal(self, answer)
        self.refusals.accepted(refusal)
        return refusal

    def connection_made(self, handler: Any, transport: asyncio.Transport) -> None:
        self.handled.made(handler)
        super().connection_made(handler, transport)

    def connection_lost(self, handler: Any, exc: BaseException | None = None) -> None:
        self.handled.lost(handler)
        super().connection_lost(handler, exc)


class CappedRunner(web.AppRunner):
    """An application's runner with its connections capped and timed (the module's docstring)."""

    def __init__(self, app: web.Application, settings: Settings, **kwargs: Any) -> None:
        self.cap, self.slots = limits(settings)
        # aiohttp arms its keep-alive timer when a connection opens, and closes the
        # connection if no whole request has arrived when it fires: the header timeout.
        super().__init__(app, keepalive_timeout=settings.header_timeout, **kwargs)

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts the application up and freezes it
        return CappedServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            cap=self.cap,
            slots=self.slots,
            **self._kwargs,
        )
