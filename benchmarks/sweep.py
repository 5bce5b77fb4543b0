"""A sweep: N workflows sharing one slow root, submitted at once; and the planning time of
a large workflow with reuse verification off and on.

Sweep. Starts ``pingo dev`` (embedded defaults, local executor) on a fresh data
directory. Every workflow has the same root ("prepare": examples/jobs/synth.py sleeping
--root-seconds; one definition, so one lineage hash) and a child of its own ("train", a
parameter of its own) that reads the root's output. After a warm-up workflow, one such
workflow is run alone (--single-runs times, each with a new root so nothing is reused),
then --n of them with one new shared root, POSTed by --n threads released together. A
wall time runs from the (first) POST to the (last) workflow's finishedAt. Executions of
the root are counted, not assumed, from the line synth.py appends to PINGO_EXEC_LOG (a
file outside the managed storage) each time it runs to the end. Goals: 1 execution, wall
of the N at most 1.3 x a single workflow's.

Planning. On a second fresh data directory, a workflow of --actions actions
(--actions - 1 independent "part" actions and one "combine" reading them all) is run to
completion, so every part is STORED. Then one ``pingo dev`` per PINGO_VERIFY_REUSE mode
(--modes: none, size, checksum) is started on that data directory, all at once and with no
submitter, and the same workflow with a changed combine step is submitted to each in
turn: planning must verify and claim every stored part before reusing it. The figure is
the time until the 201 (after one untimed turn; median of --repeat turns, the order of
the modes rotating); each submission is killed before the next, so claims do not pile
up. The parts were just written, so their files are in the page cache: on a cold cache,
checksum also pays for the disk reads.

    python benchmarks/sweep.py [--n 20] [--root-seconds 2] [--actions 500]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from devserver import ROOT, call, dev_server, get

sys.path.insert(0, str(ROOT))

from shared.config import Settings

ENDED = {"SUCCEEDED", "FAILED", "KILLED"}
ACTION_ENDED = {"FINISHED", "REUSED", "SKIPPED", "FAILED", "KILLED"}
GOAL_RATIO = 1.3
START = time.time()


def say(message: str) -> None:
    print(f"[{time.time() - START:6.1f}s] {message}", file=sys.stderr, flush=True)


def post(url: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
    return call(url, data, method="POST")


def submit(base: str, body: dict) -> dict:
    status, out = post(f"{base}/api/v1/workflows", body)
    if status != 201:
        sys.exit(f"{body['name']}: HTTP {status}: {out}")
    return out


def synth(aid: int, name: str, label: str, seconds: float, kb: int, parents: tuple[int, ...] | list[int] = ()) -> dict:
    """A SHELL action running examples/jobs/synth.py LABEL SECONDS KB [inputs...] OUTPUT."""
    return {
        "id": aid,
        "name": name,
        "type": "SHELL",
        "actionFolder": "examples/jobs",
        "command": ["python3", "synth.py"],
        "parentActions": list(parents),
        "additionalInput": [{"value": label}, {"value": f"{seconds:g}"}, {"value": str(kb)}],
    }


def sweep_workflow(root: str, child: str, root_seconds: float) -> dict:
    return {
        "name": f"sweep-{root}",
        "actions": [
            synth(0, "prepare", root, root_seconds, 1),
            synth(1, "train", child, 0, 1, [0]),
        ],
    }


def wait(base: str, ids: list[str], what: str, timeout: float, every: float = 0.5) -> dict[str, dict]:
    """Poll until every workflow has ended, saying how far along they are (with one
    workflow, how many of its actions have ended)."""
    ended: dict[str, dict] = {}
    deadline, shown, shown_at = time.time() + timeout, "", 0.0
    while True:
        for wf_id in [i for i in ids if i not in ended]:
            wf = get(f"{base}/api/v1/workflows/{wf_id}")
            if wf["state"] in ENDED:
                ended[wf_id] = wf
        if len(ids) == 1:
            progress = f"{sum(a['state'] in ACTION_ENDED for a in wf['actions'])}/{len(wf['actions'])} actions ended"
        else:
            progress = f"{len(ended)}/{len(ids)} workflows ended"
        if progress != shown and (len(ids) > 1 or len(ended) == len(ids) or time.time() - shown_at >= 5):
            say(f"{what}: {progress}")
            shown, shown_at = progress, time.time()
        if len(ended) == len(ids):
            break
        if time.time() > deadline:
            sys.exit(f"{what}: {len(ids) - len(ended)} workflow(s) still running after {timeout:.0f}s")
        time.sleep(every)
    if bad := {i: w["state"] for i, w in ended.items() if w["state"] != "SUCCEEDED"}:
        sys.exit(f"{what}: workflows did not succeed: {bad}")
    return ended


def executions(exec_log: Path, label: str) -> int:
    if not exec_log.exists():
        return 0
    runs = (line.split(" ", 1)[-1].strip() for line in exec_log.read_text().splitlines())
    return sum(run in (label, f"{label} failed") for run in runs)  # "<action id> <label>[ failed]"


def root_states(base: str, ids: list[str]) -> Counter:
    return Counter(
        next(a["state"] for a in get(f"{base}/api/v1/workflows/{i}")["actions"] if a["localId"] == 0) for i in ids
    )


def fmt(counter: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "-"


def sweep(args: argparse.Namespace, tag: str) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="pingo-sweep-log-"))
    exec_log = log_dir / "exec.log"
    say("sweep: starting pingo dev on a fresh data directory")
    slots = args.slots or args.n
    with dev_server(EXEC_LOG=str(exec_log), LOCAL_SLOTS=str(slots)) as (base, data):
        say(f"sweep: data directory {data}, executions logged to {exec_log}, {slots} local slots")
        warm = submit(base, {"name": "warm-up", "actions": [synth(0, "warm", f"warm-{tag}", 0, 1)]})
        wait(base, [warm["id"]], "warm-up", args.timeout)

        singles, single_execs = [], []
        for k in range(args.single_runs):
            root = f"prepare-{tag}-single{k}"
            t0 = time.time()
            out = submit(base, sweep_workflow(root, f"train-{tag}-single{k}-lr0", args.root_seconds))
            wf = wait(base, [out["id"]], f"single {k + 1}/{args.single_runs}", args.timeout)[out["id"]]
            singles.append(wf["finishedAt"] - t0)
            single_execs.append(executions(exec_log, root))
            say(f"single {k + 1}/{args.single_runs}: {singles[-1]:.2f} s wall, root executed {single_execs[-1]}x")

        root = f"prepare-{tag}-sweep"
        bodies = [sweep_workflow(root, f"train-{tag}-sweep-lr{i}", args.root_seconds) for i in range(args.n)]
        t0, accepted, posted = post_at_once(base, bodies, "sweep")
        ids = [p["id"] for p in posted]
        planned = Counter(f"{a['decision']}/{a['reason']}" for p in posted for a in p["actions"] if a["localId"] == 0)
        ended = wait(base, ids, "sweep", args.timeout)
        wall = max(w["finishedAt"] for w in ended.values()) - t0
        execs = executions(exec_log, root)
        states = root_states(base, ids)
        # The control: the same N at once with the root already stored, so only the N
        # children run: what this machine needs for them, sharing or not.
        bodies = [sweep_workflow(root, f"train-{tag}-control-lr{i}", args.root_seconds) for i in range(args.n)]
        c0, _, posted = post_at_once(base, bodies, "control (root stored)")
        ended = wait(base, [p["id"] for p in posted], "control", args.timeout)
        children_only = max(w["finishedAt"] for w in ended.values()) - c0

    single = statistics.median(singles)
    ratio = wall / single
    print(f"sweep: {args.n} workflows sharing one {args.root_seconds:g} s root, submitted at once")
    print(f"  (pingo dev on embedded defaults, local executor with {args.slots or args.n} slots)")
    row("root executions", f"{execs:>8}     goal 1: {'MET' if execs == 1 else 'MISSED'}")
    row("root planned as", fmt(planned))
    row("root ended as", fmt(states))
    row(f"all {args.n} accepted in", f"{accepted - t0:>8.2f} s")
    row(f"{args.n} workflows, wall", f"{wall:>8.2f} s   first POST -> last finishedAt")
    each = ", ".join(f"{s:.2f} s (root run {n}x)" for s, n in zip(singles, single_execs, strict=True))
    row("single workflow, wall", f"{single:>8.2f} s   median of: {each}")
    row("ratio", f"{ratio:>8.2f} x   goal <= {GOAL_RATIO} x: {'MET' if ratio <= GOAL_RATIO else 'MISSED'}")
    row(f"{args.n} children alone", f"{children_only:>8.2f} s   the same {args.n} at once, root already stored")
    overhead = wall - args.root_seconds - children_only
    row("sharing overhead", f"{overhead:>8.2f} s   wall - root seconds - children alone: the cost of following")
    print(flush=True)


def post_at_once(base: str, bodies: list[dict], what: str) -> tuple[float, float, list[dict]]:
    """POST every body from its own thread, released together: (first POST, last 201, plans)."""
    gate = threading.Barrier(len(bodies))
    posted: list[tuple[float, float, dict] | None] = [None] * len(bodies)

    def send(i: int) -> None:
        gate.wait()
        t = time.time()
        try:
            out = submit(base, bodies[i])
        except (SystemExit, OSError) as exc:
            say(f"{what}: workflow {i}: {exc}")
            return
        posted[i] = (t, time.time(), out)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    say(f"{what}: POSTing {len(bodies)} workflows at once")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [p for p in posted if p is not None]
    if len(done) != len(bodies):
        sys.exit(f"{what}: a submission failed")
    t0, accepted = min(p[0] for p in done), max(p[1] for p in done)
    say(f"{what}: all {len(bodies)} accepted in {accepted - t0:.2f} s")
    return t0, accepted, [p[2] for p in done]


def row(label: str, value: str) -> None:
    print(f"  {label:<24}{value}")


def fan_in(actions: int, tag: str, combine: str, part_kb: int) -> dict:
    parts = [synth(i, "part", f"part-{tag}-{i}", 0, part_kb) for i in range(actions - 1)]
    top = synth(actions - 1, "combine", combine, 0, 1, list(range(actions - 1)))
    return {"name": f"fan-in-{actions}", "actions": [*parts, top]}


def planning(args: argparse.Namespace, tag: str) -> None:
    known = "verify_reuse" in Settings.model_fields
    say(f"planning: starting pingo dev on a fresh data directory, running {args.actions} actions once")
    with dev_server() as (base, data):
        out = submit(base, fan_in(args.actions, tag, f"combine-{tag}-first", args.part_kb))
        t = time.time()
        wait(base, [out["id"]], "planning: first run", args.timeout, every=2.0)
        first = time.time() - t
    # One pingo dev per mode, all at once on that data directory (they share its database),
    # measured in turns: a mode measured first is not favoured or penalized by what the
    # machine is still doing after the first run.
    modes = tuple(args.modes.split(","))
    say(f"planning: one pingo dev per PINGO_VERIFY_REUSE mode ({', '.join(modes)}) on it, no submitter")
    times: dict[str, list[float]] = {m: [] for m in modes}
    reused: dict[str, set[int]] = {m: set() for m in modes}
    with contextlib.ExitStack() as stack:
        bases = {m: stack.enter_context(dev_server(data, SUBMITTERS="0", VERIFY_REUSE=m))[0] for m in modes}
        for k in range(args.repeat + 1):  # turn 0 is not timed
            for mode in modes[k % len(modes) :] + modes[: k % len(modes)]:
                base = bases[mode]
                body = fan_in(args.actions, tag, f"combine-{tag}-{mode}-{k}", args.part_kb)
                t = time.perf_counter()
                out = submit(base, body)
                took = time.perf_counter() - t
                reused[mode].add(sum(a["decision"] == "reuse" for a in out["actions"]))
                if k:
                    times[mode].append(took)
                say(f"planning: {mode} {'warm-up' if not k else f'{k}/{args.repeat}'}: {took:.2f} s")
                status, answer = post(f"{base}/api/v1/workflows/{out['id']}/kill")
                if status != 202:
                    sys.exit(f"kill {out['id']}: HTTP {status}: {answer}")
                while get(f"{base}/api/v1/workflows/{out['id']}")["state"] != "KILLED":
                    time.sleep(0.1)
    print(
        f"planning: a {args.actions}-action workflow, {args.actions - 1} stored parts to reuse "
        f"({args.part_kb} KB each), 1 step to compute; time until the 201"
    )
    print(f"  (first run of all {args.actions} actions: {first:.1f} s wall)")
    if not known:
        print("  (this version has no PINGO_VERIFY_REUSE setting: every row plans the same way)")
    print(f"  {'PINGO_VERIFY_REUSE':<20} {'median s':>9} {'min s':>7} {'ms/action':>10} {'reused':>7}")
    for mode in modes:
        name = mode + (" (default)" if known and Settings.model_fields["verify_reuse"].default == mode else "")
        med = statistics.median(times[mode])
        print(
            f"  {name:<20} {med:>9.2f} {min(times[mode]):>7.2f} {1000 * med / args.actions:>10.2f} "
            f"{'/'.join(map(str, sorted(reused[mode]))):>7}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20, help="workflows submitted at once (default 20)")
    ap.add_argument("--root-seconds", type=float, default=2.0, help="how long the shared root runs (default 2)")
    ap.add_argument(
        "--slots", type=int, default=0,
        help="actions the local executor runs at once (PINGO_LOCAL_SLOTS; default --n, as a cluster would run the "
        "N children side by side: the figure is about the shared root, not about queueing on this machine)",
    )  # fmt: skip
    ap.add_argument("--single-runs", type=int, default=3, help="runs of the single workflow, median (default 3)")
    ap.add_argument("--actions", type=int, default=500, help="size of the planned workflow (default 500)")
    ap.add_argument("--part-kb", type=int, default=64, help="size of each stored part, KB (default 64)")
    ap.add_argument("--repeat", type=int, default=5, help="timed submissions per verification mode (default 5)")
    ap.add_argument(
        "--modes", default="none,size,checksum", help="PINGO_VERIFY_REUSE values (default none,size,checksum)"
    )
    ap.add_argument("--timeout", type=float, default=900, help="longest wait for one phase, seconds (default 900)")
    ap.add_argument("--skip", choices=("sweep", "planning"), help="leave one part out")
    args = ap.parse_args()
    if args.n < 1 or args.actions < 2 or args.single_runs < 1 or args.repeat < 1:
        ap.error("--n, --single-runs and --repeat must be at least 1, --actions at least 2")
    if not all(args.modes.split(",")):
        ap.error("--modes: comma-separated PINGO_VERIFY_REUSE values")
    tag = f"{time.time():.0f}"
    if args.skip != "sweep":
        sweep(args, tag)
    if args.skip != "planning":
        planning(args, tag)
    say("done")


if __name__ == "__main__":
    main()
