"""How long submitting (validating, planning, writing) a workflow takes, by size, and how
long a kill of the largest takes to be applied.

Starts ``pingo dev`` (embedded defaults; no submitter, so nothing runs) on a fresh data
directory and POSTs chains of no-op actions, the largest one as big as the body limit
allows. Prints, per size: the time until the 201, and per action.

    python benchmarks/planning.py [--sizes 100,1000,5000,max]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from devserver import call, dev_server

BODY_LIMIT = 1_048_576  # PINGO_MAX_BODY_BYTES's default


def chain(n: int, tag: str) -> bytes:
    actions = [
        {"id": i, "name": "s", "type": "SHELL", "command": ["true", tag], **({"parentActions": [i - 1]} if i else {})}
        for i in range(n)
    ]
    return json.dumps({"name": f"chain-{n}", "actions": actions}, separators=(",", ":")).encode()


def largest(tag: str) -> int:
    lo, hi = 1, 100_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(chain(mid, tag)) <= BODY_LIMIT else (lo, mid - 1)
    return lo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,5000,max")
    args = ap.parse_args()
    with dev_server(SUBMITTERS="0") as (base, _):
        tag = f"{time.time():.0f}"
        sizes = [largest(tag) if s == "max" else int(s) for s in args.sizes.split(",")]
        print(f"{'actions':>8} {'body KB':>8} {'submit s':>9} {'ms/action':>10}")
        last = None
        for n in sizes:
            body = chain(n, tag)
            t = time.perf_counter()
            status, out = call(f"{base}/api/v1/workflows", body)
            took = time.perf_counter() - t
            if status != 201:
                sys.exit(f"{n} actions: HTTP {status}: {out}")
            print(f"{n:>8} {len(body) // 1024:>8} {took:>9.2f} {1000 * took / n:>10.2f}", flush=True)
            last = out["id"]
        t = time.perf_counter()
        status, _ = call(f"{base}/api/v1/workflows/{last}/kill", b"")
        answered = time.perf_counter() - t
        while call(f"{base}/api/v1/workflows/{last}")[1]["state"] != "KILLED":
            time.sleep(0.1)
        print(f"kill of {sizes[-1]} actions: answered in {answered:.2f}s, applied in {time.perf_counter() - t:.2f}s")


if __name__ == "__main__":
    main()
