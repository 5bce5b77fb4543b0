"""The collector's pause (shared/collector.py): held while any step holds it, and left as
it was found once the last one ends."""

from __future__ import annotations

import gc
import threading

from shared.collector import paused, run_paused


def test_the_collector_runs_again_only_once_every_overlapping_pause_ended() -> None:
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def step() -> None:
        inside.set()
        release.wait(10)

    worker = threading.Thread(target=run_paused, args=(step,))
    worker.start()
    inside.wait(10)
    with paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the worker's step still holds it
    release.set()
    worker.join(10)
    assert gc.isenabled()


def test_a_collector_switched_off_before_stays_off() -> None:
    gc.disable()
    try:
        assert run_paused(sum, [1, 2]) == 3
        assert not gc.isenabled()
    finally:
        gc.enable()
