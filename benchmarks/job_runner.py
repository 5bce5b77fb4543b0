"""The job runner's own CPU per job, and whether it grows with the jobs it has run.

Hands no-op jobs (``true``) to this host's job runner through the local executor, in
groups as the action manager claims them, with a notification URL answered by a small
HTTP server here (GETs, and ``/callback-batch`` as the callback service), and prints the
runner's CPU per job (from /proc) for each window of jobs one runner runs: the figure
docs/performance.md reads, without the services and the store around it
(benchmarks/hop_profile.py measures it inside the whole).

    python benchmarks/job_runner.py [--windows 4] [--jobs 1000] [--group 50] [--slots 4]
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.executors.base import JobRequest
from shared.executors.local import LocalExecutor


class Ends:
    """Counts the end notifications the runner sends."""

    def __init__(self) -> None:
        self.count = 0
        self.batches = 0  # requests that carried several
        self.lock = threading.Lock()


def notification_server(ends: Ends) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # kept alive, as the callback server does

        def do_GET(self) -> None:
            if "status=RUNNING" not in self.path:
                with ends.lock:
                    ends.count += 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            # The ends that came together, as the callback service takes them (/callback-batch).
            entries = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with ends.lock:
                ends.count += sum("status=RUNNING" not in e for e in entries)
                ends.batches += 1
            body = json.dumps({"ok": True, "results": [200] * len(entries)}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/callback/$jobId?status=$status"


def cpu(pid: int) -> tuple[float, float]:
    """A process's own CPU seconds, and its reaped children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def noop(i: int, url: str) -> JobRequest:
    return JobRequest(
        action_id=f"bench.j{i}", external_id=f"bench.j{i}#1", type="SHELL", name=f"j{i}", action_folder=None,
        main_class=None, command=["true"], arguments=[], configuration={}, notify_url=url,
    )  # fmt: skip


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="job-runner-bench-"))
    ends = Ends()
    server, url = notification_server(ends)
    executor = LocalExecutor(work / "jobs", slots=args.slots)
    try:
        first = await executor.submit(noop(-1, url))
        while ends.count < 1:
            await asyncio.sleep(0.01)
        runner = int((work / "jobs" / first / "status.json").read_text().split('"runner": ')[1].split(",")[0])
        print(f"{args.windows} windows of {args.jobs} no-op jobs, groups of {args.group}, {args.slots} slots")
        done = 0
        for _ in range(args.windows):
            own0, jobs0 = cpu(runner)
            batches0 = ends.batches
            start, goal = time.monotonic(), ends.count + args.jobs
            for g in range(0, args.jobs, args.group):
                group = range(done + g, done + min(g + args.group, args.jobs))
                await asyncio.gather(*(executor.submit(noop(i, url)) for i in group))
            while ends.count < goal:
                await asyncio.sleep(0.01)
            wall = time.monotonic() - start
            own1, jobs1 = cpu(runner)
            print(
                f"  jobs {done:6d}-{done + args.jobs:6d}: runner {1000 * (own1 - own0) / args.jobs:.2f} ms/job "
                f"(+ {1000 * (jobs1 - jobs0) / args.jobs:.2f} in the jobs), {args.jobs / wall:.0f} jobs/s, "
                f"{ends.batches - batches0} batches"
            )
            done += args.jobs
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)  # the runner sees its folder go, and exits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=1000, help="jobs per window")
    ap.add_argument("--group", type=int, default=50, help="jobs handed over at once (a claim's batch)")
    ap.add_argument("--slots", type=int, default=4)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
