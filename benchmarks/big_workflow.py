"""A big workflow as a heavy user makes one: how long a 10,000-action workflow takes to be
planned and to be killed, and how other requests answer while it is planned.

Starts ``pingo dev`` (one process, embedded nx-27017; no submitter, so nothing runs) on a
fresh data directory, submits a small workflow (the "other" one a second user looks at),
then POSTs a workflow of ``--actions`` no-op actions: a chain (one action READY at once)
or, with ``--shape independent``, actions without edges (every one READY). Meanwhile a
second client asks ``GET /api/v1/workflows`` and ``GET /api/v1/workflows/{other}`` one
after the other. Then it kills the big workflow (``POST /api/v1/workflows/{id}/kill``,
docs/api.md) and waits until the workflow is KILLED with every action KILLED (its
``outcome``, counted from the actions when it ends).

Prints: the time to the 201; the time until every action is planned (the workflow has
left PLANNING: its READY/WAITING actions are written in the same planning, before that
move); the second client's latencies during planning (p50, p99, max); the time the kill
took to answer and to reach KILLED; and the CPU ``pingo dev`` and the store (nx-27017)
spent until every action was planned and during the kill (/proc): on a machine shared
with other work the wall times swing, the CPU much less.

    python benchmarks/big_workflow.py [--actions 10000] [--shape chain|independent] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from devserver import call, dev_server
from hop_profile import cpu_by_kind

SERVICES, STORE = "services (pingo dev)", "store (nx-27017)"


def workflow(name: str, n: int, tag: str, edges: bool) -> bytes:
    actions = [
        {
            "id": i, "name": "s" if edges else f"s{i}", "type": "SHELL", "command": ["true", tag],
            **({"parentActions": [i - 1]} if i and edges else {}),
        }
        for i in range(n)
    ]  # fmt: skip
    return json.dumps({"name": name, "actions": actions}, separators=(",", ":")).encode()


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


class Watcher(threading.Thread):
    """The second user: lists the workflows and reads the other one, again and again, and
    notes when the big one (found by name in the list) leaves PLANNING."""

    def __init__(self, base: str, other: str, name: str, data: Path) -> None:
        super().__init__(daemon=True)
        self.base, self.other, self.name, self.data = base, other, name, data
        self.cpu_planned: dict[str, tuple[float, float]] = {}
        self.lists: list[float] = []
        self.gets: list[float] = []
        self.planned_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        url_list = f"{self.base}/api/v1/workflows?{urllib.parse.urlencode({'limit': 50})}"
        while not self.stop.is_set():
            t = time.perf_counter()
            status, page = call(url_list)
            self.lists.append(time.perf_counter() - t)
            assert status == 200, page
            for w in page["workflows"]:
                if w["name"] == self.name and w["state"] != "PLANNING" and self.planned_at is None:
                    self.planned_at = time.perf_counter()
                    self.cpu_planned = cpu_by_kind(self.data)
            t = time.perf_counter()
            status, _ = call(f"{self.base}/api/v1/workflows/{self.other}")
            self.gets.append(time.perf_counter() - t)
            assert status == 200


def find(base: str, name: str) -> dict:
    status, page = call(f"{base}/api/v1/workflows?{urllib.parse.urlencode({'name': name, 'limit': 1})}")
    assert status == 200 and page["workflows"], page
    return page["workflows"][0]


def spent(after: dict[str, tuple[float, float]], before: dict[str, tuple[float, float]], kind: str) -> float:
    return after.get(kind, (0.0, 0.0))[0] - before.get(kind, (0.0, 0.0))[0]


def once(base: str, data: Path, n: int, edges: bool, other: str, run: int) -> dict[str, float]:
    tag = f"{time.time():.0f}-{run}"
    name = f"big-{n}-{tag}"
    body = workflow(name, n, tag, edges)
    watcher = Watcher(base, other, name, data)
    cpu0 = cpu_by_kind(data)
    watcher.start()
    t0 = time.perf_counter()
    status, out = call(f"{base}/api/v1/workflows", body)
    answered = time.perf_counter() - t0
    if status != 201:
        sys.exit(f"{n} actions: HTTP {status}: {out}")
    watcher.stop.set()
    watcher.join()
    planned = (watcher.planned_at or time.perf_counter()) - t0
    wf_id = out["id"]
    states = {a["state"] for a in out["actions"]}
    assert states <= {"READY", "WAITING"}, states
    # The kill: answered at once, applied in the background.
    cpu1 = cpu_by_kind(data)
    t1 = time.perf_counter()
    status, _ = call(f"{base}/api/v1/workflows/{wf_id}/kill", b"")
    assert status == 202, status
    kill_answered = time.perf_counter() - t1
    while (wf := find(base, name))["state"] != "KILLED":
        time.sleep(0.05)
    killed = time.perf_counter() - t1
    assert (wf.get("outcome") or {}).get("killed") == n, wf.get("outcome")
    cpu2, planned_cpu = cpu_by_kind(data), watcher.cpu_planned or cpu1
    ms = 1000.0
    return {
        "submit_s": answered,
        "planned_s": planned,
        "list_p50": ms * percentile(watcher.lists, 0.5),
        "list_p99": ms * percentile(watcher.lists, 0.99),
        "list_max": ms * max(watcher.lists, default=float("nan")),
        "get_p50": ms * percentile(watcher.gets, 0.5),
        "get_p99": ms * percentile(watcher.gets, 0.99),
        "get_max": ms * max(watcher.gets, default=float("nan")),
        "requests": len(watcher.lists) + len(watcher.gets),
        "kill_answer_s": kill_answered,
        "killed_s": killed,
        "planned_cpu_services": spent(planned_cpu, cpu0, SERVICES),
        "planned_cpu_store": spent(planned_cpu, cpu0, STORE),
        "kill_cpu_services": spent(cpu2, cpu1, SERVICES),
        "kill_cpu_store": spent(cpu2, cpu1, STORE),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actions", type=int, default=10_000)
    ap.add_argument("--shape", choices=("chain", "independent"), default="chain")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    edges = args.shape == "chain"
    # A 10,000-action body is close to the default body limit: room for larger ones.
    with dev_server(SUBMITTERS="0", MAX_BODY_BYTES=str(64 * 1024 * 1024)) as (base, data):
        status, out = call(f"{base}/api/v1/workflows", workflow(f"other-{time.time():.0f}", 20, "other", True))
        assert status == 201, out
        other = out["id"]
        rows = [once(base, data, args.actions, edges, other, r) for r in range(args.runs)]
    print(f"{args.actions} actions, {args.shape}, pingo dev ({args.runs} run(s); median shown)")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"  201 after                      {med['submit_s']:8.2f} s")
    print(f"  every action planned after     {med['planned_s']:8.2f} s")
    print(f"  GET /api/v1/workflows          p50 {med['list_p50']:7.0f} ms  p99 {med['list_p99']:7.0f} ms  "
          f"max {med['list_max']:7.0f} ms")  # fmt: skip
    print(f"  GET /api/v1/workflows/{{other}}  p50 {med['get_p50']:7.0f} ms  p99 {med['get_p99']:7.0f} ms  "
          f"max {med['get_max']:7.0f} ms")  # fmt: skip
    print(f"  ({med['requests']:.0f} requests of the second client during planning)")
    print(f"  kill answered after            {med['kill_answer_s']:8.2f} s")
    print(f"  killed (workflow and every action KILLED) after {med['killed_s']:.2f} s")
    print(f"  CPU until every action planned: services {med['planned_cpu_services']:.2f} s, "
          f"store {med['planned_cpu_store']:.2f} s")  # fmt: skip
    print(f"  CPU of the kill: services {med['kill_cpu_services']:.2f} s, store {med['kill_cpu_store']:.2f} s")


if __name__ == "__main__":
    main()
