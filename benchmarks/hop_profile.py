"""Where a chain's hop goes, drawn: every store command of a few consecutive hops on one
time axis, beside the jobs' own moments, and the CPU each process spends per action.

Runs a chain of no-op jobs (``mkdir -p``, as benchmarks/peers.py does) on ``pingo dev``,
or with ``--processes`` the five services over RabbitMQ, each Pingo process recording
every store command it sends (PyMongo's command monitoring, installed through a
``sitecustomize`` on ``PYTHONPATH``: Pingo's code is not changed for it) with the Pingo
function that sent it. Prints the hop (from the output folders' birth times), the CPU
per action of each process (from /proc, over the whole chain), the store commands per
action by sender, and the commands that lie between a parent's end and its child's
start; draws ``--hops`` consecutive hops into ``--plot`` (a PNG). docs/performance.md
reads these figures.

Recording costs time of its own (a few hundred microseconds a command): the hop printed
here is longer than benchmarks/peers.py's, the picture's proportions are what to read.

    python benchmarks/hop_profile.py [--length 200] [--processes] [--plot hop-profile.png] [--hops 3]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

from devserver import ROOT, dev_server
from peers import birth_times, noop, pids_with, process_cpu, processes_server, run_workflow

TRACE_ENV = "HOP_PROFILE_TRACE"  # not PINGO_*: the servers' starters drop those

# Installed as every Pingo process's sitecustomize: one line per store command, written
# when it answers: start, end (epoch seconds), command, collection, sender.
SITECUSTOMIZE = textwrap.dedent(
    f'''
    import os, sys, time
    if os.environ.get("{TRACE_ENV}"):
        from pymongo import monitoring
        _out = open(os.environ["{TRACE_ENV}"] + f".{{os.getpid()}}", "a", buffering=1)
        _root = {str(ROOT)!r} + "/"

        def _sender():
            # The innermost frames of Pingo's own code (not a library's), innermost first.
            names, f = [], sys._getframe(2)
            while f is not None and len(names) < 6:
                path = f.f_code.co_filename
                if path.startswith(_root) and "/site-packages/" not in path:
                    names.append(path[len(_root):-3].replace("/", ".") + ":" + f.f_code.co_name)
                f = f.f_back
            return ",".join(names) or "?"

        class _Recorder(monitoring.CommandListener):
            def __init__(self):
                self.open = {{}}

            def started(self, e):
                coll = e.command.get(e.command_name)
                self.open[(e.connection_id, e.request_id)] = (
                    time.time(), e.command_name, coll if isinstance(coll, str) else "-", _sender()
                )

            def succeeded(self, e):
                s = self.open.pop((e.connection_id, e.request_id), None)
                if s is not None:
                    _out.write(f"{{s[0]:.6f}} {{time.time():.6f}} {{s[1]}} {{s[2]}} {{s[3]}}\\n")

            failed = succeeded

        monitoring.register(_Recorder())
    '''
)

PROCESS_KINDS = {  # what a process's command line holds -> how the report names it
    "shared.store.embedded_server": "store (nx-27017)",
    "local_runner": "job runner",
    "pingo.cli dev": "services (pingo dev)",
    "services.workflow_manager": "workflow_manager",
    "services.action_manager": "action_manager",
    "services.callback": "callback",
    "services.dataset_manager": "dataset_manager",
    "services.decision": "decision",
}


def kernel_cpu(pid: int) -> float:
    """A process's CPU seconds in the kernel so far (its stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


def cpu_by_kind(data: Path) -> dict[str, tuple[float, float, float]]:
    """Per kind of process: its CPU seconds, its waited-for children's, and of its own the
    part spent in the kernel (file creation, say: docs/performance.md, "The job runner")."""
    out: dict[str, tuple[float, float, float]] = {}
    for marker, kind in PROCESS_KINDS.items():
        for pid in pids_with(marker):
            with contextlib.suppress(OSError):
                # This run's: its data folder in the command line (store, runner) or in
                # PINGO_DATA_DIR (the services); not another run's, lingering.
                seen = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
                if str(data).encode() not in seen:
                    continue
                own, children = process_cpu(pid)
                was = out.get(kind, (0.0, 0.0, 0.0))
                out[kind] = (was[0] + own, was[1] + children, was[2] + kernel_cpu(pid))
    return out


