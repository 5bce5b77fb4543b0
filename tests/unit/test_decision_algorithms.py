"""The decision algorithms' contract (issue item 4) on random instances with lineage, and
the lineage pricing the cost-aware ones share."""

from __future__ import annotations

import random

import pytest

from shared.eviction import REGISTRY, Candidate, Workload, get_algorithm
from shared.eviction.lineage import RecomputeCost, evict_cheapest, lineage_sizes, window_uses


def instance(seed: int) -> tuple[Workload, list[Candidate], set[str]]:
    """A random lineage DAG; some datasets are candidates (STORED, unclaimed), others are
    present but not candidates (LEAF, claimed), unmanaged or deleted."""
    rng = random.Random(seed)
    n = rng.randint(1, 80)
    hashes = [f"d{i}" for i in range(n)]
    parents = {h: rng.sample(hashes[:i], k=min(i, rng.randint(0, 3))) for i, h in enumerate(hashes)}
    times = {h: rng.uniform(0, 20) for h in hashes}
    roles = {h: rng.choice(["candidate", "candidate", "leaf", "claimed", "unmanaged", "deleted"]) for h in hashes}
    stored = {h for h, r in roles.items() if r in ("candidate", "leaf", "claimed")}
    workflows = [rng.sample(hashes, k=rng.randint(1, min(n, 8))) for _ in range(rng.randint(0, 30))]
    candidates = [
        Candidate(h, rng.choice([0, 1, 100, rng.randint(1, 10**6)]), times[h], float(rng.randint(0, 50)))
        for h in hashes
        if roles[h] == "candidate"
    ]
    forbidden = {h for h, r in roles.items() if r != "candidate"}
    if rng.random() < 0.3:  # as production calls it today: no lineage at all
        return Workload(workflows), candidates, forbidden
    return Workload(workflows, parents, times, stored), candidates, forbidden


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_frees_what_is_asked_from_candidates_only(name: str) -> None:
    algo = get_algorithm(name)  # one instance across calls, as the decision service keeps it
    for seed in range(300):
        history, candidates, forbidden = instance(seed)
        total = sum(c.size for c in candidates)
        rng = random.Random(seed)
        for to_free in (1, rng.randint(1, max(1, total)), total, total + 1, 10**12):
            chosen = algo.select(history, candidates, to_free)
            assert len(chosen) == len(set(chosen))
            assert set(chosen) <= {c.hash for c in candidates}
            assert not set(chosen) & forbidden
            size = {c.hash: c.size for c in candidates}
            freed = sum(size[h] for h in chosen)
            assert freed >= min(to_free, total), (seed, to_free)
            if chosen and freed >= to_free:  # stops as soon as enough is freed
                assert freed - size[chosen[-1]] < to_free


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_nothing_to_free_nothing_chosen(name: str) -> None:
    history, candidates, _ = instance(3)
    assert get_algorithm(name).select(history, candidates, 0) == []
    assert get_algorithm(name).select(history, [], 10) == []


