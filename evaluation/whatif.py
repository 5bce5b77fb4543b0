"""What-if: replay this installation's recorded history through the simulator under any
algorithm and capacity, beside what actually happened.

The history is read from MongoDB: ``workflows`` (the submitted ``definition`` and
``created_at``), ``actions`` (each action's ``hash``, ``decision`` and measured
``seconds``) and ``datasets`` (``size`` and compute statistics by hash). Each workflow
is replayed with the hashes production gave its actions (they include the action
folders' fingerprints, which the definition alone does not), and each action is priced
with its dataset's size and mean compute time.

Only SUCCEEDED workflows are replayed (a failed or killed one did not produce what the
simulator would assume); "actual" sums the measured seconds of their computed actions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluation.simulator import Cost, PreparedWorkflow, no_reuse_seconds, prepare_one, simulate
from shared.config import Settings
from shared.eviction import REGISTRY, get_algorithm
from shared.store import Store
from shared.store import datasets as ds
from shared.store.actions import of_workflows
from shared.store.embedded import store_for
from shared.store.workflows import definitions


@dataclass
class Recorded:
    workflows: list[PreparedWorkflow]
    actual_seconds: float
    actual_computed: int
    actions: int
    skipped: dict[str, int] = field(default_factory=dict)  # state -> workflows not replayed
    unpriced: int = 0  # actions whose time or size was never measured (priced at 0)
    actual_computed_ids: list[set[Any]] = field(default_factory=list)


@dataclass(frozen=True)
class WhatIfRow:
    series: str
    seconds: float
    computed: int
    deletions: int = 0
    computed_ids: tuple[frozenset[Any], ...] = ()


@dataclass
class WhatIfReport:
    recorded: Recorded
    capacity: int
    threshold: float
    target: float
    history_window: int
    configured: str
    rows: list[WhatIfRow]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


async def load_recorded(store: Store, since: float | None = None) -> Recorded:
    query: dict[str, Any] = {"created_at": {"$gte": since}} if since is not None else {}
    docs = [w async for w in store.workflows.find(query, {"created_at": 1, "state": 1, "name": 1})]
    docs.sort(key=lambda w: (w.get("created_at") or 0.0, w["_id"]))
    succeeded = [w["_id"] for w in docs if w.get("state") == "SUCCEEDED"]
    bodies = {d["_id"]: d["body"] async for d in definitions(store).find({"_id": {"$in": succeeded}}, {"body": 1})}
    for w in docs:
        if w["_id"] in bodies:
            w["definition"] = bodies[w["_id"]]
    skipped: dict[str, int] = defaultdict(int)
    kept = []
    for w in docs:
        if w.get("state") == "SUCCEEDED" and isinstance(w.get("definition"), dict):
            kept.append(w)
        else:
            skipped[str(w.get("state"))] += 1
    ids = [w["_id"] for w in kept]
    by_workflow: dict[str, list[dict[str, Any]]] = defaultdict(list)
    fields = {"workflow_id": 1, "local_id": 1, "hash": 1, "decision": 1, "seconds": 1, "size": 1, "managed": 1}
    async for a in of_workflows(store, ids, fields):
        by_workflow[a["workflow_id"]].append(a)
    hashes = {a["hash"] for acts in by_workflow.values() for a in acts}
    datasets = await ds.get_many(store, hashes, {"size": 1, "compute_seconds_total": 1, "compute_count": 1})
    measured: dict[str, list[float]] = defaultdict(list)
    sizes: dict[str, list[int]] = defaultdict(list)
    for acts in by_workflow.values():
        for a in acts:
            if a.get("decision") == "compute" and a.get("seconds") is not None:
                measured[a["hash"]].append(float(a["seconds"]))
            if a.get("size") is not None:
                sizes[a["hash"]].append(int(a["size"]))

    rec = Recorded([], 0.0, 0, 0, dict(skipped))
    for w in kept:
        acts = {a["local_id"]: a for a in by_workflow.get(w["_id"], [])}
        if not acts:
            rec.skipped["no actions"] = rec.skipped.get("no actions", 0) + 1
            continue
        prices: dict[Any, Cost] = {}

        def price(action: Any, h: str, acts: dict[Any, dict[str, Any]] = acts, prices: dict = prices) -> Cost:
            a = acts.get(action.id, {})
            d = datasets.get(h, {})
            seconds = ds.mean_seconds(d)
            if seconds is None:
                seconds = _mean(measured.get(h, []))
            if not a.get("managed", True) and a.get("seconds") is not None:
                seconds = float(a["seconds"])  # an unmanaged output has no dataset: its own run
            size = d.get("size")
            if size is None:
                size = _mean(sizes.get(h, []))
            if seconds is None or size is None:
                rec.unpriced += 1
            prices[action.id] = Cost(int(size or 0), float(seconds or 0.0))
            return prices[action.id]

        spec_hashes = {lid: a["hash"] for lid, a in acts.items()}
        try:
            prepared = prepare_one(w["definition"], price, hashes=spec_hashes)
        except (ValueError, KeyError):
            # A definition that no longer parses, or actions missing from the record.
            rec.skipped["unreadable"] = rec.skipped.get("unreadable", 0) + 1
            continue
        rec.workflows.append(prepared)
        computed = {lid for lid, a in acts.items() if a.get("decision") == "compute"}
        rec.actual_computed_ids.append(computed)
        rec.actual_computed += len(computed)
        rec.actions += len(acts)
        rec.actual_seconds += sum(float(acts[lid].get("seconds") or 0.0) for lid in computed)
    return rec


def replay(
    rec: Recorded,
    algorithms: list[str],
    capacity: int,
    threshold: float,
    target: float,
    history_window: int,
    configured: str,
) -> WhatIfReport:
    unlimited = simulate(rec.workflows, None, None)
    rows = [
        WhatIfRow("no reuse", no_reuse_seconds(rec.workflows), rec.actions),
        WhatIfRow(
            "unlimited storage",
            unlimited.seconds,
            sum(len(w.computed) for w in unlimited.workflows),
            0,
            tuple(frozenset(s) for s in unlimited.computed_sets()),
        ),
    ]
    for name in algorithms:
        r = simulate(rec.workflows, name, capacity, threshold, target, history_window)
        rows.append(
            WhatIfRow(
                name,
                r.seconds,
                sum(len(w.computed) for w in r.workflows),
                r.deletions,
                tuple(frozenset(s) for s in r.computed_sets()),
            )
        )
    return WhatIfReport(rec, capacity, threshold, target, history_window, configured, rows)


async def what_if(
    settings: Settings,
    algorithms: list[str] | None = None,
    capacity: int | None = None,
    since: float | None = None,
    threshold: float | None = None,
    target: float | None = None,
) -> WhatIfReport:
    """Connect as the services do (``PINGO_MONGO_URL``, else the embedded server), read
    the recorded history and replay it."""
    algorithms = algorithms or sorted(REGISTRY)
    for name in algorithms:
        get_algorithm(name)  # a clear error before any connection
    threshold = settings.threshold if threshold is None else threshold
    target = settings.target if target is None else target
    if not 0 < target <= threshold:
        raise ValueError(f"need 0 < target <= threshold, got target {target} and threshold {threshold}")
    async with store_for(settings, indexes=False) as store:
        rec = await load_recorded(store, since)
    cap = settings.capacity_bytes if capacity is None else capacity
    return replay(rec, algorithms, cap, threshold, target, settings.history_window, settings.algorithm)


def render(report: WhatIfReport, human: Callable[[float | None], str]) -> str:
    rec = report.recorded
    skipped = ", ".join(f"{n} {state}" for state, n in sorted(rec.skipped.items()))
    lines = [
        f"what-if over {len(rec.workflows)} recorded workflows ({rec.actions} actions)"
        + (f"; not replayed: {skipped}" if skipped else ""),
        f"capacity {human(report.capacity)}, decision past {report.threshold:.0%} down to {report.target:.0%}, "
        f"window {report.history_window} actions; configured algorithm: {report.configured}",
    ]
    if rec.unpriced:
        lines.append(f"note: {rec.unpriced} actions were never measured (priced at 0 s / 0 B)")
    lines.append(f"{'':<22} {'compute s':>11} {'vs actual':>10} {'computed':>9} {'reused':>7} {'deleted':>8}")
    lines.append(
        f"{'actually happened':<22} {rec.actual_seconds:>11.1f} {'':>10} {rec.actual_computed:>9} "
        f"{rec.actions - rec.actual_computed:>7} {'':>8}"
    )
    for row in report.rows:
        delta = row.seconds - rec.actual_seconds
        label = row.series + (" (configured)" if row.series == report.configured else "")
        lines.append(
            f"{label:<22} {row.seconds:>11.1f} {delta:>+10.1f} {row.computed:>9} {rec.actions - row.computed:>7} "
            f"{row.deletions if row.series not in ('no reuse', 'unlimited storage') else '':>8}"
        )
    return "\n".join(lines)
