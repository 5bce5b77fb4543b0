"""Blocking calls asked for in one turn of an event loop, run one after another in one
worker thread, their outcomes handed back to the loop in one wake (docs/performance.md,
"The jobs of one claim in one worker thread").

The jobs of one claim are asked for together: with a thread hand-off each (``to_thread``)
the loop paid a hand-off and a wake per job, and each job's folder was made in its own
thread, racing the others for the interpreter's lock. A call's exception is its own:
the others of its turn go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]


class TurnBatch(Generic[T]):
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[Callable[[], T], asyncio.Future[T]]] = []

    async def run(self, call: Callable[[], T]) -> T:
        """``call()``'s result, computed in a worker thread with the other calls of this turn."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a batch is its loop's (a closed loop's never runs)
            self._loop, self._pending = loop, []
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        # Each call in the caller's context, as ``asyncio.to_thread`` runs it.
        self._pending.append((functools.partial(contextvars.copy_context().run, call), future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        loop = self._loop
        assert loop is not None
        loop.run_in_executor(None, _run_all, loop, batch)


def _run_all(loop: asyncio.AbstractEventLoop, batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]]) -> None:
    outcomes: list[_Outcome] = []
    for call, future in batch:
        try:
            outcomes.append((future, call(), None))
        except BaseException as exc:  # handed to its caller, as a thread's future would
            outcomes.append((future, None, exc))
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
        loop.call_soon_threadsafe(_settle, outcomes)


def _settle(outcomes: list[_Outcome]) -> None:
    for future, result, exc in outcomes:
        if future.done():  # its caller was cancelled
            continue
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
