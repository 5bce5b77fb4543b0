"""The decision algorithms that keep storage in budget, alone (the services doing it:
tests/system/test_storage_budget.py)."""

from __future__ import annotations

import pytest

from shared.eviction import REGISTRY, Candidate, Workload, get_algorithm


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_algorithms_free_what_is_asked_from_candidates_only(name: str) -> None:
    algo = get_algorithm(name)
    cands = [
        Candidate(f"h{i}", size=(i % 5 + 1) * 100, compute_time=float(i % 7 + 1), last_used=float(i)) for i in range(40)
    ]
    history = Workload([[f"h{(i * 7 + j) % 40}" for j in range(5)] + ["leaf-x"] for i in range(30)])
    for to_free in (1, 450, 5000, 10**9):
        chosen = algo.select(history, cands, to_free)
        assert set(chosen) <= {c.hash for c in cands} and len(chosen) == len(set(chosen))
        freed = sum(c.size for c in cands if c.hash in chosen)
        assert freed >= min(to_free, sum(c.size for c in cands))
        # No more than needed: dropping the last choice would not free enough.
        if chosen:
            last = next(c for c in cands if c.hash == chosen[-1])
            assert freed - last.size < to_free


def test_unknown_algorithm_is_a_clear_error() -> None:
    known = ", ".join(sorted(REGISTRY))
    with pytest.raises(ValueError, match=f"unknown decision algorithm 'nope'; known: {known}"):
        get_algorithm("nope")
    assert {"adaptive", "mcu", "lru", "gdsf", "nectar"} <= set(REGISTRY)
