"""Store commands per action on a chain: how many round trips Pingo's services make to
MongoDB for each action of a chain of no-op actions, by command, as PyMongo's command
monitoring counts them (``pingo_store_operation_seconds_count`` on ``/metrics``).

A count, unlike a time, does not depend on how busy the machine is: it shows what a change
to the hop's path saves. The seconds the services waited for each command (the histogram's
sum) are printed beside it: on a chain, where actions do not overlap, their total per action
is what the store costs a hop. Starts ``pingo dev`` on a fresh data directory, warms it with one
action, reads the counters, runs a chain of N actions (``--length``, default 50), reads
them again, and prints the difference per action. Timers (scrapes, polls, sweeps) run
meanwhile and add a little; ``--idle`` seconds of a quiet server measured the same way
are subtracted at the chain's rate.

With ``--independent``, the same number of actions without edges: what each action costs
the store when many run at once (where the first poll of one that waits for a slot adds).

    .venv/bin/python benchmarks/store_ops.py [--length 50] [--independent] [--idle 5]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from collections import Counter

from devserver import call, dev_server, free_port, get

SAMPLE = re.compile(r'^pingo_store_operation_seconds_(count|sum)\{command="([^"]+)"\} ([0-9.e+-]+)$')


def counts(metrics: str) -> Counter[str]:
    """Commands by name, and (as ``<name>:seconds``) the seconds the services waited for them."""
    with urllib.request.urlopen(f"{metrics}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if m := SAMPLE.match(line):
            kind, command, value = m.groups()
            out[command if kind == "count" else f"{command}:seconds"] = float(value)
    return out


def chain(tag: str, length: int, edges: bool = True) -> dict:
    """A chain of ``length`` actions; with ``edges`` False, as many independent ones."""
    return {
        "name": f"chain-{tag}",
        "actions": [
            {
                "id": i, "name": f"{tag}-{i}", "type": "SHELL", "actionFolder": "examples/jobs",
                "command": ["python3", "synth.py"], "parentActions": [i - 1] if i and edges else [],
                "additionalInput": [{"value": f"{tag}-{i}"}, {"value": "0"}, {"value": "1"}],
            }
            for i in range(length)
        ],
    }  # fmt: skip


def run(base: str, body: dict) -> float:
    status, wf = call(f"{base}/api/v1/workflows", json.dumps(body).encode(), "POST")
    assert status in (200, 201, 202), wf
    t0 = time.time()
    # Looked at once a second: each look is store commands too (the idle rate does not hold them).
    while (wf := get(f"{base}/api/v1/workflows/{wf['id']}"))["state"] in ("PLANNING", "RUNNING"):
        time.sleep(1.0)
    assert wf["state"] == "SUCCEEDED", wf["state"]
    return time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--length", type=int, default=50)
    ap.add_argument("--independent", action="store_true", help="that many independent actions instead of a chain")
    ap.add_argument("--idle", type=float, default=5.0, help="seconds of a quiet server, measured to subtract")
    args = ap.parse_args()
    port = free_port()
    metrics = f"http://127.0.0.1:{port}"
    with dev_server(METRICS_PORT=str(port)) as (base, _):
        tag = f"{time.time():.0f}"
        run(base, chain(f"warm-{tag}", 1))
        time.sleep(1.0)
        before_idle = counts(metrics)
        time.sleep(args.idle)
        idle = counts(metrics) - before_idle
        before = counts(metrics)
        shape = f"{args.length} independent actions" if args.independent else f"a chain of {args.length}"
        print(f"running {shape} ...", file=sys.stderr)
        took = run(base, chain(tag, args.length, edges=not args.independent))
        during = counts(metrics) - before
    rate = took / args.idle if args.idle else 0.0
    print(f"store commands per action, {shape} ({took:.1f} s; idle rate subtracted)")
    print("| command | per action | mean wait (ms) | wait per action (ms) |")
    print("|---|---:|---:|---:|")
    total = waited = 0.0
    for command in sorted(c for c in during if not c.endswith(":seconds")):
        n = max(0.0, during[command] - idle[command] * rate)
        secs = max(0.0, during[f"{command}:seconds"] - idle[f"{command}:seconds"] * rate)
        per, wait = n / args.length, secs * 1000 / args.length
        total, waited = total + per, waited + wait
        print(f"| {command} | {per:.2f} | {secs * 1000 / n if n else 0.0:.2f} | {wait:.1f} |")
    print(f"| **all** | **{total:.2f}** | | **{waited:.1f}** |")
    # The services overlap their waits (several actions and timers at once), so the wait per
    # action is an upper bound of what the store adds to one hop; a chain has little overlap.
    print(f"wall per action: {took * 1000 / args.length:.1f} ms (polled once a second)")


if __name__ == "__main__":
    main()
