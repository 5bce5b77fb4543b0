"""The algorithms. Each takes (history, candidates, bytes to free) and returns hashes to
delete whose sizes add up to at least the bytes to free (or every candidate, if even
that is not enough). Candidates are already filtered: never a LEAF, claimed or unmanaged
dataset."""

from __future__ import annotations

import statistics
from typing import Protocol

from shared.decision.history import Candidate, SimplifiedHistory


class Algorithm(Protocol):
    name: str

    def select(self, history: SimplifiedHistory, candidates: list[Candidate], to_free: int) -> list[str]: ...


def take_until(ordered: list[Candidate], to_free: int) -> list[str]:
    out, freed = [], 0
    for c in ordered:
        if freed >= to_free:
            break
        out.append(c.hash)
        freed += c.size
    return out


class MostCommonlyUsed:
    """Thesis Algorithm 5: keep the datasets used by the most workflows of the history.

    The printed listing sorts by count and deletes from the front; the evident intent
    (keep the most used) is to delete the least used first. Ties: older use first.
    """

    name = "mcu"

    def select(self, history: SimplifiedHistory, candidates: list[Candidate], to_free: int) -> list[str]:
        counts = history.dataset_counts()
        ordered = sorted(candidates, key=lambda c: (counts.get(c.hash, 0), c.last_used, c.hash))
        return take_until(ordered, to_free)


class Adaptive:
    """Thesis Algorithm 6: MCU over the recent part of the history that reuse reaches into.

    For every dataset use, the distance (in workflows) back to its previous use is
    recorded; the history kept is the last mean + 2 std workflows.
    """

    name = "adaptive"

    def __init__(self) -> None:
        self.inner = MostCommonlyUsed()

    def select(self, history: SimplifiedHistory, candidates: list[Candidate], to_free: int) -> list[str]:
        last_seen: dict[str, int] = {}
        recency: list[int] = []
        for i, wf in enumerate(history.workflows):
            for h in set(wf):
                if h in last_seen:
                    recency.append(i - last_seen[h])
                last_seen[h] = i
        if recency:
            mu = statistics.fmean(recency)
            sigma = statistics.pstdev(recency) if len(recency) > 1 else 0.0
            n = len(history)
            history = history.sublist(int(n - mu - 2 * sigma))
        return self.inner.select(history, candidates, to_free)


REGISTRY: dict[str, type] = {cls.name: cls for cls in (MostCommonlyUsed, Adaptive)}


def get_algorithm(name: str) -> Algorithm:
    try:
        return REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown decision algorithm {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
