"""The thesis's ideal computation time (section 4.1.2, Algorithms 7 and 8).

Knowing the whole history, at each step ``t`` keep the subset ``A`` of the datasets
alive at ``t`` (created before ``t``, used again at ``t`` or later) that fits in the
storage and maximizes the computation time left (Algorithm 8: compute time x number of
workflows from ``t`` on that use it), then charge what ``W_t`` costs with ``A`` stored.
Each step is chosen on its own (a dataset dropped at ``t`` may be "kept" again at
``t + 1``) and dependencies are ignored in the choice, so this is a heuristic reference,
not a bound: an online algorithm can beat it.

Adaptations, so that the comparison with the simulator is like for like:

- ``W_t``'s cost is what the production planner computes with ``A`` stored (reusing a
  dataset skips the ancestors that only fed it), not the sum over ``W_t \\ A``;
- the budget covers STORED datasets only, as in production: a dataset that has been a
  leaf is LEAF from then on, always present and outside the budget (when it becomes one
  does not depend on the algorithm, so ideal and simulator agree on it);
- the knapsack (line 11, "pseudopolynomial solutions") is solved exactly by dynamic
  programming over sizes in units of ``granularity`` bytes, each size rounded *up* and
  the capacity *down*: the chosen set always fits; it can miss the true optimum by at
  most one unit per item kept.
- Algorithm 7 as printed builds ``M_t``, ``N_t``, ``P_t`` inside its first loop; they
  are built once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evaluation.simulator import MB, PreparedWorkflow, run_now
from shared.planning import plan
from shared.workflow_spec import ActionId


class PresentGate:
    """A fixed set of present datasets: the ideal system never claims nor changes them."""

    def __init__(self, present: set[str]) -> None:
        self.present = present

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        return h in self.present

    async def try_follow(
        self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool
    ) -> str | None:
        return None  # workflows run one after the other: nothing is ever in flight


@dataclass(frozen=True)
class IdealResult:
    seconds: float
    per_workflow: list[float]


def knapsack(sizes: list[int], values: list[float], capacity: int, granularity: int) -> list[int]:
    """Indexes of the items of greatest total value whose sizes add up to at most
    ``capacity`` (all in bytes), by DP over ``granularity``-byte units."""
    room = capacity // granularity
    weights = [math.ceil(s / granularity) for s in sizes]
    items = [i for i, w in enumerate(weights) if w <= room and values[i] > 0]
    if sum(weights[i] for i in items) <= room:
        return items
    best = np.zeros(room + 1)
    took = np.zeros((len(items), room + 1), dtype=bool)
    for k, i in enumerate(items):
        w, v = weights[i], values[i]
        if w == 0:
            best += v
            took[k, :] = True
            continue
        with_it = best[:-w] + v
        better = with_it > best[w:]
        took[k, w:] = better
        best[w:] = np.where(better, with_it, best[w:])
    chosen = []
    left = room
    for k in range(len(items) - 1, -1, -1):
        if took[k, left]:
            chosen.append(items[k])
            left -= weights[items[k]]
    return chosen


def ideal_seconds(workflows: list[PreparedWorkflow], capacity: int, granularity: int = MB // 10) -> IdealResult:
    n = len(workflows)
    born: dict[str, int] = {}  # b(d): the first workflow that has (so computes) it
    uses: dict[str, list[int]] = {}  # the workflows that have it (P_t, inverted)
    leaf_at: dict[str, int] = {}  # the first workflow where it is a leaf: LEAF after it
    cost: dict[str, tuple[int, float]] = {}
    for t, wf in enumerate(workflows):
        g = wf.spec.graph()
        for a in wf.spec.actions:
            if not a.isManaged:
                continue
            h = wf.hashes[a.id]
            born.setdefault(h, t)
            uses.setdefault(h, []).append(t)
            cost.setdefault(h, (wf.costs[a.id].size, wf.costs[a.id].seconds))
            if g.out_degree(a.id) == 0:
                leaf_at.setdefault(h, t)
    total = 0.0
    per_workflow = []
    for t, wf in enumerate(workflows):
        leaves: set[str] = set()
        alive: list[str] = []  # N_t, budgeted: STORED at t in every run
        for h, b in born.items():
            if b >= t or uses[h][-1] < t:  # not yet created, or never used again (e(d) < t)
                continue
            if leaf_at.get(h, n) < t:
                leaves.add(h)
            else:
                alive.append(h)
        sizes = [cost[h][0] for h in alive]
        # Algorithm 8: c(d) times the number of workflows from t to n that use d.
        values = [cost[h][1] * sum(1 for u in uses[h] if u >= t) for h in alive]
        kept = {alive[i] for i in knapsack(sizes, values, capacity, granularity)}
        planned = run_now(plan(wf.spec, wf.hashes, PresentGate(kept | leaves)))
        et = sum(wf.costs[aid].seconds for aid, p in planned.items() if p.computed)
        per_workflow.append(et)
        total += et
    return IdealResult(total, per_workflow)
