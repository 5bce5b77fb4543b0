"""How long submitting (validating, planning, writing) a workflow takes, by size, and how
long a kill of the largest takes to be applied.

Starts ``pingo dev`` (embedded defaults; no submitter, so nothing runs) on a fresh data
directory, or with ``--processes`` the five services as separate processes over RabbitMQ
(benchmarks/peers.py), and POSTs workflows of no-op actions, the largest one as big as
the body limit allows: chains (one action READY at once) or, with ``--shape
independent``, actions without edges (every one READY, each announced by an event).
Prints, per size: the time until the 201, and per action.

With ``--again``, each size is submitted a second time under the same name with every
command changed: every action is computed, and each says what changed against the first
(docs/planning.md, "Why an action is computed").

    python benchmarks/planning.py [--sizes 100,1000,5000,max] [--shape chain|independent] [--processes] [--again]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from devserver import call, dev_server
from peers import processes_server

BODY_LIMIT = 1_048_576  # PINGO_MAX_BODY_BYTES's default


def workflow(n: int, tag: str, edges: bool = True) -> bytes:
    actions = [
        {
            "id": i, "name": "s" if edges else f"s{i}", "type": "SHELL", "command": ["true", tag],
            **({"parentActions": [i - 1]} if i and edges else {}),
        }
        for i in range(n)
    ]  # fmt: skip
    return json.dumps({"name": f"planning-{n}", "actions": actions}, separators=(",", ":")).encode()


def largest(tag: str, edges: bool) -> int:
    lo, hi = 1, 100_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(workflow(mid, tag, edges)) <= BODY_LIMIT else (lo, mid - 1)
    return lo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,5000,max")
    ap.add_argument("--shape", choices=("chain", "independent"), default="chain")
    ap.add_argument("--processes", action="store_true", help="the services as separate processes over RabbitMQ")
    ap.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/")
    ap.add_argument("--again", action="store_true", help="submit each size again, every action changed")
    args = ap.parse_args()
    edges = args.shape == "chain"
    server = processes_server(args.amqp_url, SUBMITTERS="0") if args.processes else dev_server(SUBMITTERS="0")
    with server as (base, _):
        tag = f"{time.time():.0f}"
        sizes = [largest(tag, edges) if s == "max" else int(s) for s in args.sizes.split(",")]
        print(f"{'actions':>8} {'body KB':>8} {'submit s':>9} {'ms/action':>10}")
        last = None
        for n in sizes:
            body = workflow(n, tag, edges)
            t = time.perf_counter()
            status, out = call(f"{base}/api/v1/workflows", body)
            took = time.perf_counter() - t
            if status != 201:
                sys.exit(f"{n} actions: HTTP {status}: {out}")
            print(f"{n:>8} {len(body) // 1024:>8} {took:>9.2f} {1000 * took / n:>10.2f}", flush=True)
            last = out["id"]
            if args.again:
                body = workflow(n, tag + "-again", edges)
                t = time.perf_counter()
                status, out = call(f"{base}/api/v1/workflows", body)
                took = time.perf_counter() - t
                if status != 201:
                    sys.exit(f"{n} actions again: HTTP {status}: {out}")
                label = f"{n} again"
                print(f"{label:>8} {len(body) // 1024:>8} {took:>9.2f} {1000 * took / n:>10.2f}", flush=True)
                last = out["id"]
        t = time.perf_counter()
        status, _ = call(f"{base}/api/v1/workflows/{last}/kill", b"")
        answered = time.perf_counter() - t
        while call(f"{base}/api/v1/workflows/{last}")[1]["state"] != "KILLED":
            time.sleep(0.1)
        print(f"kill of {sizes[-1]} actions: answered in {answered:.2f}s, applied in {time.perf_counter() - t:.2f}s")


if __name__ == "__main__":
    main()