def test_recompute_cost_counts_absent_ancestors_once() -> None:
    # r -> a -> {b, c} -> d (a diamond under a); r present, a absent.
    parents = {"a": ["r"], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    times = {"r": 100.0, "a": 1.0, "b": 2.0, "c": 4.0, "d": 8.0}
    history = Workload([], parents, times, stored={"r", "b", "c", "d"})
    cands = [Candidate(h, 1, times[h]) for h in ("b", "c", "d")]
    cost = RecomputeCost(history, cands)
    assert cost.seconds("d") == 8.0  # b and c present
    assert cost.seconds("b") == 2.0 + 1.0  # a absent, r present
    cost.evicted.update({"b", "c"})
    assert cost.seconds("d") == 8.0 + 2.0 + 4.0 + 1.0  # a once, though reached twice


def test_deleting_an_ancestor_raises_its_descendants_price() -> None:
    # c's parent p is cheapest; once p is gone, c costs 1 + 0.5 s and x (1.2 s) goes instead.
    times = {"p": 0.5, "c": 1.0, "x": 1.2}
    history = Workload([], {"c": ["p"]}, times, stored={"p", "c", "x"})
    cands = [Candidate(h, 10, t, float(i)) for i, (h, t) in enumerate(times.items())]
    cost = RecomputeCost(history, cands)
    assert evict_cheapest(cands, 20, lambda c, seconds: seconds / c.size, cost)[0] == ["p", "x"]


def test_lineage_sizes_are_linear_capped_and_survive_a_cycle() -> None:
    chain = {f"n{i}": [f"n{i - 1}"] for i in range(1, 5000)}
    size = lineage_sizes(chain, cap=12)
    assert size("n0") == 0 and size("n3") == 3 and size("n4999") == 12
    assert lineage_sizes({"a": ["b"], "b": ["a"]}, cap=12)("a") <= 12


def test_window_uses() -> None:
    uses = window_uses(Workload([["a", "b", "a"], ["b"], ["c", "a"]]))
    assert (uses["a"].first, uses["a"].last, uses["a"].count) == (0, 2, 2)
    assert (uses["b"].first, uses["b"].last, uses["b"].count) == (0, 1, 2)


def test_gdsf_ages_what_is_not_used_again() -> None:
    algo = get_algorithm("gdsf")
    history = Workload([["old"], ["old"], ["old"]])
    cands = [Candidate("old", 10, 10.0, 1.0), Candidate("cheap", 10, 1.0, 2.0)]
    assert algo.select(history, cands, 10) == ["cheap"]
    inflation = algo.inflation
    assert inflation > 0
    # "new" arrives after that decision and takes the inflated base; "old" keeps its own.
    cands = [Candidate("old", 10, 10.0, 1.0), Candidate("new", 10, 1.0, 5.0)]
    assert algo.select(Workload([["old"], ["new"]]), cands, 10) == ["new"]
    for _ in range(30):
        cands = [Candidate("old", 10, 10.0, 1.0), Candidate("new", 10, 1.0, 5.0 + _)]
        chosen = algo.select(Workload([["old"], ["new"]]), cands, 10)
        if chosen == ["old"]:
            break
    assert chosen == ["old"], "a dataset never used again is eventually deleted"


def test_reuse_rate_prefers_the_class_that_is_reused() -> None:
    # Roots (no ancestors) are reused in every workflow; deep datasets never come back.
    workflows = [[f"root{i % 3}", f"deep{i}"] for i in range(20)]
    parents = {f"deep{i}": [f"root{i % 3}"] for i in range(20)}
    history = Workload(workflows, parents, {}, stored={"root0", "root1", "root2", "deep19", "fresh"})
    parents["fresh"] = ["root0"]
    cands = [Candidate("root0", 10, 5.0, 1.0), Candidate("deep19", 10, 5.0, 2.0), Candidate("fresh", 10, 5.0, 3.0)]
    # fresh has no record of its own: its class's rate over a whole window; deep19 one reuse-free workflow.
    assert get_algorithm("reuse-rate").select(history, cands, 20) == ["fresh", "deep19"]


def test_history_with_dataset_documents() -> None:
    h = Workload([["a", "b"]]).with_datasets(
        [
            {
                "_id": "a",
                "state": "STORED",
                "lineage": {"parents": []},
                "compute_seconds_total": 6.0,
                "compute_count": 2,
            },
            {"_id": "b", "state": "DELETED", "lineage": {"parents": ["a"]}, "compute_count": 0},
            {"_id": "c", "state": "TO_LEAF", "lineage.parents": ["b"]},  # as nx-27017 projects it
        ]
    )
    assert h.workflows == [["a", "b"]]
    assert h.parents == {"a": [], "b": ["a"], "c": ["b"]}
    assert h.compute_time == {"a": 3.0}
    assert h.stored == {"a", "c"}
    assert h.sublist(0).parents is h.parents
