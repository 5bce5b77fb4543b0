"""Does Pingo stay as fast when its store holds a long history? The same measures on an
empty store and on one that already holds ``--history`` actions (default 100 000).

Two ``pingo dev`` servers run side by side (each its own embedded nx-27017, local
executor): one on an empty store, one on a store seeded with the history. Each measure:

1. the chain hop (a chain of ``--chain`` no-op actions; child start minus parent end,
   read as in benchmarks/peers.py: the birth time of each output folder);
2. throughput: ``--independent`` no-op actions at once, jobs per second;
3. idle CPU: the server's processes (the dev process, its embedded store, the job
   runner) over ``--idle`` seconds with nothing to do, as a share of one core.

The history is written straight into the store: copies of a finished 100-action workflow
(ten chains of ten), each copy with its own workflow, action and dataset ids and lineage
hashes, its datasets DELETED, as an installation's old runs are.

The machine's load moves by half within a minute, so one measure of each side, one after
the other, compares two moments as much as two stores. The sides are measured in turns
(empty, full, full, empty, empty, full ...; ``--rounds`` measures each), and each figure
is the median over a side's rounds (the hops of all its chains pooled): the ratio of those
medians, with the machine's load (1-minute average) at each measure printed beside them
(goal: every figure within 1.25x, idle under 2 % of a core).

    .venv/bin/python benchmarks/history.py [--history 100000] [--rounds 4] [--chain 50] [--independent 500] [--idle 20]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from devserver import dev_server
from peers import birth_times, hop_figures, hops, noop, pids_with, process_cpu, run_workflow
from pymongo import MongoClient

from shared.store.embedded import EmbeddedMongo

TEMPLATE_CHAINS, TEMPLATE_LENGTH = 10, 10
INSERT_BATCH = 5000


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += process_cpu(pid)[0]
    return total


@dataclasses.dataclass
class Measure:
    hops: list[float]
    per_second: float
    idle_cpu: float
    load: tuple[float, float]  # the 1-minute load average when it started and ended


def measure(base: str, data: Path, chain_n: int, indep_n: int, idle: float, label: str) -> Measure:
    load = os.getloadavg()[0]
    tag = uuid.uuid4().hex[:8]
    actions = [noop(f"hop-{tag}", i, i - 1 if i else None) for i in range(chain_n)]
    _, wf = run_workflow(base, data, f"chain-{tag}", actions, f"{label}: chain")
    by = {a["localId"]: a for a in wf["actions"]}
    chain_hops = hops(birth_times([Path(by[i]["outputPath"]) for i in range(chain_n)]))
    actions = [noop(f"noop-{tag}", i) for i in range(indep_n)]
    wall, _ = run_workflow(base, data, f"independent-{tag}", actions, f"{label}: independent")
    time.sleep(3.0)  # the last events and sweeps of the runs above
    port = int(base.rsplit(":", 1)[1])
    pids = pids_with(f"--port {port}", str(data))  # the dev process, its store, the job runner
    say(f"{label}: idle for {idle:.0f} s ({len(pids)} processes)")
    before, t0 = cpu_seconds(pids), time.monotonic()
    time.sleep(idle)
    busy = (cpu_seconds(pids) - before) / (time.monotonic() - t0)
    return Measure(chain_hops, indep_n / wall, busy, (load, os.getloadavg()[0]))


def turns(rounds: int) -> list[str]:
    """Which side each measure is of: E F F E E F F E ..., ``rounds`` of each, so that a
    load drifting one way through the run weighs on both sides alike."""
    return [("E", "F", "F", "E")[i % 4] for i in range(2 * rounds)]


def figures(measures: list[Measure]) -> dict[str, float]:
    median, p90, p99 = hop_figures([h for m in measures for h in m.hops])
    return {
        "hop_median": median, "hop_p90": p90, "hop_p99": p99,
        "per_second": statistics.median(m.per_second for m in measures),
        "idle_cpu": statistics.median(m.idle_cpu for m in measures),
    }  # fmt: skip


def template(db: Any) -> tuple[dict, list[dict], list[dict]]:
    wf = db.workflows.find_one({"name": {"$regex": "^template-"}})
    actions = list(db.actions.find({"workflow_id": wf["_id"]}))
    datasets = list(db.datasets.find({"_id": {"$in": [a["hash"] for a in actions]}}))
    return wf, actions, datasets


def seed(url: str, n: int) -> int:
    """Copies of the template workflow until ``n`` actions are stored; returns how many were added."""
    client = MongoClient(url)
    db = client["pingo"]
    wf, actions, datasets = template(db)
    copies = max(1, n // len(actions))
    t0 = time.time()
    batch: dict[str, list[dict]] = {"workflows": [], "actions": [], "datasets": []}

    def flush() -> None:
        for name, docs in batch.items():
            if docs:
                db[name].insert_many(docs, ordered=False)
                docs.clear()

    old_wf = wf["_id"]
    for c in range(copies):
        new_wf = f"wf-h{c:07d}"

        def aid(old: str, new_wf: str = new_wf) -> str:
            return new_wf + old[len(old_wf) :]

        def digest(old: str, c: int = c) -> str:
            return hashlib.sha256(f"{c}:{old}".encode()).hexdigest()

        batch["workflows"].append({**wf, "_id": new_wf, "name": f"history-{c}"})
        for a in actions:
            batch["actions"].append({
                **a, "_id": aid(a["_id"]), "workflow_id": new_wf, "hash": digest(a["hash"]),
                "parents": [aid(p) for p in a.get("parents", [])], "children": [aid(x) for x in a.get("children", [])],
                "claims": [], "followers": [],
            })  # fmt: skip
        for d in datasets:
            batch["datasets"].append({
                **d, "_id": digest(d["_id"]), "hash": digest(d["_id"]), "state": "DELETED", "claims": [],
                "producers": [],
            })  # fmt: skip
        if len(batch["actions"]) >= INSERT_BATCH:
            flush()
            done = (c + 1) * len(actions)
            print(f"\rseeding: {done}/{copies * len(actions)} actions, {time.time() - t0:5.1f} s",
                  end="", file=sys.stderr, flush=True)  # fmt: skip
    flush()
    print(file=sys.stderr)
    client.close()
    return copies * len(actions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history", type=int, default=100_000, help="actions stored on the full side")
    ap.add_argument("--rounds", type=int, default=4, help="measures of each side, taken in turns")
    ap.add_argument("--chain", type=int, default=50)
    ap.add_argument("--independent", type=int, default=500)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measured")
    args = ap.parse_args()
    with dev_server() as empty, dev_server() as full:
        tag = uuid.uuid4().hex[:8]
        shape = [
            noop(f"tpl-{tag}", c * TEMPLATE_LENGTH + i, c * TEMPLATE_LENGTH + i - 1 if i else None)
            for c in range(TEMPLATE_CHAINS)
            for i in range(TEMPLATE_LENGTH)
        ]
        for side, (base, data) in (("empty", empty), ("full", full)):
            run_workflow(base, data, f"template-{tag}", shape, f"{side} store: template workflow")
        added = seed(EmbeddedMongo(full[1]).url, args.history)
        say(f"seeded {added} actions")
        taken: dict[str, list[Measure]] = {"E": [], "F": []}
        for i, side in enumerate(turns(args.rounds)):
            base, data = empty if side == "E" else full
            label = f"[{i + 1}/{2 * args.rounds}] " + ("empty store" if side == "E" else f"{added} actions stored")
            m = measure(base, data, args.chain, args.independent, args.idle, label)
            say(f"{label}: hop median {statistics.median(m.hops) * 1000:.1f} ms, {m.per_second:.1f} jobs/s, "
                f"idle {m.idle_cpu * 100:.1f} % of a core, load {m.load[0]:.1f} -> {m.load[1]:.1f}")  # fmt: skip
            taken[side].append(m)
    e, f = figures(taken["E"]), figures(taken["F"])
    rows = [
        ("chain hop, median (ms)", "hop_median", 1000),
        ("chain hop, p90 (ms)", "hop_p90", 1000),
        ("chain hop, p99 (ms)", "hop_p99", 1000),
        (f"{args.independent} independent, jobs/s", "per_second", 1),
        ("idle CPU, % of a core", "idle_cpu", 100),
    ]
    print(f"| measure | empty store | {added} actions stored | ratio |")
    print("|---|---|---|---|")
    for label, key, scale in rows:
        ratio = f[key] / e[key] if e[key] else float("nan")
        print(f"| {label} | {e[key] * scale:.1f} | {f[key] * scale:.1f} | {ratio:.2f} |")
    loads = {side: [x for m in ms for x in m.load] for side, ms in taken.items()}
    print(
        f"(medians of {args.rounds} measures a side, taken in turns {' '.join(turns(args.rounds))}; hops pooled; "
        f"load {min(loads['E']):.1f}-{max(loads['E']):.1f} empty, {min(loads['F']):.1f}-{max(loads['F']):.1f} full; "
        f"{os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
