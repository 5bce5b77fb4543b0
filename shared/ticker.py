"""Wake on an event or on a timer, whichever comes first: events are hints, timers the floor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Ticker:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._event = asyncio.Event()

    def poke(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        try:
            async with asyncio.timeout(self.interval):
                await self._event.wait()
        except TimeoutError:
            pass
        self._event.clear()


async def forever(name: str, step: Callable[[], Awaitable[bool]], ticker: Ticker) -> None:
    """Run ``step`` again at once while it says there is more to do, else after the ticker."""
    while True:
        try:
            more = await step()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: step failed; retrying after the timer", name)
            more = False
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
