"""The cyclic garbage collector, paused while a workflow's pure planning steps run.

Parsing, hashing, planning and writing out a 10,000-action workflow allocate millions of
objects that live until its 201: every 700 allocations the collector walks the young
ones, and as they survive, the older generations with them. Measured on the 10k chain,
that was half of those steps' CPU (parse 0.48 -> 0.29 s, the documents 0.26 -> 0.13 s;
docs/performance.md, "A big workflow"). Reference counting still frees what they drop;
only cycles wait for the collector, which runs again once no step holds it paused.

Paused for synchronous steps only (in a worker thread or on the event loop, never across
a store round trip), so a pause lasts as long as one step's CPU.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_holders = 0
_resume = False  # whether the collector was on when the first holder paused it


@contextmanager
def paused() -> Iterator[None]:
    """No collection while the block runs (nor while any other holder's does)."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()


def run_paused(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` with the collector paused: for ``asyncio.to_thread``."""
    with paused():
        return fn(*args, **kwargs)
