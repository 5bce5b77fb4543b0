"""A job runner's notices (a job's end, its RUNNING), gathered per callback service: while
one call to a service is in flight, the notices that come meanwhile wait and go together
next, as one request (``local_job.notify_all``), which the callback service finishes as
one group (docs/architecture.md, "The local job runner").

No notice waits for company: one that finds nothing in flight to its service leaves at
once, alone, a GET as before (a chain's lone end is not delayed). The grouping is
``shared.group_commit``'s; the calls themselves are blocking (``http.client``, kept
connections), so each group is sent from a worker thread.
"""

from __future__ import annotations

import asyncio

from shared.executors.local_job import batch_key, notice_target, notify_all
from shared.group_commit import GroupCommit


async def _send(targets: list[str]) -> list[None]:
    await asyncio.to_thread(notify_all, targets)
    return [None] * len(targets)


class Notices:
    """``await notices.send(url, job_id, state)``: best effort, errors swallowed
    (``local_job.notify``)."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str, str], GroupCommit[str, None]] = {}

    async def send(self, url: str, job_id: str, state: str) -> None:
        if not url:
            return
        target = notice_target(url, job_id, state)
        key = batch_key(target)
        if key is None:  # not a callback service's URL: alone, as ever
            await _send([target])
            return
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = GroupCommit(_send)
        await group(target)
