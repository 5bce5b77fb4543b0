"""A scraper that claims work into a bounded queue, and a pool of workers that empty it
(thesis sections 3.3 and 3.6): the action manager's submitters and the dataset manager's
deletors (docs/architecture.md, "The scraper's queue").

The scraper is a ``forever`` loop: it runs on its ticker's timer, which catches whatever
the events that poke it missed, and claims at most the queue's free room. Claiming is
the caller's guarded move, so one item is never taken by two scrapers (nor twice by one,
unless its lease went stale meanwhile, when the later claim is the one that holds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Generic, TypeVar

from prometheus_client import Gauge

from shared.ticker import Ticker, forever

log = logging.getLogger(__name__)
T = TypeVar("T")


def _no_context(_: object) -> AbstractContextManager[object]:
    return nullcontext()


class WorkQueue(Generic[T]):
    """``claim(room)`` takes up to ``room`` items and says how many it found to take;
    ``work(item)`` does one. A scrape that found a full batch runs again at once.
    ``refill``: a full batch also leaves a backlog mark, and the workers poke the next
    scrape as soon as they have emptied half the queue, instead of waiting for the timer
    (500 READY actions were otherwise taken a queue at a time, one interval apart)."""

    def __init__(
        self,
        name: str,
        *,
        size: int,
        workers: int,
        ticker: Ticker,
        claim: Callable[[int], Awaitable[tuple[list[T], int]]],
        work: Callable[[T], Awaitable[None]],
        failed: str,
        key: Callable[[T], object],
        about: Callable[[T], AbstractContextManager[object]] = _no_context,
        refill: bool = False,
        depth: Gauge | None = None,
    ) -> None:
        self.name = name
        self.queue: asyncio.Queue[T] = asyncio.Queue(size)
        self.workers = workers
        self.ticker = ticker
        self.claim = claim
        self.work = work
        self.failed = failed  # the log line of a failed item: one %s, its key
        self.key = key
        self.about = about
        self.refill = refill
        self.depth = depth
        # The last scrape found more than the queue had room for.
        self.backlog = False

    def start(self) -> list[asyncio.Task]:
        """The scraper's task and the workers'."""
        tasks = [asyncio.create_task(forever(self.name, self.scrape, self.ticker))]
        tasks += [asyncio.create_task(self.worker()) for _ in range(self.workers)]
        return tasks

    def poke(self) -> None:
        """Scrape soon: an event says there may be work."""
        self.ticker.poke()

    def has_room(self) -> bool:
        """A worker will take what is put now, without waiting for the queue to drain."""
        return self.workers > 0 and self.queue.qsize() < self.queue.maxsize

    async def put(self, item: T) -> None:
        """Queue an item claimed outside the scrape (on its event)."""
        await self.queue.put(item)
        self._count()

    def _count(self) -> None:
        if self.depth is not None:
            self.depth.set(self.queue.qsize())

    async def scrape(self) -> bool:
        """Claim up to the queue's free room; True when a full batch was found (more may wait)."""
        room = self.queue.maxsize - self.queue.qsize()
        if room <= 0:
            self.backlog = True
            return False
        claimed, found = await self.claim(room)
        for item in claimed:
            await self.queue.put(item)
        self._count()
        # A full batch found counts even if other replicas took some of it first:
        # otherwise this one would wait for its timer while work is still there.
        self.backlog = found >= room
        return self.backlog

    async def worker(self) -> None:
        while True:
            item = await self.queue.get()
            self._count()
            if self.refill and self.backlog and self.queue.qsize() <= self.queue.maxsize // 2:
                self.backlog = False
                self.ticker.poke()
            try:
                with self.about(item):
                    await self.work(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                with self.about(item):
                    log.exception(self.failed, self.key(item))
            finally:
                self.queue.task_done()
