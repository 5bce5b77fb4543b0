"""A job's process as the runner holds it (shared/executors/child_process.py): its exit
code comes back however it ended, whether or not this kernel has pidfds."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from shared.executors.child_process import Child


@pytest.fixture(params=["pidfd", "thread"])
def waiting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "thread":  # a system without pidfd_open: a thread waits instead
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd_open here")
    return request.param


async def test_exit_code_of_a_job_that_ends(waiting: str) -> None:
    child = Child(["sh", "-c", "exit 3"])
    assert await asyncio.wait_for(child.wait(), 10) == 3
    assert child.returncode == 3


async def test_a_terminated_job_reports_its_signal(waiting: str) -> None:
    child = Child(["sleep", "30"])
    waiter = asyncio.create_task(child.wait())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    child.terminate()
    assert await asyncio.wait_for(waiter, 10) == -signal.SIGTERM


async def test_waiting_again_after_the_end(waiting: str) -> None:
    child = Child(["true"])
    assert await asyncio.wait_for(child.wait(), 10) == 0
    child.kill()  # ended already: no error, nothing signalled
    assert await child.wait() == 0


async def test_an_end_reaped_before_the_wait_began(waiting: str) -> None:
    # A kill request can poll (and so reap) the process before its waiter first runs.
    child = Child(["true"])
    while child.popen.poll() is None:
        await asyncio.sleep(0.01)
    assert await asyncio.wait_for(child.wait(), 10) == 0


async def test_a_missing_program_fails_at_start() -> None:
    with pytest.raises(FileNotFoundError):
        Child(["/no/such/program"])
