"""The action manager (thesis section 3.3): a scraper claims READY actions into a bounded
queue that a pool of submitters empties; the READY event's claim; job retention. How an
attempt is claimed and started is ``shared.lifecycle.starting``; this service holds the
triggers that call it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

from shared import logs
from shared.events import Event, EventType
from shared.group_commit import GroupCommit
from shared.lifecycle.starting import ReadyEvent, Starter
from shared.metrics import QUEUE_DEPTH
from shared.runtime import Context
from shared.store.actions import ActionDoc
from shared.ticker import Ticker, cancel_all, forever
from shared.work_queue import WorkQueue

log = logging.getLogger(__name__)


class ActionManager:
    name = "action_manager"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.owner = f"{self.name}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        outcomes = ctx.outcomes(self.name)
        self.starter = Starter(
            ctx.store,
            ctx.storage,
            ctx.executor,
            outcomes.mover,
            outcomes,
            outcomes.replanner,
            self.settings,
            self.owner,
            ctx.callback_key,
        )
        self.work: WorkQueue[ActionDoc] = WorkQueue(
            "action scraper", size=self.settings.queue_size, workers=self.settings.submitters,
            ticker=Ticker(self.settings.scrape_interval), claim=self.starter.claim, work=self.starter.submit,
            failed="submitting %s failed unexpectedly", key=lambda a: a["_id"],
            about=lambda a: logs.about(a.get("workflow_id"), a["_id"]), refill=True, depth=QUEUE_DEPTH,
        )  # fmt: skip
        # READY events that arrive while others are being claimed are claimed together (a
        # submission readies hundreds at once; docs/performance.md, "Work in groups").
        self.claims: GroupCommit[ReadyEvent, ActionDoc | None] = GroupCommit(self.starter.claim_attempts)
        self.tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        self.tasks += self.work.start()
        if self.settings.job_retention > 0:
            # This service makes the job folders, so it prunes them (docs/operations.md, "Job retention").
            # A look reads every job folder kept: a quarter of the retention is soon enough (at most
            # hourly), not every settle interval.
            ticker = Ticker(max(self.settings.settle_interval, min(self.settings.job_retention / 4, 3600.0)))
            self.tasks.append(asyncio.create_task(forever("job retention", self.starter.prune_jobs, ticker)))
        # Subscribed last: the loops run on their timers even while the broker is away
        # (events only wake them sooner).
        await self.ctx.bus.subscribe(
            f"{self.settings.exchange}.{self.name}", [EventType.ACTION_READY.value], self.on_event
        )

    async def stop(self) -> None:
        await cancel_all(self.tasks)

    async def on_event(self, event: Event) -> None:
        """An action turned READY: its attempt is claimed at once, READY -> SUBMITTED in one
        guarded write, without the scrape's query or a PROCESSING lease (a chain's hop pays
        one write here, issue 10); with those of the events that arrived while others were
        being claimed (``self.claims``). An event that finds the submitters' queue full
        waits for room, unacknowledged, rather than leave its action to the scrape, whose
        claim costs four commands where a group's costs a fraction of one (docs/performance.md,
        "Events per action"). Whatever this misses (an event lost, one about an earlier
        attempt, more waiting than the queue holds) the scrape takes."""
        action_id = event.subject.action_id
        attempt, output_path = event.payload.get("attempt"), event.payload.get("output_path")
        if (
            event.type == EventType.ACTION_READY and action_id and isinstance(attempt, int) and output_path
            and self.work.may_wait()
        ):  # fmt: skip
            async with self.work.room() as put:
                try:
                    reserve = event.payload.get("reserve_bytes")
                    taken = await self.claims(
                        (action_id, attempt, str(output_path), reserve if isinstance(reserve, int) else None)
                    )
                except Exception as exc:  # the store away: the scrape's timer retries
                    log.warning("claiming %s on its READY event failed: %s", action_id, exc)
                    taken = None
                if taken is not None:
                    put(taken)
                    return
        self.work.poke()
