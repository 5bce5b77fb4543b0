"""The workflow-history generator of thesis section 4.1.1 and Appendix B.

An *action generator* draws a pool of ``nb_actions`` actions, each with an output size
(MB) and a compute time (s). The *workflow generator* then builds workflows one after
another: each takes some actions from the union of the previous workflows and new actions
from the pool, and wires them into a DAG with the greedy child/parent matching of
Appendix B. The history ends when the pool is used up (the thesis's "around 60"
workflows: 300 actions, about 5 new per workflow).

Where the printed algorithm is ambiguous or wrong, the evident intent is followed; each
such place says so in a comment marked DEPARTURE. The main one: an action taken again
from previous workflows comes with all its ancestors, so that it has the same parents,
hence the same lineage hash, and can really be reused (Appendix B keeps only shortest
paths between the sampled actions, which would give a recurring action different
parents, i.e. a different dataset).

One numpy ``Generator`` seeded once drives every draw, so a seed reproduces a history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from evaluation.parameters import GeneratorParams, WorkflowTemplate

ALPHABET = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
# The SHELL rendering used for runs on the real system: examples/jobs/synth.py's contract
# is ``LABEL SECONDS SIZE_KB`` (then the inputs and the output, appended by Pingo).
SYNTH_FOLDER = "examples/jobs"
SYNTH_COMMAND = ["python3", "synth.py"]


@dataclass(frozen=True)
class PoolAction:
    """One action of the pool: the same definition wherever it appears."""

    id: int
    size_mb: float
    time_s: float
    unique: str  # Figure 3.2's uniqueRandomInput: makes the definition this action's own


@dataclass(frozen=True)
class GeneratedWorkflow:
    index: int
    parents: dict[int, tuple[int, ...]]  # every action of the workflow, in topological order
    previous: frozenset[int]  # the actions taken from previous workflows

    @property
    def size(self) -> int:
        return len(self.parents)

    @property
    def share(self) -> float:
        return len(self.previous) / len(self.parents)

    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        for a, ps in self.parents.items():
            g.add_node(a)
            g.add_edges_from((p, a) for p in ps)
        return g


@dataclass(frozen=True)
class ShellScale:
    """How a generated action becomes a synth.py run: thesis seconds and MB scaled down."""

    seconds_per_second: float = 0.01
    kb_per_mb: float = 4.0
    # Sizes are rounded to a multiple of this: a budget set between multiples then
    # cannot be crossed by the few hundred bytes of synth's _lineage file.
    quantum_kb: int = 1

    def seconds(self, a: PoolAction) -> str:
        return f"{a.time_s * self.seconds_per_second:.3f}"

    def size_kb(self, a: PoolAction) -> int:
        q = self.quantum_kb
        return q * max(1, round(a.size_mb * self.kb_per_mb / q))


@dataclass(frozen=True)
class History:
    seed: int
    pool: list[PoolAction]
    workflows: list[GeneratedWorkflow]
    template: WorkflowTemplate

    def command_line(self) -> list[dict[str, Any]]:
        """The workflows as the original generator wrote them (Figure 3.2)."""
        return [self._workflow(w, self._command_line_action) for w in self.workflows]

    def shell(self, scale: ShellScale | None = None) -> list[dict[str, Any]]:
        """The same history as SHELL actions running examples/jobs/synth.py."""
        scale = scale or ShellScale()
        return [self._workflow(w, lambda a, ps: self._shell_action(a, ps, scale)) for w in self.workflows]

    def _workflow(self, w: GeneratedWorkflow, render) -> dict[str, Any]:
        return {
            "name": f"{self.template.name}-{w.index}",
            "actions": [render(self.pool[a], list(ps)) for a, ps in w.parents.items()],
        }

    def _command_line_action(self, a: PoolAction, parents: list[int]) -> dict[str, Any]:
        return {
            "actionId": a.id,
            "name": f"action{a.id}",
            "type": "COMMAND_LINE",
            "actionFolder": self.template.action_folder,
            "mainClassName": self.template.main_class_name,
            "parentActions": parents,
            "forceComputation": False,
            "additionalInput": [
                {"key": "sizeInMB", "value": f"{a.size_mb:.6f}"},
                {"key": "timeInSeconds", "value": f"{a.time_s:.6f}"},
                {"key": "nameNode", "value": self.template.name_node},
                {"key": "uniqueRandomInput", "value": a.unique},
            ],
        }

    @staticmethod
    def _shell_action(a: PoolAction, parents: list[int], scale: ShellScale) -> dict[str, Any]:
        return {
            "actionId": a.id,
            "name": f"action{a.id}",
            "type": "SHELL",
            "actionFolder": SYNTH_FOLDER,
            "command": list(SYNTH_COMMAND),
            "parentActions": parents,
            "additionalInput": [
                {"key": "label", "value": f"a{a.id}-{a.unique}"},
                {"key": "seconds", "value": scale.seconds(a)},
                {"key": "sizeKB", "value": str(scale.size_kb(a))},
            ],
        }


def _count(rng: np.random.Generator, mean: float, std: float) -> int:
    # Appendix B: int(abs(np.random.normal(mean, std))).
    return int(abs(rng.normal(mean, std)))


def action_pool(params: GeneratorParams, rng: np.random.Generator) -> list[PoolAction]:
    """The action generator: sizes and times from their normal distributions."""
    pool = []
    for i in range(params.nb_actions):
        # abs() as Appendix B does for counts; a floor keeps every output non-empty.
        size = max(0.001, abs(rng.normal(params.action_size.mean, params.action_size.std)))
        time = max(0.001, abs(rng.normal(params.action_time.mean, params.action_time.std)))
        unique = "".join(rng.choice(ALPHABET, 10))
        pool.append(PoolAction(i, round(size, 6), round(time, 6), unique))
    return pool


def previous_actions(ancestors: dict[int, frozenset[int]], n: int, rng: np.random.Generator) -> set[int]:
    """Step 1: about ``n`` actions of the previous workflows, closed under ancestors.

    DEPARTURE: Appendix B samples n actions and adds one shortest path between related
    pairs; its loop also mixes indexes of ``C`` with positions in it, and drops a sampled
    action that has no path to another. The text's intent is that "the nodes in between
    are also included". Taking each sampled action with all its ancestors includes every
    node in between, and is what makes the action's lineage (and hash) the one it had
    before, so that it can be reused. Actions are tried in random order and kept when
    their closure still fits in ``n``, so the share of previous actions stays at the
    parameter (deep actions, whose closure rarely fits, come in through their descendants
    less often than roots; the thesis's sampling has no such bias but no reuse either).
    """
    chosen: set[int] = set()
    if n <= 0 or not ancestors:
        return chosen
    for v in rng.permutation(len(ancestors)):
        closure = ancestors[int(v)] | {int(v)}
        if len(chosen | closure) <= n:
            chosen |= closure
            if len(chosen) == n:
                break
    return chosen


def build_workflow(
    union: nx.DiGraph, previous: set[int], new: list[int], params: GeneratorParams, rng: np.random.Generator
) -> nx.DiGraph:
    """Steps 2-3 of Appendix B: draw children/parents counts and wire greedily."""
    children: dict[int, int] = {}
    parents_left: dict[int, int] = {}
    for a in sorted(previous):
        children[a] = _count(rng, params.nb_children.mean, params.nb_children.std)
    for a in new:
        children[a] = _count(rng, params.nb_children.mean, params.nb_children.std)
        parents_left[a] = _count(rng, params.nb_parent.mean, params.nb_parent.std)

    # 3.1: the previous actions with the edges they had (all their parents are included).
    wf = nx.DiGraph(union.subgraph(previous))
    # 3.2: previous actions adopt new children; new actions adopt new children. A previous
    # action never gets a new parent, so its lineage is unchanged.
    for a in sorted(previous):
        _adopt(wf, a, new, children[a], parents_left, rng, check_cycle=False)
    for a in new:
        wf.add_node(a)
        _adopt(wf, a, new, children[a], parents_left, rng, check_cycle=True)
    return wf


def _adopt(
    wf: nx.DiGraph,
    a: int,
    new: list[int],
    wanted: int,
    parents_left: dict[int, int],
    rng: np.random.Generator,
    check_cycle: bool,
) -> None:
    order = rng.permutation(len(new))
    i = j = 0
    while i < wanted and j < len(new):
        t = new[int(order[j])]
        j += 1
        if parents_left[t] <= 0 or t == a:
            continue
        # An edge a -> t closes a cycle exactly when t is already an ancestor of a.
        if check_cycle and t in nx.ancestors(wf, a):
            continue
        parents_left[t] -= 1
        wf.add_edge(a, t)
        i += 1


def generate(params: GeneratorParams, seed: int | None = None) -> History:
    seed = params.seed if seed is None else seed
    rng = np.random.default_rng(seed)
    pool = action_pool(params, rng)
    share = params.previous_actions
    if isinstance(share.mean, list):
        raise ValueError("previous_actions.mean is a list: generate one history per value (--share)")
    union = nx.DiGraph()
    ancestors: dict[int, frozenset[int]] = {}
    workflows: list[GeneratedWorkflow] = []
    while len(ancestors) < params.nb_actions:
        # DEPARTURE: the printed listing does not show how a workflow's size and number of
        # previous actions are drawn; the text says "an average of 10 actions per workflow",
        # each "repeating half the actions from previous workflows": round(|N(mean, std)|)
        # actions (at least one), of which round(size x clip(N(share), 0, 1)) previous.
        size = max(1, round(abs(rng.normal(params.workflow_size.mean, params.workflow_size.std))))
        fraction = min(1.0, max(0.0, float(rng.normal(share.mean, share.std))))
        previous = previous_actions(ancestors, min(size, round(size * fraction)), rng)
        # DEPARTURE: new actions fill the workflow up to its size (Appendix B subtracts the
        # requested, not the obtained, number of previous actions), and there is at least
        # one, so the history always ends when the pool is used up.
        first = len(ancestors)
        new = list(range(first, min(first + max(1, size - len(previous)), params.nb_actions)))
        wf = build_workflow(union, previous, new, params, rng)
        order = list(nx.lexicographical_topological_sort(wf))
        for a in order:
            if a not in ancestors:
                ancestors[a] = frozenset().union(*([ancestors[p] | {p} for p in wf.predecessors(a)] or [frozenset()]))
        union = nx.compose(union, wf)
        workflows.append(
            GeneratedWorkflow(
                index=len(workflows),
                parents={a: tuple(sorted(wf.predecessors(a))) for a in order},
                previous=frozenset(previous),
            )
        )
    return History(seed=seed, pool=pool, workflows=workflows, template=params.workflow)


def main(argv: list[str] | None = None) -> int:
    """``python -m evaluation.generator``: write a generated history as workflow files."""
    import argparse
    import json
    from pathlib import Path

    from evaluation.parameters import ParamsError, load_params

    ap = argparse.ArgumentParser(prog="python -m evaluation.generator", description=main.__doc__)
    ap.add_argument("params", help="parameters JSON (thesis Appendix C), e.g. evaluation/params/experiment1.json")
    ap.add_argument("--seed", type=int, help="default: the file's seed")
    ap.add_argument("--share", type=float, help="share of previous actions (needed if the file lists several)")
    ap.add_argument("--out", required=True, help="directory for workflow-NNN.json, in submission order")
    ap.add_argument("--shell", action="store_true", help="SHELL actions running examples/jobs/synth.py")
    ap.add_argument("--seconds-per-second", type=float, default=0.01, help="--shell: time scale (default 0.01)")
    ap.add_argument("--kb-per-mb", type=float, default=4.0, help="--shell: size scale (default 4 KB per MB)")
    args = ap.parse_args(argv)
    try:
        params = load_params(args.params)
        if args.share is not None:
            params = params.with_share(args.share)
        history = generate(params, args.seed)
    except (ParamsError, ValueError) as exc:
        ap.error(str(exc))
    scale = ShellScale(args.seconds_per_second, args.kb_per_mb)
    bodies = history.shell(scale) if args.shell else history.command_line()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, body in enumerate(bodies):
        (out / f"workflow-{i:03d}.json").write_text(json.dumps(body, indent=2) + "\n")
    print(f"{len(bodies)} workflows ({sum(len(b['actions']) for b in bodies)} actions, seed {history.seed}) in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
