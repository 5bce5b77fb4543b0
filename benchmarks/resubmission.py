"""How long submitting a workflow takes when its work exists already: every action
reused (its output stored), or every action following the same computation still in
flight in another workflow.

Both on ``pingo dev`` (embedded defaults) on a fresh data directory, N no-op actions
without edges (``mkdir -p``, as benchmarks/peers.py runs them):

1. *reused*: the workflow is run to its end, then submitted again ``--repeat`` times;
   each answer (201) names every action REUSED.
2. *following*: on a server that submits nothing (``PINGO_SUBMITTERS=0``), the workflow
   is submitted, then submitted again: every action of the second follows the first's.

Prints the time to the 201 of each, and per action. docs/performance.md reads these.

    python benchmarks/resubmission.py [--actions 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections import Counter

from devserver import call, dev_server
from peers import noop, run_workflow


def submit(base: str, name: str, actions: list[dict]) -> tuple[float, Counter]:
    started = time.perf_counter()
    status, out = call(f"{base}/api/v1/workflows", json.dumps({"name": name, "actions": actions}).encode())
    took = time.perf_counter() - started
    if status != 201:
        sys.exit(f"{name}: HTTP {status}: {out}")
    return took, Counter(a["reason"] or a["decision"] for a in out["actions"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.actions
    print(f"{n} actions without edges, pingo dev, embedded nx-27017")
    with dev_server() as (base, data):
        actions = [noop(f"again-{uuid.uuid4().hex[:8]}", i) for i in range(n)]
        run_workflow(base, data, "first", actions, "first run")
        print(file=sys.stderr)
        times = []
        for r in range(args.repeat):
            took, reasons = submit(base, f"again-{r}", actions)
            times.append(took)
            print(f"  reused, submission {r + 1}: {took:.2f} s ({dict(reasons)})", file=sys.stderr)
        reused = statistics.median(times)
    with dev_server(SUBMITTERS="0") as (base, _):
        actions = [noop(f"follow-{uuid.uuid4().hex[:8]}", i) for i in range(n)]
        first, _ = submit(base, "computing", actions)
        following, reasons = submit(base, "following", actions)
        print(f"  following: {following:.2f} s ({dict(reasons)})", file=sys.stderr)
    print(f"{'submission':<38} {'s':>6} {'ms/action':>10}")
    for label, took in (
        ("computing everything (nothing stored)", first),
        (f"everything reused (median of {args.repeat})", reused),
        ("everything following another workflow", following),
    ):
        print(f"{label:<38} {took:>6.2f} {took / n * 1000:>10.2f}")


if __name__ == "__main__":
    main()
