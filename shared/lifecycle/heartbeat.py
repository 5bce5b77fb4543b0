"""A lease kept alive while a long step runs: renewed every ``every`` seconds, so a
sweep takes the step over only once its holder stopped renewing (it died). The planner
(``shared.lifecycle.submitting``) and a kill's applier (``shared.lifecycle.ending``)
hold one (docs/state-machines.md)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from shared.ticker import cancel_all

log = logging.getLogger(__name__)


class Heartbeat:
    """``async with Heartbeat(renew, every, what):`` renews until the block ends, or until
    ``renew`` answers False (the lease was taken away: the block's own guarded writes
    find that out)."""

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
