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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import Generic, TypeVar

from prometheus_client import Gauge

from shared.ticker import Ticker, forever

log = logging.getLogger(__name__)
T = TypeVar("T")


def _no_context(_: object) -> AbstractContextManager[object]:
    return nullcontext()


# How many callers may wait for room per place in the queue. An event that waits keeps a
# claim of one guarded write, in a group; one turned away leaves its action to the scrape
# (four commands). Under `pingo dev` a submission of 500 delivers its 500 READY events at
# once: with only as many waiting as the queue holds (64), 372 of them went to the scrape
# (docs/performance.md, "A READY event waits for room"). A waiting event is a small task.
WAITING_PER_ROOM = 16


class WorkQueue(Generic[T]):
    """``claim(room)`` takes up to ``room`` items and says how many it found to take;
    ``work(item)`` does one. A scrape that found a full batch runs again at once.
    ``refill``: a full batch also leaves a backlog mark, and the workers poke the next
    scrape as soon as they have emptied half the queue, instead of waiting for the timer
    (500 READY actions were otherwise taken a queue at a time, one interval apart).

    Room in the queue is counted by ``free``: each queued item holds one unit, and so does
    an item being claimed on its event (``room``), so a claim made there is queued at once
    and the scrape never claims more than fits beside it."""

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
        # The queue's free room (see the class's docstring), and how many callers wait for some.
        self.free = asyncio.Semaphore(size)
        self.waiting = 0

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
        return self.workers > 0 and not self.free.locked()

    def may_wait(self) -> bool:
        """A worker takes what is queued, and few enough callers wait for room already
        (``room``): at most ``WAITING_PER_ROOM`` times what the queue holds, so waiting
        stays bounded in memory (an in-process bus delivers a submission's thousands of
        events at once; RabbitMQ's prefetch holds far fewer)."""
        return self.workers > 0 and self.waiting < WAITING_PER_ROOM * self.queue.maxsize

    @asynccontextmanager
    async def room(self) -> AsyncIterator[Callable[[T], None]]:
        """Room for one item claimed outside the scrape (on its event), waited for until a
        worker takes an item if there is none, and kept while the item is claimed: what
        comes back queues it (at once: the room is kept); not used, the room is given back.
        An event that waits here rather than leaving its action to the scrape keeps the
        claim of one guarded write, in groups (docs/performance.md, "Events per action")."""
        self.waiting += 1
        try:
            await self.free.acquire()
        finally:
            self.waiting -= 1
        queued = False

        def put(item: T) -> None:
            nonlocal queued
            queued = True
            self.queue.put_nowait(item)
            self._count()

        try:
            yield put
        finally:
            if not queued:
                self.free.release()

    async def put(self, item: T) -> None:
        """Queue an item claimed outside the scrape (on its event)."""
        async with self.room() as put:
            put(item)

    def _count(self) -> None:
        if self.depth is not None:
            self.depth.set(self.queue.qsize())

    async def scrape(self) -> bool:
        """Claim up to the queue's free room; True when a full batch was found (more may wait)."""
        room = 0
        while not self.free.locked():  # kept while claiming: an event's claim waits meanwhile
            await self.free.acquire()  # at once: it is not locked
            room += 1
        if room <= 0:
            self.backlog = True
            return False
        claimed: list[T] = []
        try:
            claimed, found = await self.claim(room)
            for item in claimed:
                self.queue.put_nowait(item)
        finally:
            for _ in range(room - len(claimed)):
                self.free.release()
        self._count()
        # A full batch found counts even if other replicas took some of it first:
        # otherwise this one would wait for its timer while work is still there.
        self.backlog = found >= room
        return self.backlog

    async def worker(self) -> None:
        while True:
            item = await self.queue.get()
            self.free.release()
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