def machine_busy() -> tuple[float, float]:
    """All CPUs' busy and total time so far (/proc/stat), in ticks."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def report_cpu(
    before: dict[str, tuple[float, float, float]], after: dict[str, tuple[float, float, float]], n: int
) -> None:
    print("  CPU per action (ms; of it in the kernel):")
    total = 0.0
    for kind in after:
        was = before.get(kind, (0.0, 0.0, 0.0))
        own, jobs_cpu, kernel = ((after[kind][i] - was[i]) / n * 1000 for i in range(3))
        total += own + (jobs_cpu if kind == "job runner" else 0)
        extra = f"  (+ {jobs_cpu:.1f} in the jobs it ran)" if kind == "job runner" else ""
        print(f"    {kind:22s} {own:6.1f}  ({kernel:4.1f}){extra}")
    print(f"    {'in all':22s} {total:6.1f}")


def read_trace(prefix: Path) -> list[tuple[float, float, int, str, str, str]]:
    rows = []
    for path in prefix.parent.glob(prefix.name + ".*"):
        pid = int(path.suffix[1:])
        for line in path.read_text().splitlines():
            start, end, command, coll, sender = line.split(" ", 4)
            rows.append((float(start), float(end), pid, command, coll, sender))
    return sorted(rows)


def label(sender: str) -> str:
    """A command by what it is for: the Pingo function that asked (past the store and
    move plumbing) and the store operation (``ending.record_output: record_output``)."""
    frames = [f.split(":") for f in sender.split(",")]
    plumbing = ("shared.store.transitions", "shared.lifecycle.moves")
    op = next((f for f in frames if f[0] not in plumbing), frames[0])
    op_name = "move" if op is not frames[0] and not op[0].startswith("shared.store.") else op[1]
    business = next((f for f in frames if not f[0].startswith(("shared.store.", *plumbing))), None)
    if business is None or business[0].endswith(("cli", "__main__", "runtime")):  # a task of its own: no caller
        return f"{op[0].rsplit('.', 1)[-1]}.{op[1]}"
    return f"{business[0].rsplit('.', 1)[-1]}.{business[1]}: {op_name}"


# Which part of a hop a command serves, by its label's start.
ROLES = ["finishing the parent, readying the child", "claiming the child", "after the child started, or beside"]
CRITICAL = ("service.on_callback", "actions.take_finish_lease", "datasets.get", "ending.record_output",
            "ending.ready_children")  # fmt: skip
STARTING = ("starting.claim_attempt", "starting.inputs_ready")


def role(name: str) -> str:
    if name.startswith(CRITICAL):
        return ROLES[0]
    if name.startswith(STARTING):
        return ROLES[1]
    return ROLES[2]


def draw(path: Path, rows, stamps: list[float], jobs: list[dict], first: int, hops: int, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0, t1 = stamps[first] - 0.004, stamps[first + hops] + 0.004
    shown = [r for r in rows if r[1] >= t0 and r[0] <= t1]
    senders = sorted(dict.fromkeys(label(r[5]) for r in shown), key=lambda n: (ROLES.index(role(n)), n))
    fig, ax = plt.subplots(figsize=(13, 0.32 * len(senders) + 2.4))
    colours = dict(zip(ROLES, ("tab:orange", "tab:blue", "tab:gray"), strict=True))
    lanes = {s: i + 1 for i, s in enumerate(senders)}
    for start, end, *_, sender in shown:
        name = label(sender)
        ax.barh(lanes[name], (end - start) * 1000, left=(start - t0) * 1000, height=0.6,
                color=colours[role(name)], edgecolor="black", linewidth=0.3)  # fmt: skip
    for i in range(first, first + hops + 1):
        x = (stamps[i] - t0) * 1000
        ax.axvline(x, color="green", linewidth=1.2)
        ax.text(x, 0.2, f" job {i} runs", color="green", fontsize=8, va="center")
        job = jobs[i]
        if job.get("submitted_at"):
            ax.plot((job["submitted_at"] - t0) * 1000, 0.2, marker="v", color="purple")
    ax.set_yticks([0.2, *lanes.values()], ["job runner: ▼ job taken, | job runs", *lanes])
    ax.invert_yaxis()
    ax.set_xlabel("ms (each bar: one store command, from its sending to its answer)")
    ax.set_title(title, fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    fig.legend(handles, list(colours), loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--length", type=int, default=200)
    ap.add_argument("--processes", action="store_true", help="the five services as processes over RabbitMQ")
    ap.add_argument("--plot", type=Path, help="draw the middle hops into this PNG")
    ap.add_argument("--hops", type=int, default=3, help="how many consecutive hops to draw")
    ap.add_argument("--independent", type=int, default=0, help="then this many actions without edges: CPU per action")
    ap.add_argument("--action-managers", type=int, default=1, help="with --processes")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hop-profile-"))
    (work / "sitecustomize.py").write_text(SITECUSTOMIZE)
    trace = work / "trace"
    os.environ[TRACE_ENV] = str(trace)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")]))
    server = (
        processes_server("amqp://guest:guest@127.0.0.1:5672/", args.action_managers) if args.processes else dev_server()
    )
    with server as (base, data):
        tag = uuid.uuid4().hex[:8]
        run_workflow(base, data, f"warmup-{tag}", [noop(f"warmup-{tag}", 0)], "")
        before, since = cpu_by_kind(data), time.time()
        actions = [noop(f"hop-{tag}", i, i - 1 if i else None) for i in range(args.length)]
        _, wf = run_workflow(base, data, f"chain-{tag}", actions, "chain")
        after = cpu_by_kind(data)
        if args.independent:
            spread = [noop(f"spread-{tag}", i) for i in range(args.independent)]
            busy0, cpu0, spread_since = machine_busy(), cpu_by_kind(data), time.time()
            wall, _ = run_workflow(base, data, f"independent-{tag}", spread, "independent")
            busy1, cpu1, spread_until = machine_busy(), cpu_by_kind(data), time.time()
    by = {a["localId"]: a for a in wf["actions"]}
    chain = [by[i] for i in range(args.length)]
    stamps = birth_times([Path(a["outputPath"]) for a in chain])
    jobs = []
    for a in chain:
        status = next((data / "local-jobs").glob(f"{a['id']}_*/status.json"), None)
        jobs.append(json.loads(status.read_text()) if status else {})
    traced = read_trace(trace)
    rows = [r for r in traced if since <= r[0] <= stamps[-1] + 0.05]
    hops = sorted((b - a) * 1000 for a, b in itertools.pairwise(stamps))
    n = len(chain)
    where = "five processes over RabbitMQ" if args.processes else "pingo dev"
    mean_hop = (stamps[-1] - stamps[0]) / (n - 1) * 1000
    print(f"chain of {n} no-op jobs, {where}, embedded nx-27017, store commands recorded")
    print(f"hop: mean {mean_hop:.1f} ms, median {statistics.median(hops):.1f}, p90 {hops[int(0.9 * len(hops))]:.1f}")
    print("\nchain:")
    report_cpu(before, after, n)
    print("\nstore commands per action, by sender (and mean time from sending to answer):")
    counts = collections.defaultdict(list)
    for start, end, _, command, coll, sender in rows:
        counts[(label(sender), command, coll)].append(end - start)
    for (name, command, coll), times in sorted(
        counts.items(), key=lambda kv: (ROLES.index(role(kv[0][0])), -len(kv[1]))
    ):
        if len(times) >= n / 2:
            mean = statistics.mean(times) * 1000
            print(f"  {len(times) / n:5.2f}  {name:48s} {command} {coll:10s} {mean:5.2f} ms  ({role(name)})")
    print(f"  {len(rows) / n:5.2f}  in all")
    if args.independent:
        m = args.independent
        share = (busy1[0] - busy0[0]) / max(1e-9, busy1[1] - busy0[1])
        print(f"\n{m} independent no-op jobs: {m / wall:.1f} jobs/s; the machine's CPUs were {share:.0%} busy")
        report_cpu(cpu0, cpu1, m)
        spread_rows = [r for r in traced if spread_since <= r[0] <= spread_until]
        print(f"  store commands per action: {len(spread_rows) / m:.2f}")
        # By sender too: under load the groups shrink or the scrape steps in, and this shows which.
        spread_counts = collections.Counter((label(r[5]), r[3], r[4]) for r in spread_rows)
        for (name, command, coll), count in spread_counts.most_common():
            if count >= m / 50:
                print(f"    {count / m:5.2f}  {name:48s} {command} {coll}")
    if args.plot:
        first = n // 2
        title = f"{args.hops} hops of a chain of no-op jobs ({where}); hop mean {mean_hop:.1f} ms"
        draw(args.plot, rows, stamps, jobs, first, args.hops, title)
        print(f"\ndrawn: {args.plot} (hops {first} to {first + args.hops})")
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
