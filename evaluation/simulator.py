"""Replays a workflow history under a storage budget with the production planner
(``shared.planning.plan``) and the production decision algorithms (``shared.eviction``).

For each workflow, in order: hash it (``shared.hashing.workflow_hashes``), plan it against
the datasets present (an in-memory ``DatasetGate``), charge the compute time of the
actions that run, store their outputs (STORED for intermediates, LEAF for leaves), then
let the algorithm free space as the decision service would.

Datasets follow production's rules (shared/store/datasets.py): a STORED dataset reused as
a leaf becomes LEAF, a LEAF stays LEAF even where it is an intermediate, only STORED
datasets count against the budget and only they are candidates. Between workflows no
action is pending, so no dataset is claimed.

The decision runs once after each workflow, when every action has ended: this is the
thesis's protocol (each workflow waits for the previous one) with the decision at the
only point where the system is quiet. Production also wakes the decision service each
time a dataset is stored, i.e. in the middle of a workflow, when the running workflow's
datasets are claimed; tests/system/test_evaluation_system.py holds the decision lease while a
workflow runs so that the real system decides at the same points as this simulator.

Budget: usage is the bytes of STORED datasets; past ``threshold x capacity`` the
algorithm is asked to free ``usage - target x capacity`` (the decision service's
formula). The experiments use threshold = target = 1.0: capacity is a hard limit that
is restored after each workflow (the thesis's model), and nothing is freed early.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from shared.eviction import Algorithm, Candidate, Workload, get_algorithm
from shared.eviction.budget import bytes_to_free
from shared.hashing import workflow_hashes
from shared.planning import plan
from shared.workflow_spec import ActionId, ActionSpec, WorkflowSpec, parse_workflow

MB = 1024 * 1024
KB = 1024


@dataclass(frozen=True)
class Cost:
    size: int  # bytes of the action's output
    seconds: float  # time to compute it


CostModel = Callable[[ActionSpec, str], Cost]


def params_cost(action: ActionSpec, h: str) -> Cost:
    """Size and time written in the action itself: the generator's COMMAND_LINE form
    (sizeInMB, timeInSeconds) or synth.py's (seconds, sizeKB: the bytes synth writes)."""
    params = {p.key: p.value for p in action.additionalInput if p.key}
    try:
        if "sizeInMB" in params:
            return Cost(round(float(params["sizeInMB"]) * MB), float(params["timeInSeconds"]))
        if "sizeKB" in params:
            return Cost(int(float(params["sizeKB"])) * KB, float(params["seconds"]))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"action {action.id!r}: unreadable size/time parameters: {exc}") from None
    raise ValueError(f"action {action.id!r} has neither sizeInMB/timeInSeconds nor sizeKB/seconds parameters")


@dataclass(frozen=True)
class PreparedWorkflow:
    """A workflow parsed, hashed and priced once, replayed under any budget."""

    name: str
    spec: WorkflowSpec
    hashes: dict[ActionId, str]
    costs: dict[ActionId, Cost]

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.costs.values())


def prepare_one(
    body: Any, cost: CostModel = params_cost, hashes: dict[ActionId, str] | None = None
) -> PreparedWorkflow:
    spec, violations = parse_workflow(body)
    if spec is None:
        name = body.get("name") if isinstance(body, dict) else None
        raise ValueError(f"workflow {name!r} is not valid: " + "; ".join(f"{v.loc}: {v.message}" for v in violations))
    hashes = hashes if hashes is not None else workflow_hashes(spec)
    return PreparedWorkflow(spec.name, spec, hashes, {a.id: cost(a, hashes[a.id]) for a in spec.actions})


def prepare(bodies: Iterable[Any], cost: CostModel = params_cost) -> list[PreparedWorkflow]:
    return [prepare_one(b, cost) for b in bodies]


class Datasets:
    """The in-memory ``datasets`` collection: what is present, in which state, at what size."""

    def __init__(self) -> None:
        self.leaf: dict[str, bool] = {}  # present hash -> is LEAF (else STORED)
        self.size: dict[str, int] = {}
        self.seconds_total: dict[str, float] = {}
        self.count: dict[str, int] = {}
        self.mean: dict[str, float] = {}  # compute_seconds_total / compute_count
        self.last_used: dict[str, float] = {}
        self.stored_bytes = 0  # STORED only: the budgeted usage
        self.clock = 0.0  # stands for time.time(): only the order of uses matters

    def touch(self, h: str) -> None:
        self.clock += 1.0
        self.last_used[h] = self.clock

    def reuse(self, h: str, leaf: bool) -> bool:
        """``shared.store.datasets.try_reuse``: a present dataset is reused; a STORED one
        reused as a leaf becomes LEAF and leaves the budget."""
        if h not in self.leaf:
            return False
        if leaf and not self.leaf[h]:
            self.leaf[h] = True
            self.stored_bytes -= self.size[h]
        self.touch(h)
        return True

    def record(self, h: str, cost: Cost, leaf: bool) -> None:
        """``record_output`` after a computation: STORED or LEAF, with its stats."""
        self.seconds_total[h] = self.seconds_total.get(h, 0.0) + cost.seconds
        self.count[h] = self.count.get(h, 0) + 1
        self.mean[h] = self.seconds_total[h] / self.count[h]
        if h in self.leaf:  # only a forced computation recomputes a present dataset
            if not self.leaf[h]:
                self.stored_bytes -= self.size[h]
            leaf = leaf or self.leaf[h]
        self.leaf[h] = leaf
        self.size[h] = cost.size
        if not leaf:
            self.stored_bytes += cost.size

    def delete(self, h: str) -> None:
        assert self.leaf.get(h) is False, f"only STORED datasets may be deleted ({h})"
        del self.leaf[h]
        self.stored_bytes -= self.size[h]

    def candidates(self) -> list[Candidate]:
        return [
            Candidate(h, self.size[h], self.mean.get(h, 0.0), self.last_used.get(h, 0.0))
            for h, is_leaf in sorted(self.leaf.items())
            if not is_leaf
        ]

    @property
    def leaf_bytes(self) -> int:
        return sum(self.size[h] for h, is_leaf in self.leaf.items() if is_leaf)


