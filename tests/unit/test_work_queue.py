"""The scraper -> queue -> workers loop of the action and dataset managers
(shared/work_queue.py), over a plain list of work: the managers' own claims are
exercised against the real store by the system tests."""

from __future__ import annotations

import asyncio

from shared.ticker import Ticker, cancel_all
from shared.work_queue import WorkQueue

# Long enough that a test finishing means something other than the timer did it.
NEVER = 3600.0


class Backlog:
    """Work items waiting to be claimed, and those done."""

    def __init__(self, items: list[int]) -> None:
        self.waiting = list(items)
        self.done: list[int] = []
        self.largest_claim = 0
        self.finished = asyncio.Event()
        self.expected = len(items)

    async def claim(self, room: int) -> tuple[list[int], int]:
        taken, self.waiting = self.waiting[:room], self.waiting[room:]
        self.largest_claim = max(self.largest_claim, len(taken))
        return taken, len(taken)

    async def work(self, item: int) -> None:
        await asyncio.sleep(0.001)
        if item < 0:
            raise ValueError(f"cannot do {item}")
        self.done.append(item)
        if len(self.done) == self.expected:
            self.finished.set()


def work_queue(backlog: Backlog, *, interval: float, refill: bool, size: int = 4) -> WorkQueue[int]:
    return WorkQueue(
        "test scraper", size=size, workers=2, ticker=Ticker(interval), claim=backlog.claim, work=backlog.work,
        failed="doing %s failed", key=lambda i: i, refill=refill,
    )  # fmt: skip


async def test_more_work_than_the_queue_holds_is_all_done_without_waiting_for_the_timer() -> None:
    backlog = Backlog(list(range(50)))
    work = work_queue(backlog, interval=NEVER, refill=True)
    tasks = work.start()
    try:
        await asyncio.wait_for(backlog.finished.wait(), 30)
    finally:
        await cancel_all(tasks)
    assert sorted(backlog.done) == list(range(50))
    assert backlog.largest_claim <= 4, "a scrape claims at most the queue's room"


async def test_the_timer_finds_work_no_event_announced() -> None:
    backlog = Backlog([])
    work = work_queue(backlog, interval=0.05, refill=False)
    tasks = work.start()
    try:
        await asyncio.sleep(0.1)
        backlog.waiting, backlog.expected = [1, 2, 3], 3
        await asyncio.wait_for(backlog.finished.wait(), 30)
    finally:
        await cancel_all(tasks)
    assert sorted(backlog.done) == [1, 2, 3]


async def test_a_poke_wakes_the_scraper_and_a_failing_item_stops_no_worker() -> None:
    backlog = Backlog([])
    work = work_queue(backlog, interval=NEVER, refill=False)
    tasks = work.start()
    try:
        await asyncio.sleep(0.05)
        backlog.waiting, backlog.expected = [-1, 1, -2, 2], 2
        work.poke()
        await asyncio.wait_for(backlog.finished.wait(), 30)
    finally:
        await cancel_all(tasks)
    assert sorted(backlog.done) == [1, 2]


async def test_an_item_claimed_on_its_event_is_queued_only_while_a_worker_can_take_it() -> None:
    backlog = Backlog([])
    idle = WorkQueue(
        "idle", size=2, workers=0, ticker=Ticker(NEVER), claim=backlog.claim, work=backlog.work,
        failed="doing %s failed", key=lambda i: i,
    )  # fmt: skip
    assert not idle.has_room(), "with no worker, the scrape (and its stale leases) takes what events name"
    work = work_queue(backlog, interval=NEVER, refill=False, size=1)
    assert work.has_room()
    await work.put(7)
    assert not work.has_room()


async def test_an_event_finding_the_queue_full_waits_for_room_and_its_item_is_queued_at_once() -> None:
    backlog = Backlog([])
    gate = asyncio.Event()

    async def slow(item: int) -> None:
        await gate.wait()
        backlog.done.append(item)

    work = WorkQueue(
        "full", size=1, workers=1, ticker=Ticker(NEVER), claim=backlog.claim, work=slow,
        failed="doing %s failed", key=lambda i: i,
    )  # fmt: skip
    tasks = work.start()
    try:
        await work.put(1)  # taken by the one worker, which holds it until the gate opens
        await work.put(2)  # fills the queue
        assert not work.has_room() and work.may_wait()

        async def on_event() -> None:
            async with work.room() as put:
                put(3)

        waiting = asyncio.create_task(on_event())
        await asyncio.sleep(0.05)
        assert not waiting.done(), "no room yet: the event waits, its action not left to the scrape"
        backlog.waiting = [9]
        assert not await work.scrape(), "the scrape claims nothing while the queue is full"
        assert backlog.waiting == [9]
        gate.set()
        await asyncio.wait_for(waiting, 30)
        await asyncio.wait_for(work.queue.join(), 30)
    finally:
        await cancel_all(tasks)
    assert backlog.done == [1, 2, 3]


async def test_room_kept_for_a_claim_that_took_nothing_is_given_back_to_the_scrape() -> None:
    backlog = Backlog([])
    work = work_queue(backlog, interval=NEVER, refill=False, size=2)
    async with work.room():
        backlog.waiting = [5, 6, 7]
        await work.scrape()
        assert backlog.largest_claim == 1, "one unit of room is kept for the event's claim: one item fits beside it"
        assert not work.has_room()
    assert backlog.waiting == [6, 7]
    assert work.has_room(), "the room the event did not use is the queue's again"
    assert work.queue.qsize() == 1
