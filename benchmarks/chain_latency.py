"""How long an action waits between its parent finishing and its own start.

Starts ``pingo dev`` (embedded defaults, local executor) on a fresh data directory,
submits a chain of N actions that each do nothing, and prints, for every parent -> child
edge, child job start minus parent job end: median, p90, max.

    python benchmarks/chain_latency.py [--length 50]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--length", type=int, default=50)
    args = ap.parse_args()
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="pingo-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(
        PINGO_DATA_DIR=str(data), PINGO_EMBEDDED_MONGO_PORT=str(free_port()), PINGO_CALLBACK_PORT=str(free_port())
    )
    log = open(data / "dev.log", "wb")
    dev = subprocess.Popen(
        [sys.executable, "-m", "pingo.cli", "dev", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                get(f"{base}/healthz")
                break
            except OSError:
                if time.time() > deadline or dev.poll() is not None:
                    sys.exit(f"pingo dev did not start; see {data / 'dev.log'}")
                time.sleep(0.2)
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
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(timeout=30)


if __name__ == "__main__":
    main()
