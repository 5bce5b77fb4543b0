"""A group commit: calls that arrive while a group is being committed are committed
together, next, in one batch (docs/performance.md, "Work in groups").

No call waits for company: one that finds nothing under way is committed at once, alone,
as it would be without grouping. Only under load, when calls overlap, do the groups
grow, and with them what one store command or one message carries. Each caller gets
its own item's result back; a failure of the batch is every member's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from shared.errors import PingoError

T = TypeVar("T")
R = TypeVar("R")


class GroupInterrupted(PingoError):
    """The task committing a group was cancelled before its batch was committed."""


class GroupCommit(Generic[T, R]):
    """``await group(item)``: ``commit`` runs on a batch of items and answers one result per
    item, in order. One batch at a time; items arriving meanwhile form the next."""

    def __init__(self, commit: Callable[[list[T]], Awaitable[list[R]]]) -> None:
        self.commit = commit
        self.waiting: list[tuple[T, asyncio.Future[R]]] = []
        self.committing = asyncio.Lock()

    async def __call__(self, item: T) -> R:
        mine: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self.waiting.append((item, mine))
        async with self.committing:
            if not mine.done():  # else an earlier holder committed it with its batch
                group, self.waiting = self.waiting, []
                try:
                    results = await self.commit([i for i, _ in group])
                except BaseException as exc:
                    # The others learn it as each would have, committing its own; a
                    # cancellation (the service stopping) is this task's alone.
                    shared: BaseException = exc
                    if isinstance(exc, asyncio.CancelledError):
                        shared = GroupInterrupted("the group's commit was cancelled")
                    for _, f in group:
                        if f is not mine and not f.done():
                            f.set_exception(shared)
                    raise
                for (_, f), result in zip(group, results, strict=True):
                    if not f.done():
                        f.set_result(result)
        return await mine
