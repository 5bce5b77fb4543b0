"""A submitter held in the act: the executor's submit of one named job stopped before it
makes the job, until the test lets it go. What a slow submitter (a loaded machine), a lost
one (a process that stalls between the claim and the job) or a kill in between looks like
to the rest of Pingo (docs/state-machines.md, "Action")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class HeldSubmitter:
    name: str
    # Set once the named job's submit is held (its attempt claimed, its job not made).
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by the test to let it go on (unless the hold waits for ``until``).
    release: asyncio.Event = field(default_factory=asyncio.Event)
    external_id: str | None = None
    job: str | None = None  # the job the submit made, once let go
    refused: str | None = None  # the type of what the submit raised instead
    done: bool = False

    async def until_done(self, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while not self.done:
            assert time.time() < deadline, f"the submitter of {self.name} never came back"
            await asyncio.sleep(0.05)


def hold_submitter(
    monkeypatch: pytest.MonkeyPatch, executor: Any, name: str, *,
    until: Callable[[Any], Awaitable[None]] | None = None,
    on_hold: Callable[[Any, Any], Awaitable[None]] | None = None,
) -> HeldSubmitter:  # fmt: skip
    """Hold the first submit of the job named ``name`` on ``executor``'s class; the other
    jobs pass. ``on_hold(executor, job)`` runs when it is held; ``until(job)``, if given,
    is what it waits for instead of ``release``."""
    submit = type(executor).submit
    held = HeldSubmitter(name)

    async def holding(self: Any, job: Any, **kwargs: Any) -> str:
        if job.name != name or held.reached.is_set():
            return await submit(self, job, **kwargs)
        held.external_id = job.external_id
        if on_hold is not None:
            await on_hold(self, job)
        held.reached.set()
        await (until(job) if until is not None else held.release.wait())
        try:
            held.job = await submit(self, job, **kwargs)
        except Exception as exc:
            held.refused = type(exc).__name__
            raise
        finally:
            held.done = True
        return held.job

    monkeypatch.setattr(type(executor), "submit", holding)
    return held
