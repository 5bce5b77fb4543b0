"""Workflow and action notifications (docs/hadoop-protocol.md, "Notifications"), with
Oozie's delivery rule: an HTTP GET with no body, delivered only on status 200; otherwise
retried up to 3 times, each retry after ``notification_retry_delay`` seconds (real: 60),
then given up. The queue is in memory and independent per notification (order is not
guaranteed). Faults (drop, duplicate, delay, reorder, lose the queue) apply as
notifications are queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from hadoop_emulator.faults import Faults

log = logging.getLogger("hadoop_emulator.notifications")

MAX_RETRIES = 3


def job_url(template: str, job_id: str, status: str, parent_id: str | None) -> str:
    """Tokens are replaced as plain text, without URL encoding."""
    return template.replace("$jobId", job_id).replace("$status", status).replace("$parentId", parent_id or "")


def action_url(template: str, job_id: str, node_name: str, status: str) -> str:
    return template.replace("$jobId", job_id).replace("$nodeName", node_name).replace("$status", status)


@dataclass
class Notification:
    url: str
    job_id: str
    kind: str  # "job" | "action"
    status: str  # the $status value
    terminal: bool = False
    copy: int = 0  # 0: the original, n: the n-th duplicate
    attempts: int = 0
    outcome: str = "pending"
    codes: list[Any] = field(default_factory=list)
    queued_at: float = field(default_factory=time.time)

    def record(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "jobId": self.job_id,
            "kind": self.kind,
            "status": self.status,
            "copy": self.copy,
            "attempts": self.attempts,
            "outcome": self.outcome,
            "responses": self.codes,
            "queuedAt": self.queued_at,
        }


class Notifier:
    def __init__(self, faults: Callable[[], Faults]) -> None:
        self._faults = faults
        self._tasks: set[asyncio.Task] = set()
        self._held: list[Notification] = []
        self._hold_timer: asyncio.Task | None = None
        self._session: aiohttp.ClientSession | None = None
        self.history: deque[Notification] = deque(maxlen=1000)
        self.stats = {
            "queued": 0,  # notifications the engine raised (before faults)
            "sent": 0,  # HTTP attempts made
            "delivered": 0,  # attempts answered 200
            "failedAttempts": 0,  # attempts answered otherwise, or failing
            "retried": 0,  # retries scheduled
            "gaveUp": 0,  # dropped after 1 + MAX_RETRIES attempts
            "dropped": 0,  # lost to drop_notifications / drop_next_notifications
            "duplicated": 0,  # extra copies made by duplicate_notifications
            "lost": 0,  # discarded by lose_notification_queue
        }

    @property
    def faults(self) -> Faults:
        return self._faults()

    # -- queueing ---------------------------------------------------------------------
    def notify_job(self, template: str | None, job_id: str, status: str, parent_id: str | None) -> None:
        if template:
            terminal = status in ("SUCCEEDED", "KILLED", "FAILED")
            self._queue(Notification(job_url(template, job_id, status, parent_id), job_id, "job", status, terminal))

    def notify_action(self, template: str | None, job_id: str, node_name: str, status: str) -> None:
        if template:
            self._queue(Notification(action_url(template, job_id, node_name, status), job_id, "action", status))

    def _queue(self, n: Notification) -> None:
        faults = self.faults
        self.stats["queued"] += 1
        self.history.append(n)
        if faults.drop_next_notifications > 0:
            faults.drop_next_notifications -= 1
            self._drop(n)
            return
        if faults.drop_notifications > 0 and random.random() < faults.drop_notifications:
            self._drop(n)
            return
        copies = [n]
        for i in range(faults.duplicate_notifications):
            dup = Notification(n.url, n.job_id, n.kind, n.status, n.terminal, copy=i + 1)
            self.history.append(dup)
            copies.append(dup)
            self.stats["duplicated"] += 1
        if faults.reorder_notifications:
            self._held.extend(copies)
            if n.terminal:
                self.release_held()
            elif self._hold_timer is None:
                self._hold_timer = self._spawn(self._release_later(faults.reorder_window))
            return
        for c in copies:
            self._spawn(self._deliver([c], faults.notification_delay))

    def _drop(self, n: Notification) -> None:
        n.outcome = "dropped"
        self.stats["dropped"] += 1
        log.info("notification dropped (fault): %s", n.url)

    def release_held(self) -> None:
        """Deliver the held batch, newest first."""
        if self._hold_timer is not None and self._hold_timer is not asyncio.current_task():
            self._hold_timer.cancel()
        self._hold_timer = None
        batch, self._held = list(reversed(self._held)), []
        if batch:
            self._spawn(self._deliver(batch, self.faults.notification_delay))

    async def _release_later(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self.release_held()

    def faults_changed(self) -> None:
        if not self.faults.reorder_notifications and self._held:
            self.release_held()

    def lose_queue(self) -> int:
        """Discard everything pending, delayed, held or waiting for a retry (an Oozie restart)."""
        lost = 0
        for n in self._held:
            n.outcome = "lost"
            lost += 1
        self._held = []
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        for n in self.history:
            if n.outcome == "pending":
                n.outcome = "lost"
                lost += 1
        for t in list(self._tasks):
            t.cancel()
        self._tasks.clear()
        self.stats["lost"] += lost
        return lost

    def pending(self) -> int:
        return sum(1 for n in self.history if n.outcome == "pending")

    # -- delivery ---------------------------------------------------------------------
    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _deliver(self, batch: list[Notification], delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        for n in batch:  # first attempts in batch order; retries run on their own
            if not await self._attempt(n):
                self._retry_later(n)

    def _retry_later(self, n: Notification) -> None:
        if n.attempts > MAX_RETRIES:
            n.outcome = "gave-up"
            self.stats["gaveUp"] += 1
            log.warning("could not send notification [%s]", n.url)
            return
        self.stats["retried"] += 1
        self._spawn(self._retry(n, self.faults.notification_retry_delay))

    async def _retry(self, n: Notification, delay: float) -> None:
        await asyncio.sleep(delay)
        if not await self._attempt(n):
            self._retry_later(n)

    async def _attempt(self, n: Notification) -> bool:
        n.attempts += 1
        self.stats["sent"] += 1
        timeout = self.faults.notification_timeout
        try:
            if self._session is None or self._session.closed:
                self._session = aiohttp.ClientSession()
            async with self._session.get(
                URL(n.url, encoded=True),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
            ) as resp:
                n.codes.append(resp.status)
                await resp.read()
                ok = resp.status == 200
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any IOException or timeout
            n.codes.append(type(exc).__name__)
            ok = False
        if ok:
            n.outcome = "delivered"
            self.stats["delivered"] += 1
        else:
            self.stats["failedAttempts"] += 1
        return ok

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t
        if self._session is not None:
            await self._session.close()
