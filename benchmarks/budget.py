"""Peak storage usage against the budget, per decision algorithm (issue 26, point 5).

The five services run in this process (as ``pingo dev`` runs them: embedded nx-27017,
in-process bus, local executor and storage) with a small ``PINGO_CAPACITY_BYTES``. The
workload: workflows that are chains ``a -> b -> leaf`` whose two intermediates are each
about 20 % of the capacity (the leaf is a few KB), every workflow new (its labels differ),
the same action names each time, ``--concurrent`` of them running at once. While it runs,
usage is sampled every ``--every`` seconds:

- budget usage: the STORED and LEAF datasets' sizes in the catalogue, plus the bytes on
  disk of the attempts being written (what docs/operations.md, "Storage budget", counts);
- disk: every byte under the managed root (datasets marked but not yet deleted included).

Prints, per algorithm, the peak of each over the capacity.

    python benchmarks/budget.py [--algorithms lru,adaptive,...] [--workflows 8] [--concurrent 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from pingo.dev import all_services
from pingo.ports import free_ports
from shared.config import Settings
from shared.eviction import REGISTRY
from shared.runtime import Context, running
from shared.storage.local import ATTEMPTS_DIR
from shared.store.embedded import EmbeddedMongo

ROOT = Path(__file__).resolve().parents[1]
KB = 1024
DECLARE = False


def action(
    aid: int, name: str, label: str, parents: list[int], size_kb: int, seconds: float, declare: bool = False
) -> dict:
    """examples/jobs/synth.py: writes ``size_kb`` after ``seconds`` (declared as its
    ``expectedBytes`` with ``declare``)."""
    return {
        **({"expectedBytes": size_kb * KB} if declare else {}),
        "id": aid,
        "name": name,
        "type": "SHELL",
        "actionFolder": "examples/jobs",
        "command": ["python3", "synth.py"],
        "parentActions": [{"id": p} for p in parents],
        "additionalInput": [
            {"key": "label", "value": label},
            {"key": "seconds", "value": str(seconds)},
            {"key": "sizeKB", "value": str(size_kb)},
        ],
    }


def workflow(i: int, size_kb: int, seconds: float, declare: bool) -> dict:
    return {
        "name": "budget",
        "actions": [
            action(1, "budget-a", f"a{i}", [], size_kb, seconds, declare),
            action(2, "budget-b", f"b{i}", [1], size_kb, seconds, declare),
            action(3, "budget-leaf", f"leaf{i}", [2], 4, 0.0),
        ],
    }


def tree_bytes(root: Path) -> int:
    """Every file's size under ``root``; what is removed while we look counts nothing."""
    total = 0
    for folder, _, files in os.walk(root):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(folder, f)).st_size
    return total


async def usage(ctx: Context, managed: Path) -> tuple[int, int]:
    """(STORED + LEAF + being written, every byte under the managed root)."""
    catalogue = 0
    for state in ("STORED", "LEAF"):
        async for d in ctx.store.datasets.find({"state": state}, {"size": 1}):
            catalogue += int(d.get("size") or 0)
    writing = await asyncio.to_thread(tree_bytes, managed / ATTEMPTS_DIR)
    return catalogue + writing, await asyncio.to_thread(tree_bytes, managed)


async def run_one(
    algorithm: str, url: str, capacity: int, workflows: int, concurrent: int, seconds: float, every: float
) -> tuple[float, float, float, int]:
    data = Path(tempfile.mkdtemp(prefix=f"pingo-budget-{algorithm}-"))
    port, callback_port = free_ports(2)
    settings = Settings(
        data_dir=data,
        mongo_url=url,
        mongo_db=f"budget_{algorithm.replace('-', '_')}",
        port=port,
        callback_port=callback_port,
        capacity_bytes=capacity,
        threshold=0.9,
        target=0.8,
        algorithm=algorithm,
        decision_interval=2.0,
        scrape_interval=1.0,
        poll_interval=0.5,
        poll_max_interval=1.0,
        local_slots=4,
        action_roots=[ROOT],
        orphan_sweep_interval=3600,
        reconcile_interval=3600,
    )
    size_kb = capacity // 5 // KB
    ctx = await Context.open(settings)
    managed = settings.managed_dir
    peak_budget = peak_disk = 0
    started = time.time()
    api = f"http://127.0.0.1:{port}/api/v1/workflows"
    async with running(ctx, all_services), aiohttp.ClientSession() as http:
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak_budget, peak_disk
            while not done.is_set():
                b, d = await usage(ctx, managed)
                peak_budget, peak_disk = max(peak_budget, b), max(peak_disk, d)
                await asyncio.sleep(every)

        sampler = asyncio.create_task(sample())
        gate = asyncio.Semaphore(concurrent)
        states: list[str] = []

        async def one(i: int) -> None:
            async with gate:
                async with http.post(api, json=workflow(i, size_kb, seconds, DECLARE)) as r:
                    wf_id = (await r.json())["id"]
                while True:
                    async with http.get(f"{api}/{wf_id}") as r:
                        wf = await r.json()
                    if wf["state"] in ("SUCCEEDED", "FAILED", "KILLED"):
                        states.append(wf["state"])
                        print(f"  {algorithm}: workflow {i + 1}/{workflows} {wf['state']}", flush=True)
                        return
                    await asyncio.sleep(0.2)

        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(workflows))), timeout=600)
        done.set()
        await sampler
    failed = sum(s != "SUCCEEDED" for s in states)
    return peak_budget / capacity, peak_disk / capacity, time.time() - started, failed


async def measure(algorithms: list[str], capacity: int, workflows: int, concurrent: int, seconds: float, every: float):
    server = EmbeddedMongo(Path(tempfile.mkdtemp(prefix="pingo-budget-store-")))
    url = await server.start()
    rows = []
    try:
        for name in algorithms:
            print(f"{name}: {workflows} workflows, {concurrent} at a time", flush=True)
            rows.append((name, *await run_one(name, url, capacity, workflows, concurrent, seconds, every)))
    finally:
        server.stop()
    print(f"\ncapacity {capacity} B; intermediates {capacity // 5} B each (20 %); threshold 0.9, target 0.8")
    print(f"{'algorithm':<12} {'peak/capacity':>14} {'disk/capacity':>14} {'seconds':>8} {'failed':>7}")
    for name, budget, disk, secs, failed in rows:
        print(f"{name:<12} {budget:>14.2f} {disk:>14.2f} {secs:>8.1f} {failed:>7}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--algorithms", default=",".join(REGISTRY))
    ap.add_argument("--capacity", type=int, default=10 * 1024 * KB)
    ap.add_argument("--workflows", type=int, default=12)
    ap.add_argument("--concurrent", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5, help="each intermediate's compute time")
    ap.add_argument("--every", type=float, default=0.05, help="sampling period, seconds")
    ap.add_argument(
        "--expected",
        action="store_true",
        help="declare each intermediate's expectedBytes (else the first of each name runs with no history)",
    )
    args = ap.parse_args()
    global DECLARE
    DECLARE = args.expected
    asyncio.run(
        measure(args.algorithms.split(","), args.capacity, args.workflows, args.concurrent, args.seconds, args.every)
    )


if __name__ == "__main__":
    main()
