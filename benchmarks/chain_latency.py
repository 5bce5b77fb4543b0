"""How long an action waits between its parent finishing and its own start, and where.

Starts ``pingo dev`` (embedded defaults, local executor) on a fresh data directory, or
with ``--processes`` the five services as processes over RabbitMQ (as
benchmarks/peers.py does), submits a chain of N actions that each do nothing, and
prints, for every parent -> child edge, child job start minus parent job end: median,
p90, max. Then the same wait in three parts, read from the workflow's timeline (each
transition's time is taken as its write is sent): the parent's job end to the child's
READY (the notification, confirming, committing, recording the dataset, readying the
child), READY to SUBMITTED (the action manager's claim), and SUBMITTED to the child's
job start (the claim's write, inputs check, attempt folder, hand-over to the job runner,
its start of the process). docs/performance.md reads these figures.

    python benchmarks/chain_latency.py [--length 50] [--processes]
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
    ap.add_argument("--processes", action="store_true", help="the five services as processes over RabbitMQ")
    args = ap.parse_args()
    if args.processes:
        from peers import processes_server

        server = processes_server("amqp://guest:guest@127.0.0.1:5672/")
    else:
        server = dev_server()
    with server as (base, _):
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
        where = "five processes over RabbitMQ" if args.processes else "pingo dev (in-process bus)"
        print(f"chain of {args.length} actions, local executor, {where}, embedded nx-27017")
        print(
            f"wait parent end -> child start: median {statistics.median(waits) * 1000:.0f} ms, "
            f"p90 {q[-1] * 1000:.0f} ms, max {waits[-1] * 1000:.0f} ms, min {waits[0] * 1000:.0f} ms"
        )
        print(f"whole chain: {time.time() - t0:.1f} s wall")
        timeline = get(f"{base}/api/v1/workflows/{wf_id}/timeline")["transitions"]
        moves: dict[str, dict[str, float]] = {}
        for t in timeline:
            if t["kind"] == "action":
                moves.setdefault(t["id"].split(" ")[0], {})[t["state"]] = t["at"]  # the last of each state
        parts: dict[str, list[float]] = {"job end -> READY": [], "READY -> SUBMITTED": [], "SUBMITTED -> job start": []}
        for i in range(1, args.length):
            child, end = by[i], by[i - 1]["startedAt"] + by[i - 1]["seconds"]
            seen = moves.get(child["id"], {})
            if "READY" in seen and "SUBMITTED" in seen:
                parts["job end -> READY"].append(seen["READY"] - end)
                parts["READY -> SUBMITTED"].append(seen["SUBMITTED"] - seen["READY"])
                parts["SUBMITTED -> job start"].append(child["startedAt"] - seen["SUBMITTED"])
        print("  " + ", ".join(f"{k}: median {statistics.median(v) * 1000:.1f} ms" for k, v in parts.items() if v))


if __name__ == "__main__":
    main()
