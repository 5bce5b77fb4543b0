"""Work on a timer. A service's loop wakes on an event or on a timer, whichever comes
first: events are hints, timers the floor (``Ticker``, ``forever``). A lease is kept alive
on a timer while a long step runs (``Heartbeat``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from pymongo.errors import ConnectionFailure

log = logging.getLogger(__name__)


# How close together the events that wake a summary step (one whose work does not grow
# with the events: a usage total, a scan for marked datasets) share one run of it.
SUMMARY_COALESCE = 0.25


class Ticker:
    """``coalesce``: pokes that come sooner than this after the last wake share one wake,
    that many seconds after it: for a step whose work does not grow with the events that
    poke it (a usage total, a scan for marked datasets), so a burst of events costs a few
    runs, not one each (docs/architecture.md, "Query forms")."""

    def __init__(self, interval: float, coalesce: float = 0.0) -> None:
        self.interval = interval
        self.coalesce = coalesce
        self._event = asyncio.Event()
        self._woke = 0.0

    def poke(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.interval):
                await self._event.wait()
        except TimeoutError:
            pass
        else:
            early = self._woke + self.coalesce - loop.time()
            if early > 0:
                await asyncio.sleep(early)
        self._event.clear()
        self._woke = loop.time()


# Failures that mean the store (or another server) is unreachable for now, not a bug:
# logged as one line, without a traceback.
OUTAGE: tuple[type[BaseException], ...] = (ConnectionFailure, ConnectionError, TimeoutError)


async def forever(name: str, step: Callable[[], Awaitable[bool]], ticker: Ticker) -> None:
    """Run ``step`` again at once while it says there is more to do, else after the ticker.

    A failing step never ends the loop: it is retried after the ticker. The first failure
    of a kind is logged with its traceback (one line if it is an outage), repeats of the
    same failure as one line per tick, and the recovery once.
    """
    failures = 0
    last = ""
    while True:
        try:
            more = await step()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failures += 1
            kind = f"{type(exc).__name__}: {str(exc)[:300]}"
            if isinstance(exc, OUTAGE) or kind == last:
                log.warning("%s: step failed (%s); retrying after the timer [%d in a row]", name, kind, failures)
            else:
                log.exception("%s: step failed; retrying after the timer", name)
            last = kind
            more = False
        else:
            if failures:
                log.warning("%s: working again after %d failed step(s)", name, failures)
                failures, last = 0, ""
        if not more:
            await ticker.wait()


async def cancel_all(tasks: list[asyncio.Task]) -> None:
    """Cancel and wait until every task has really ended.

    On Python 3.11 ``asyncio.wait_for`` (used by PyMongo and by ``Ticker.wait``) can swallow
    a cancel that arrives as its inner call completes (CPython gh-86296), so one cancel is
    not enough: cancel again until they are done.
    """
    pending = {t for t in tasks if not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=1.0)
    tasks.clear()


class Heartbeat:
    """``async with Heartbeat(renew, every, what):`` renews a lease every ``every`` seconds
    until the block ends, or until ``renew`` answers False (the lease was taken away: the
    block's own guarded writes find that out). A sweep takes the step over only once its
    holder stopped renewing (it died). The planner (``shared.lifecycle.submitting``) and a
    kill's applier (``shared.lifecycle.ending``) hold one (docs/state-machines.md)."""

    def __init__(self, renew: Callable[[], Awaitable[bool]], every: float, what: str) -> None:
        self._renew, self.every, self.what = renew, every, what
        self.task: asyncio.Task | None = None

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                if not await self._renew():
                    return
            except Exception:
                log.warning("could not renew the lease of %s; retrying", self.what, exc_info=True)

    async def __aenter__(self) -> Heartbeat:
        self.task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.task is not None:
            await cancel_all([self.task])
