"""How long each decision algorithm takes on rolling windows of 10^3 to 10^6 actions.

Builds a synthetic history shaped like the generator's (workflows of ~10 actions, half of
them repeated from earlier workflows, each new action with up to three parents among
recent datasets), with lineage, compute times and the present set as the decision
service would pass them; a tenth of the distinct datasets are STORED candidates, and the
algorithm must free a tenth of their bytes. Prints seconds per ``select`` call.

    python benchmarks/decision_scale.py [--sizes 1000,10000,100000,1000000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.eviction import REGISTRY, Candidate, Workload, get_algorithm


def synthetic(actions: int, seed: int = 0) -> tuple[Workload, list[Candidate], int]:
    rng = random.Random(seed)
    hashes: list[str] = []
    parents: dict[str, list[str]] = {}
    workflows: list[list[str]] = []
    n = 0
    while n < actions:
        size = max(1, min(actions - n, int(abs(rng.gauss(10, 4)))))
        wf: list[str] = []
        for _ in range(size):
            if hashes and rng.random() < 0.5:
                wf.append(hashes[int(len(hashes) * rng.random() ** 0.3)])  # recent ones more often
            else:
                h = f"{len(hashes):016x}"
                pool = wf[-5:] + hashes[-50:]
                parents[h] = rng.sample(pool, k=min(len(pool), rng.randint(0, 3)))
                hashes.append(h)
                wf.append(h)
        workflows.append(wf)
        n += size
    times = {h: rng.uniform(1, 20) for h in hashes}
    stored_idx = rng.sample(range(len(hashes)), k=max(1, len(hashes) // 10))
    candidates = [Candidate(hashes[i], rng.randint(1, 20) * 1024**2, times[hashes[i]], float(i)) for i in stored_idx]
    leaves = {hashes[i] for i in rng.sample(range(len(hashes)), k=len(hashes) // 10)}
    stored = {c.hash for c in candidates} | leaves
    to_free = sum(c.size for c in candidates) // 10
    return Workload(workflows, parents, times, stored), candidates, to_free


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--algorithms", default=",".join(sorted(REGISTRY)))
    args = ap.parse_args()
    names = args.algorithms.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'actions':>9} {'candidates':>10} " + " ".join(f"{n:>10}" for n in names) + "   (seconds per decision)")
    for size in sizes:
        history, candidates, to_free = synthetic(size)
        cells = []
        for name in names:
            best = float("inf")
            for _ in range(args.repeat):
                algo = get_algorithm(name)
                t0 = time.perf_counter()
                chosen = algo.select(history, candidates, to_free)
                best = min(best, time.perf_counter() - t0)
                assert sum(c.size for c in candidates if c.hash in set(chosen)) >= to_free
            cells.append(f"{best:>10.3f}")
        print(f"{size:>9} {len(candidates):>10} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
