"""What settling a workflow costs after one of its actions ends, by workflow size.

Every action end asks whether its workflow is over (``Mover.settle``). Settling used to
read every action of the workflow each time: quadratic over a workflow's life. It now
reads the workflow's count of live actions (``open_actions``, kept by the moves' effects)
and reads the actions once, when the count reaches zero. Both forms run here on the same
data: the full read is still what the repair sweep does for a quiet workflow
(``recount=True``), so the two rows are the old and the new cost of an action's end.

Starts the embedded store (nx-27017) on a fresh data directory, writes a RUNNING workflow
of N actions with all but one ended, and times settle() both ways (median of --repeat).

    python benchmarks/settle.py [--sizes 100,500,2000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from shared.bus.memory import MemoryBus
from shared.lifecycle.moves import Mover
from shared.store.client import connect
from shared.store.embedded import EmbeddedMongo


async def measure(sizes: list[int], repeat: int) -> None:
    server = EmbeddedMongo(Path(tempfile.mkdtemp(prefix="pingo-settle-")))
    url = await server.start()
    store = await connect(url, "settle")
    mover = Mover(store, MemoryBus(), "benchmark")
    print(f"{'actions':>8} {'full read ms':>13} {'count ms':>9} {'ratio':>7}")
    try:
        for n in sizes:
            wf_id = f"wf-{n}"
            now = time.time()
            await store.workflows.insert_one(
                {"_id": wf_id, "state": "RUNNING", "open_actions": 1, "kill_requested": False, "created_at": now}
            )
            await store.actions.insert_many(
                [
                    {
                        "_id": f"{wf_id}.{i}",
                        "workflow_id": wf_id,
                        "state": "RUNNING" if i == 0 else "FINISHED",
                        "created_at": now,
                    }
                    for i in range(n)
                ]
            )
            rows: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(repeat):
                for recount in (True, False):
                    t = time.perf_counter()
                    assert await mover.settle(wf_id, recount=recount) is None  # one action is still live
                    rows[recount].append((time.perf_counter() - t) * 1000)
            full, count = statistics.median(rows[True]), statistics.median(rows[False])
            print(f"{n:>8} {full:>13.2f} {count:>9.2f} {full / count:>6.1f}x", flush=True)
    finally:
        await store.close()
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,500,2000")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    asyncio.run(measure([int(s) for s in args.sizes.split(",")], args.repeat))


if __name__ == "__main__":
    main()