class MemoryGate:
    """The planner's ``DatasetGate`` over the in-memory datasets (no claims are needed:
    nothing runs concurrently in the simulator)."""

    def __init__(self, datasets: Datasets) -> None:
        self.datasets = datasets

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        return self.datasets.reuse(h, leaf)

    async def try_follow(
        self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool
    ) -> str | None:
        return None  # workflows run one after the other: nothing is ever in flight


def run_now(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never suspends (the planner over ``MemoryGate``) without an
    event loop: the simulator plans thousands of workflows."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the planner suspended: the in-memory gate must not await anything")


class Window:
    """The decision service's rolling window: the last N actions, grouped by workflow."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.workflows: deque[list[str]] = deque()
        self.actions = 0

    def add(self, hashes: list[str]) -> None:
        self.workflows.append(hashes)
        self.actions += len(hashes)
        while self.actions > self.size:
            excess = self.actions - self.size
            oldest = self.workflows[0]
            if len(oldest) <= excess:
                self.workflows.popleft()
                self.actions -= len(oldest)
            else:
                self.workflows[0] = oldest[excess:]
                self.actions -= excess


@dataclass
class WorkflowOutcome:
    name: str
    computed: list[ActionId]  # local ids of the actions that ran
    seconds: float
    deleted: list[str] = field(default_factory=list)


@dataclass
class SimulationResult:
    algorithm: str
    capacity: int | None  # bytes; None: unlimited
    seconds: float
    workflows: list[WorkflowOutcome]
    peak_stored_bytes: int
    leaf_bytes: int
    deletions: int

    def computed_sets(self) -> list[set[ActionId]]:
        return [set(w.computed) for w in self.workflows]


def simulate(
    workflows: list[PreparedWorkflow],
    algorithm: str | Algorithm | None,
    capacity: int | None,
    threshold: float = 1.0,
    target: float = 1.0,
    history_window: int = 10_000,
) -> SimulationResult:
    """Replay ``workflows`` in order; ``capacity`` in bytes (``None``: unlimited storage)."""
    algo: Algorithm | None = get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    if capacity is not None and algo is None:
        raise ValueError("a limited capacity needs a decision algorithm")
    ds = Datasets()
    gate = MemoryGate(ds)
    window = Window(history_window)
    parents: dict[str, list[str]] = {}
    outcomes: list[WorkflowOutcome] = []
    total = 0.0
    peak = 0
    deletions = 0
    for wf in workflows:
        planned = run_now(plan(wf.spec, wf.hashes, gate))
        computed: list[ActionId] = []
        seconds = 0.0
        # Production touches computed datasets (prepare_compute) after planning, in plan order.
        for aid, p in planned.items():
            if p.computed:
                computed.append(aid)
                seconds += wf.costs[aid].seconds
                if p.spec.isManaged:
                    ds.touch(p.hash)
        for aid, p in planned.items():
            if p.spec.isManaged:
                # As the decision service reads lineage: for every dataset of the window.
                parents.setdefault(p.hash, list(p.lineage["parents"]))
                if p.computed:
                    ds.record(p.hash, wf.costs[aid], p.leaf)
        total += seconds
        window.add([wf.hashes[a.id] for a in wf.spec.actions])
        peak = max(peak, ds.stored_bytes)
        outcome = WorkflowOutcome(wf.name, computed, seconds)
        to_free = bytes_to_free(ds.stored_bytes, capacity, threshold, target) if capacity is not None else 0
        if algo is not None and to_free:
            outcome.deleted = decide(ds, algo, window, parents, to_free)
            deletions += len(outcome.deleted)
        outcomes.append(outcome)
    name = "unlimited" if algo is None else algo.name
    return SimulationResult(name, capacity, total, outcomes, peak, ds.leaf_bytes, deletions)


def decide(ds: Datasets, algo: Algorithm, window: Window, parents: dict[str, list[str]], to_free: int) -> list[str]:
    """The decision service's ``run_once`` over the in-memory datasets."""
    candidates = ds.candidates()
    # Present = STORED or LEAF (a live view: the algorithm only reads it).
    history = Workload(list(window.workflows), parents, ds.mean, ds.leaf.keys())
    chosen = algo.select(history, candidates, to_free)
    allowed = {c.hash for c in candidates}
    wrong = [h for h in chosen if h not in allowed]
    if wrong or len(set(chosen)) != len(chosen):
        raise AssertionError(f"{algo.name} chose datasets that are not candidates (or twice): {wrong[:5]}")
    for h in chosen:
        ds.delete(h)
    return chosen


def no_reuse_seconds(workflows: list[PreparedWorkflow]) -> float:
    """T_none: every action of every workflow computed."""
    return sum(wf.seconds for wf in workflows)
