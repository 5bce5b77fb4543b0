"""The algorithms. Each takes (workload, candidates, bytes to free) and returns hashes to
delete whose sizes add up to at least the bytes to free (or every candidate, if even
that is not enough), in the order chosen, stopping as soon as that is reached. Candidates
are already filtered: never a LEAF, claimed or unmanaged dataset; an algorithm returns
candidates only.

Baselines from the thesis: ``mcu`` (Algorithm 5) and ``adaptive`` (Algorithm 6). Added:
``lru``, and the cost-aware ``gdsf``, ``nectar`` and ``reuse-rate``, which price a dataset
by what recomputing it would cost, including the ancestors that are no longer stored
(see shared/eviction/lineage.py; they need ``Workload.parents``,
``compute_time`` and ``stored`` for that, and fall back to the dataset's own time).
"""

from __future__ import annotations

import statistics
from typing import Protocol

from shared.eviction.lineage import RecomputeCost, evict_cheapest, lineage_sizes, window_uses
from shared.eviction.workload import Candidate, Workload


class Algorithm(Protocol):
    name: str

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]: ...


def take_until(ordered: list[Candidate], to_free: int) -> list[str]:
    out, freed = [], 0
    for c in ordered:
        if freed >= to_free:
            break
        out.append(c.hash)
        freed += c.size
    return out


class MostCommonlyUsed:
    """Thesis Algorithm 5: keep the datasets used by the most workflows of the workload.

    The printed listing sorts by count and deletes from the front; the evident intent
    (keep the most used) is to delete the least used first. Ties: older use first.
    """

    name = "mcu"

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]:
        counts = workload.dataset_counts()
        ordered = sorted(candidates, key=lambda c: (counts.get(c.hash, 0), c.last_used, c.hash))
        return take_until(ordered, to_free)


class Adaptive:
    """Thesis Algorithm 6: MCU over the recent part of the workload that reuse reaches into.

    For every dataset use, the distance (in workflows) back to its previous use is
    recorded; the workload kept is the last mean + 2 std workflows.
    """

    name = "adaptive"

    def __init__(self) -> None:
        self.inner = MostCommonlyUsed()

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]:
        last_seen: dict[str, int] = {}
        recency: list[int] = []
        for i, wf in enumerate(workload.workflows):
            for h in set(wf):
                if h in last_seen:
                    recency.append(i - last_seen[h])
                last_seen[h] = i
        if recency:
            mu = statistics.fmean(recency)
            sigma = statistics.pstdev(recency) if len(recency) > 1 else 0.0
            n = len(workload)
            workload = workload.sublist(int(n - mu - 2 * sigma))
        return self.inner.select(workload, candidates, to_free)


class LeastRecentlyUsed:
    """Delete the datasets whose last use (reuse or computation) is oldest first.

    Ties (same last use): by hash. Ignores sizes, compute times and the workload.
    """

    name = "lru"

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]:
        return take_until(sorted(candidates, key=lambda c: (c.last_used, c.hash)), to_free)


class GreedyDualSizeFrequency:
    """GreedyDual-Size-Frequency (Cherkasova 1998) with lineage-aware cost.

    Priority ``H(d) = L(d) + F(d) x C(d) / S(d)``; delete the lowest first. ``F`` is the
    number of workflows of the workload window that used ``d`` (at least 1), ``S`` its
    size, ``C`` its recompute cost: its compute time plus that of its ancestors that are
    no longer stored. ``L`` ages the cache: the inflation value ``L`` is raised to the
    priority of the last dataset deleted, and a dataset used (reused or computed) since
    the previous decision takes the current ``L`` as its base, so what has not been used
    for a long time eventually goes even if it was once valuable.

    The inflation value and each dataset's base live in this object (one decision service
    replica decides at a time); a restart starts again from ``L = 0``, which only delays
    ageing. Bases change only when the algorithm runs, so a use between two runs gets
    exactly the ``L`` it would have had.
    """

    name = "gdsf"

    def __init__(self) -> None:
        self.inflation = 0.0
        self.base: dict[str, float] = {}
        self.based_at: dict[str, float] = {}  # last_used when the base was set

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]:
        counts = workload.dataset_counts()
        cost = RecomputeCost(workload, candidates)
        base: dict[str, float] = {}
        for c in candidates:
            if c.hash in self.base and self.based_at.get(c.hash) == c.last_used:
                base[c.hash] = self.base[c.hash]
            else:
                base[c.hash] = self.inflation

        def priority(c: Candidate, seconds: float) -> float:
            return base[c.hash] + max(1, counts.get(c.hash, 0)) * seconds / max(1, c.size)

        chosen, last = evict_cheapest(candidates, to_free, priority, cost)
        if chosen:
            self.inflation = max(self.inflation, last)
        gone = set(chosen)
        self.base = {h: b for h, b in base.items() if h not in gone}
        self.based_at = {c.hash: c.last_used for c in candidates if c.hash not in gone}
        return chosen


