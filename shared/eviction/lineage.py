"""What it would cost to compute a dataset again, and a greedy eviction that keeps that
price up to date while it deletes.

A deleted dataset is computed again together with every ancestor that is not present
either (the planner computes a needed action unless its dataset is stored), up to the
nearest present ancestors. So deleting a dataset also makes its present descendants more
expensive to lose: the eviction below re-prices a candidate when it reaches the front.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from shared.eviction.workload import Candidate, Workload

# At most this many absent ancestors are priced per dataset: past it the estimate stops
# growing (an under-estimate), which bounds one pricing at O(MAX_ANCESTORS). The thesis's
# workloads reach a few tens at most.
MAX_ANCESTORS = 64


class RecomputeCost:
    """Seconds to compute a dataset again now: its own mean compute time plus that of each
    distinct ancestor that is absent (not present, or chosen for deletion in this run)."""

    def __init__(self, workload: Workload, candidates: list[Candidate]) -> None:
        self.parents = workload.parents
        self.time = workload.compute_time
        self.own = {c.hash: c.compute_time for c in candidates}
        self.present = workload.stored if workload.stored is not None else self.own.keys()
        self.evicted: set[str] = set()

    def absent(self, h: str) -> bool:
        return h not in self.present or h in self.evicted

    def seconds(self, h: str) -> float:
        total = self.own.get(h, self.time.get(h, 0.0))
        seen = {h}
        stack = [p for p in self.parents.get(h, ()) if self.absent(p)]
        while stack and len(seen) <= MAX_ANCESTORS:
            a = stack.pop()
            if a in seen:
                continue
            seen.add(a)
            total += self.time.get(a, 0.0)
            stack.extend(p for p in self.parents.get(a, ()) if p not in seen and self.absent(p))
        return total


def evict_cheapest(
    candidates: list[Candidate],
    to_free: int,
    keep_value: Callable[[Candidate, float], float],
    cost: RecomputeCost,
) -> tuple[list[str], float]:
    """Delete the candidates worth least first until ``to_free`` bytes are freed.

    ``keep_value(candidate, recompute_seconds)`` must grow with the recompute seconds.
    Those seconds only grow as ancestors are deleted, and are at least the dataset's own
    compute time, so a lazy greedy is exact: the heap starts from the cheap lower bound
    (own time only); the candidate at the front is priced in full, and deleted only if
    it still costs no more than the next one's bound, else put back at its price. Only
    the candidates that reach the front are priced through their lineage: O(n log n)
    plus a few pricings per deletion. Returns the hashes in the order deleted and the
    value of the last one (GDSF's inflation).
    """
    if to_free <= 0:
        return [], 0.0
    heap = [(keep_value(c, c.compute_time), c.last_used, c.hash, i) for i, c in enumerate(candidates)]
    heapq.heapify(heap)
    out: list[str] = []
    freed = 0
    last = 0.0
    while heap and freed < to_free:
        _, last_used, h, i = heapq.heappop(heap)
        c = candidates[i]
        now = keep_value(c, cost.seconds(h))
        if heap and (now, last_used, h) > heap[0][:3]:
            heapq.heappush(heap, (now, last_used, h, i))
            continue
        out.append(h)
        freed += c.size
        last = now
        cost.evicted.add(h)
    return out, last


@dataclass(slots=True)
class Uses:
    first: int  # index in the window of the first workflow that used the dataset
    last: int
    count: int  # workflows of the window that used it


def window_uses(workload: Workload) -> dict[str, Uses]:
    out: dict[str, Uses] = {}
    for i, wf in enumerate(workload.workflows):
        for h in set(wf):
            u = out.get(h)
            if u is None:
                out[h] = Uses(i, i, 1)
            else:
                u.last = i
                u.count += 1
    return out


def lineage_sizes(parents: dict[str, list[str]], cap: int) -> Callable[[str], int]:
    """The number of ancestors of a dataset, counted once per path and capped at ``cap``
    (a shared ancestor counts twice in a diamond). Memoized: O(edges) for all datasets,
    where the exact count of distinct ancestors would be quadratic."""
    memo: dict[str, int] = {}
    open_: set[str] = set()  # being sized: met again only through a cycle (bad input)

    def size(h: str) -> int:
        known = memo.get(h)
        if known is not None:
            return known
        try:  # the usual case: every parent is sized already
            memo[h] = min(cap, sum(1 + memo[p] for p in parents.get(h, ())))
            return memo[h]
        except KeyError:
            pass
        stack = [h]
        while stack:
            x = stack[-1]
            if x in memo:
                stack.pop()
                continue
            open_.add(x)
            ps = parents.get(x, ())
            todo = [p for p in ps if p not in memo and p not in open_]
            if todo:
                stack.extend(todo)
                continue
            memo[x] = min(cap, sum(1 + memo.get(p, 0) for p in ps))
            open_.discard(x)
            stack.pop()
        return memo[h]

    return size
