"""How long an action waits between its parent finishing and its own start.

Starts ``pingo dev`` (embedded defaults, local executor) on a fresh data directory,
submits a chain of N actions that each do nothing, and prints, for every parent -> child
edge, child job start minus parent job end: median, p90, max.

    python benchmarks/chain_latency.py [--length 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request

from devserver import dev_server, get


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--length", type=int, default=50)
    args = ap.parse_args()
    with dev_server() as (base, _):
        tag = f"{time.time():.0f}"
        actions = [
            {
                "id": i,
                "name": f"step-{i}",
                "type": "SHELL",
                "actionFolder": "examples/jobs",
                "command": ["python3", "synth.py"],
                "parentActions": [i - 1] if i else [],
                "additionalInput": [{"value": f"chain-{tag}-{i}"}, {"value": "0"}, {"value": "1"}],
            }
            for i in range(args.length)
        ]
        req = urllib.request.Request(
            f"{base}/api/v1/workflows",
            data=json.dumps({"name": "chain", "actions": actions}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            wf_id = json.loads(r.read())["id"]
        t0 = time.time()
        while True:
            wf = get(f"{base}/api/v1/workflows/{wf_id}")
            done = sum(a["state"] == "FINISHED" for a in wf["actions"])
            print(f"\r{done}/{args.length} finished, {time.time() - t0:5.1f}s", end="", file=sys.stderr, flush=True)
            if wf["state"] != "RUNNING":
                break
            time.sleep(0.5)
        print(file=sys.stderr)
        assert wf["state"] == "SUCCEEDED", wf["state"]
        by = {a["localId"]: a for a in wf["actions"]}
        waits = [by[i]["startedAt"] - (by[i - 1]["startedAt"] + by[i - 1]["seconds"]) for i in range(1, args.length)]
        waits.sort()
        q = statistics.quantiles(waits, n=10)
        print(f"chain of {args.length} actions, local executor, pingo dev (in-process bus, embedded nx-27017)")
        print(
            f"wait parent end -> child start: median {statistics.median(waits) * 1000:.0f} ms, "
            f"p90 {q[-1] * 1000:.0f} ms, max {waits[-1] * 1000:.0f} ms, min {waits[0] * 1000:.0f} ms"
        )
        print(f"whole chain: {time.time() - t0:.1f} s wall")


if __name__ == "__main__":
    main()