class Nectar:
    """Nectar's cost/benefit ranking (Gunda et al., OSDI 2010), lineage-aware.

    Nectar deletes first the cached results with the highest cost-to-benefit ratio
    ``S x dT / (N x M)``: ``S`` the size, ``dT`` the time since the last use, ``N`` the
    number of uses, ``M`` the machine time the result saves. Here ``dT`` is counted in
    workflows (how many workflows of the window came after the last one that used it;
    not in the window: the window's length + 1), ``N`` is the number of workflows of the
    window that used it (at least 1), and ``M`` its recompute cost including the
    ancestors that are no longer stored.
    """

    name = "nectar"

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]:
        n = len(workload)
        uses = window_uses(workload)
        cost = RecomputeCost(workload, candidates)

        def benefit_per_cost(c: Candidate, seconds: float) -> float:  # 1 / ratio: delete the smallest first
            u = uses.get(c.hash)
            age = n - u.last if u else n + 1
            return (u.count if u else 1) * seconds / (max(1, c.size) * age)

        return evict_cheapest(candidates, to_free, benefit_per_cost, cost)[0]


class ReuseRate:
    """Keep what is expected to save the most recomputation per byte (Pingo's own).

    Value ``r(d) x C(d) / S(d)``; delete the lowest first. ``C`` is the recompute cost
    with the absent ancestors, ``S`` the size, and ``r`` the expected number of reuses
    per workflow, an empirical-Bayes estimate from the workload window:

    - each dataset's record: ``k`` reuses (workflows after its first one in the window
      that used it) over an exposure of ``a`` workflows (since that first one);
    - its class's rate ``r_g``: datasets are grouped by the size of their lineage (the
      number of ancestors, counted along every path, capped at ``LINEAGE_CAP``), and the
      class's rate is its reuses over its exposure, shrunk to the overall rate by
      ``CLASS_PRIOR`` workflows;
    - ``r(d) = (k + m x r_g) / (a + m)`` with ``m = PRIOR_WORKFLOWS``: a dataset seen in
      few workflows is judged mostly by its class, an old one mostly by its own record.

    Why lineage size: a new workflow can only reuse a dataset if it repeats its whole
    lineage, so the longer the lineage the rarer the reuse; the window measures how much
    rarer, for this installation's workload. The raw use count (MCU) conflates age with
    popularity, and weighing the ancestors' cost without this estimate keeps deep, costly
    datasets that are seldom asked for again (see ``gdsf`` and ``nectar`` in the
    evaluation). Without lineage (``parents`` empty) every dataset is in one class and
    this is a shrunk reuse rate. O(window + candidates log candidates).
    """

    name = "reuse-rate"
    PRIOR_WORKFLOWS = 5.0
    CLASS_PRIOR = 2.0
    LINEAGE_CAP = 12

    def select(self, workload: Workload, candidates: list[Candidate], to_free: int) -> list[str]:
        n = len(workload)
        uses = window_uses(workload)
        size_of = lineage_sizes(workload.parents, self.LINEAGE_CAP)
        reuses: dict[int, float] = {}
        exposure: dict[int, float] = {}
        for h, u in uses.items():
            g = size_of(h)
            reuses[g] = reuses.get(g, 0.0) + u.count - 1
            exposure[g] = exposure.get(g, 0.0) + n - 1 - u.first
        overall = (sum(reuses.values()) + 1.0) / (sum(exposure.values()) + 1.0)
        m, m_g = self.PRIOR_WORKFLOWS, self.CLASS_PRIOR
        cost = RecomputeCost(workload, candidates)

        def value(c: Candidate, seconds: float) -> float:
            g = size_of(c.hash)
            rate_g = (reuses.get(g, 0.0) + m_g * overall) / (exposure.get(g, 0.0) + m_g)
            u = uses.get(c.hash)
            k, a = (u.count - 1, n - 1 - u.first) if u else (0, n)
            return (k + m * rate_g) / (a + m) * seconds / max(1, c.size)

        return evict_cheapest(candidates, to_free, value, cost)[0]


REGISTRY: dict[str, type] = {
    cls.name: cls for cls in (MostCommonlyUsed, Adaptive, LeastRecentlyUsed, GreedyDualSizeFrequency, Nectar, ReuseRate)
}


def get_algorithm(name: str) -> Algorithm:
    try:
        return REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown decision algorithm {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
