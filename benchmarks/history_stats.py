"""History statistics: query latency from the buckets vs the same answer from raw actions.

Builds 30 and 120 days of synthetic history (a 5-action workflow every 10 minutes) in a
fresh database on a fresh nx-27017 server (or PINGO_MONGO_URL), writing the buckets with
the production ``shared.store.stats.count``. For every resolution it then times the
bucket query and a recount from the raw action documents over the whole period.

    python benchmarks/history_stats.py [--days 30 120] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.store import connect, stats
from shared.store.embedded import EmbeddedMongo

WORKFLOW_EVERY = 600.0


async def build(store, days: int, end: float) -> None:
    rng = random.Random(days)
    t = end - days * 86_400
    actions, n = [], 0
    while t < end:
        wf = f"wf-{n:07d}"
        computed = rng.randint(1, 5)
        secs = [rng.uniform(1, 60) for _ in range(computed)]
        sizes = [rng.randint(1, 10**8) for _ in range(computed)]
        for i in range(5):
            done = i < computed
            actions.append({"_id": f"{wf}.{i}", "workflow_id": wf, "created_at": t,
                            "state": "FINISHED" if done else "REUSED", "finished_at": t + 60 if done else None,
                            "seconds": secs[i] if done else None, "size": sizes[i] if done else None})  # fmt: skip
        # One record per workflow: the production function, with the workflow's counters.
        await stats.count(store, t, workflows_submitted=1, actions_reused=5 - computed)
        await stats.count(store, t + 60, actions_computed=computed, compute_seconds=sum(secs), bytes_written=sum(sizes))
        if len(actions) >= 5000:
            await store.actions.insert_many(actions)
            actions = []
        t += WORKFLOW_EVERY
        n += 1
    if actions:
        await store.actions.insert_many(actions)


async def raw(store, resolution: str, start: float, end: float) -> dict[float, Counter]:
    width = stats.RESOLUTIONS[resolution]
    out: dict[float, Counter] = defaultdict(Counter)
    fields = {"created_at": 1, "finished_at": 1, "state": 1, "seconds": 1, "size": 1}
    async for a in store.actions.find({"created_at": {"$gte": start - 120, "$lt": end}}, fields):
        if a["state"] == "FINISHED" and start <= a["finished_at"] < end:
            c = out[stats.bucket_start(a["finished_at"], width)]
            c.update(actions_computed=1, compute_seconds=a["seconds"], bytes_written=a["size"])
        elif a["state"] == "REUSED" and start <= a["created_at"] < end:
            out[stats.bucket_start(a["created_at"], width)]["actions_reused"] += 1
    return out


async def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = await fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, nargs="+", default=[30, 120])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    embedded = None
    url = os.environ.get("PINGO_MONGO_URL")
    if url is None:
        embedded = EmbeddedMongo(Path(tempfile.mkdtemp(prefix="pingo-histbench-")))
        url = await embedded.start()
    try:
        header = ("history", "resolution", "buckets", "from buckets", "from raw actions", "ratio")
        print(" ".join(f"{h:>{w}}" for h, w in zip(header, (8, 10, 8, 13, 17, 7), strict=True)))
        for days in args.days:
            store = await connect(url, f"histbench_{uuid.uuid4().hex[:8]}")
            end = time.time()
            t0 = time.perf_counter()
            await build(store, days, end)
            actions = await store.actions.count_documents({})
            print(f"# {days} days: {actions} actions, built in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
            start = end - days * 86_400
            for resolution in stats.RESOLUTIONS:
                q, buckets = await timed(partial(stats.query, store, resolution, start, end), args.repeat)
                r, counted = await timed(partial(raw, store, resolution, start, end), args.repeat)
                assert sum(b.actions_computed for b in buckets) == sum(c["actions_computed"] for c in counted.values())
                print(f"{days:>7}d {resolution:>10} {len(buckets):>8} {q * 1000:>11.1f}ms {r * 1000:>15.1f}ms "
                      f"{r / q:>6.1f}x")  # fmt: skip
            await store.client.drop_database(store.db.name)
            await store.close()
    finally:
        if embedded is not None:
            embedded.stop()


if __name__ == "__main__":
    asyncio.run(main())
