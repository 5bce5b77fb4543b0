"""How long a fan-out takes to plan: an action mapped over N items (``forEach``), with a
root before it and a child gathering every item (docs/planning.md, "Fan-out").

Starts ``pingo dev`` (embedded defaults; no submitter, so nothing runs) on a fresh data
directory and POSTs the workflow: first as a dry run (the plan only), then for real (the
201 once validated, expanded, planned and written). The body is small whatever N is: the
definition is written once. The target is a 1,000-way fan-out planned in under 5 s.

    python benchmarks/fanout.py [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from devserver import call, dev_server


def workflow(n: int, tag: str) -> bytes:
    actions = [
        {"id": 1, "name": "source", "type": "SHELL", "command": ["true", tag]},
        {"id": 2, "name": "part", "type": "SHELL", "command": ["true", tag, "{{item}}"], "parentActions": [1],
         "forEach": [f"item-{i}" for i in range(n)]},
        {"id": 3, "name": "gather", "type": "SHELL", "command": ["true", tag], "parentActions": [2]},
    ]  # fmt: skip
    return json.dumps({"name": f"fanout-{n}", "actions": actions}, separators=(",", ":")).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000")
    args = ap.parse_args()
    with dev_server(SUBMITTERS="0") as (base, _):
        tag = f"{time.time():.0f}"
        print(f"{'items':>6} {'actions':>8} {'body KB':>8} {'dry run s':>10} {'submit s':>9}")
        for n in (int(s) for s in args.sizes.split(",")):
            body = workflow(n, tag)
            t = time.perf_counter()
            status, out = call(f"{base}/api/v1/workflows?dryRun=true", body)
            dry = time.perf_counter() - t
            if status != 200:
                sys.exit(f"{n} items: dry run HTTP {status}: {out}")
            t = time.perf_counter()
            status, out = call(f"{base}/api/v1/workflows", body)
            took = time.perf_counter() - t
            if status != 201:
                sys.exit(f"{n} items: HTTP {status}: {out}")
            print(f"{n:>6} {len(out['actions']):>8} {len(body) / 1024:>8.1f} {dry:>10.2f} {took:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
