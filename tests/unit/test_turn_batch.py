"""The blocking calls of one event-loop turn, run in one worker thread
(shared/executors/turn_batch.py): the local executor makes the jobs of one claim so."""

from __future__ import annotations

import asyncio
import threading

import pytest

from shared.executors.turn_batch import TurnBatch


def test_the_calls_of_one_turn_run_in_one_thread_off_the_loop_each_with_its_own_outcome() -> None:
    def fails() -> str:
        raise ValueError("this one only")

    async def main() -> tuple[list[object], dict[int, int]]:
        batch: TurnBatch[object] = TurnBatch()
        threads: dict[int, int] = {}

        def call(i: int) -> int:
            threads[i] = threading.get_ident()
            return i * 10

        outcomes = await asyncio.gather(
            batch.run(lambda: call(1)), batch.run(fails), batch.run(lambda: call(2)), return_exceptions=True
        )
        later = await batch.run(lambda: call(3))  # a later turn: a batch of its own
        return [*outcomes, later], threads

    outcomes, threads = asyncio.run(main())
    assert outcomes[0] == 10 and outcomes[2] == 20 and outcomes[3] == 30
    assert isinstance(outcomes[1], ValueError)
    assert threads[1] == threads[2] != threading.get_ident()


def test_a_batch_serves_a_new_event_loop() -> None:
    batch: TurnBatch[int] = TurnBatch()
    assert asyncio.run(batch.run(lambda: 1)) == 1
    assert asyncio.run(batch.run(lambda: 2)) == 2


def test_a_cancelled_caller_leaves_the_others_their_results() -> None:
    async def main() -> int:
        batch: TurnBatch[int] = TurnBatch()
        gate = threading.Event()
        first = asyncio.ensure_future(batch.run(lambda: gate.wait() and 1))
        second = asyncio.ensure_future(batch.run(lambda: 2))
        await asyncio.sleep(0.01)
        first.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await second

    assert asyncio.run(main()) == 2
