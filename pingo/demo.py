"""``pingo demo``: start Pingo on its embedded defaults, run every example workflow twice,
and show that the second run computes nothing (the unmanaged report excepted: an
unmanaged action always computes)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pingo.client import ApiError, Client
from pingo.dev import all_services
from pingo.display import watch
from shared.config import Settings
from shared.errors import CannotStart
from shared.runtime import Context, configure_logging, running

# Said before run 1 when the catalogue already holds workflows: without it, a second demo's
# "run 1" computes nothing and a newcomer cannot tell why.
AGAIN = (
    "\nNote: this Pingo's catalogue (in {data}) already holds workflows from an earlier run, and it\n"
    "persists: run 1 below reuses what they computed, so it computes nothing new. To watch it\n"
    "compute from scratch: pingo demo --fresh (./scripts/demo --fresh; a new, temporary\n"
    "catalogue), or stop every Pingo using it and remove the folder (rm -rf {data})."
)


async def run_demo(args: argparse.Namespace) -> int:
    if not args.fresh:
        return await demo(args, {})
    # A new, empty catalogue and storage in a folder of its own, removed afterwards: the
    # usual one (.pingo, or PINGO_DATA_DIR) is left as it is.
    with tempfile.TemporaryDirectory(prefix="pingo-demo-") as fresh:
        empty = {"data_dir": Path(fresh), "mongo_url": None, "managed_root": None, "output_roots": []}
        return await demo(args, empty)


async def demo(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    configure_logging("WARNING")
    if args.port:
        overrides = {**overrides, "port": args.port, "callback_port": args.port + 1}
    settings = Settings(scrape_interval=1.0, **overrides)
    files = await asyncio.to_thread(lambda: sorted(Path(args.examples).glob("*.json")))
    if not files:
        print(f"pingo demo: no example workflows in {args.examples}")
        return 2
    print(
        f"Starting Pingo (all five services, embedded MongoDB, data in {settings.data_dir.resolve()}) ...", flush=True
    )
    url = f"http://{settings.host}:{settings.port}"
    rows = []
    ok = True
    try:
        ctx = await Context.open(settings)
    except CannotStart as exc:  # the data dir's catalogue describes another storage
        print(f"pingo demo: not starting: {exc}")
        return 2
    async with running(ctx, all_services):
        async with Client(url) as client:
            if earlier := bool(await client.workflows(1)):
                print(AGAIN.format(data=settings.data_dir), flush=True)
            for run in (1, 2):
                for f in files:
                    print(f"\n== run {run}: {f.name}", flush=True)
                    t0 = time.time()
                    try:
                        plan = await client.submit(json.loads(f.read_text()))
                    except ApiError as exc:
                        print(f"rejected: {exc.body}")
                        return 1
                    wf = await watch(client, plan["id"])
                    computed = [a for a in wf["actions"] if a["decision"] == "compute"]
                    managed_computed = [a for a in computed if a.get("managed")]
                    states = Counter(a["state"] for a in wf["actions"])
                    rows.append(
                        (run, f.name, wf["state"], len(computed), states["REUSED"], states["SKIPPED"], time.time() - t0)
                    )
                    ok &= wf["state"] == "SUCCEEDED" and (run == 1 or not managed_computed)
        # Skipped: not reused, not needed at all (a later action's output was reused).
        print("\nrun  workflow               state      computed reused skipped wall time")
        for run, name, state, comp, reused, skipped, secs in rows:
            print(f"{run:>3}  {name:<22} {state:<10} {comp:>8} {reused:>6} {skipped:>7} {secs:>8.1f}s")
        print(
            "\nThe second run reused every managed output; only unmanaged actions (which Pingo never keeps) ran again."
            if ok
            else "\nSomething was computed twice or failed: see above."
        )
        if earlier:
            print("Run 1 computed little or nothing: an earlier run had computed it (see the note at the top).")
        if args.keep_running:
            print(f"\nPingo keeps running at {url} (Ctrl-C to stop). Try: pingo datasets; pingo status <id>")
            stop = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
            await stop.wait()
    return 0 if ok else 1
