"""A group commit (shared/group_commit.py): a call alone is committed at once, alone;
calls that arrive while a batch is being committed form the next batch; each caller gets
its own result, and a batch's failure is every member's."""

from __future__ import annotations

import asyncio

import pytest

from shared.group_commit import GroupCommit


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.fail = fail

    async def commit(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        await asyncio.sleep(0.01)  # a store command's round trip, during which others arrive
        if self.fail:
            raise RuntimeError("store away")
        return [i * 10 for i in items]


async def test_a_call_alone_is_committed_at_once_alone() -> None:
    rec = Recorder()
    group = GroupCommit(rec.commit)
    assert await group(1) == 10
    assert await group(2) == 20
    assert rec.batches == [[1], [2]]


async def test_calls_that_overlap_are_committed_together_and_each_gets_its_own_result() -> None:
    rec = Recorder()
    group = GroupCommit(rec.commit)
    results = await asyncio.gather(*(group(i) for i in range(10)))
    assert results == [i * 10 for i in range(10)]
    # The first found nothing under way; the others arrived meanwhile and went together.
    assert rec.batches == [[0], list(range(1, 10))]


async def test_a_failed_batch_fails_each_of_its_calls() -> None:
    group = GroupCommit(Recorder(fail=True).commit)
    results = await asyncio.gather(*(group(i) for i in range(4)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(RuntimeError):
        await group(5)
