"""Pingo beside its peers Snakemake (9.x) and Luigi (3.x): the same two workloads on each,
in one run.

1. Chain: N actions (``--chain``, default 50), each depending on the previous. Figure: the
   hop, child start minus parent end: median, p90, p99 over the N-1 edges; and the wall
   time of the whole chain.
2. Independent: M actions (``--independent``, default 500) with no edges. Figure: jobs per
   second, M over the wall time from submission to all done.

Every job, in every tool, is the same no-op: the argv ``mkdir -p <input paths...> <output
path>``. Pingo runs SHELL actions whose command is ``["mkdir", "-p"]``: its local
executor appends the action's additionalInput values, then its parents' output paths,
then the attempt's output path (shared/lifecycle/starting.py, JobRequest
arguments), so the output path is the last argument and a chain job also names its
parent's output, which already exists. The peers are given the same argv: Snakemake as
its ``shell:`` directive (Snakemake runs it with bash; a ``run:`` directive would spawn
a whole Snakemake process per job), Luigi from ``Task.run`` through ``subprocess.run``.
Every action has a name of its own: Pingo reuses the output of an identical computation,
and the name is part of the definition it compares.

How a hop is measured, the same for all three tools: a job's only work is one mkdir(2),
so its start and end are one instant, recorded by the filesystem as the birth time of
its output folder (statx, read with coreutils ``stat -c %.9W``; renames, Pingo's commit
included, and files written into the folder later, such as Snakemake's
``.snakemake_timestamp``, leave it alone). Hop i = birth(output i) - birth(output i-1):
from the parent's mkdir to the child's, which is the tool's whole reaction time plus the
child's exec of mkdir (about a millisecond, the same for every tool). The filesystem
takes its times from the kernel's coarse clock, so a stamp is good to one clock tick (4
ms at CONFIG_HZ=250; the step found is printed above the table): enough beside hops of
tens of milliseconds, coarse for the fastest peer's. For Pingo the hop
its own API reports (startedAt minus the parent's startedAt + seconds, as
benchmarks/chain_latency.py reads it) is printed as well, for comparison.

Wall times: for Pingo from just before the POST to the workflow's finishedAt (SUCCEEDED),
on a server started beforehand and warmed by one single-action workflow, as a service
would be; for a peer from its process start to its exit, which includes its interpreter
start and DAG building, since a peer has no server to submit to. Four jobs at once
everywhere: Pingo PINGO_LOCAL_SLOTS=4, ``snakemake --cores 4``, ``luigi --workers 4
--local-scheduler``.

Each figure is the median over ``--runs`` runs (default 3), interleaved: pingo,
snakemake, luigi, pingo, ... Every run starts from nothing: a fresh Pingo data directory
and server (``pingo dev`` from benchmarks/devserver.py; with ``--processes``, the five
services as separate processes over RabbitMQ, on an embedded nx-27017), a fresh work
folder for a peer. The peers are not Pingo dependencies: they are installed into a
virtual environment of their own (``--peers-venv``, default
~/.cache/pingo-bench/peers-venv, made with ``python3 -m venv`` and pip on first use and
reused after) and run as subprocesses from it.

    .venv/bin/python benchmarks/peers.py [--chain 50] [--independent 500] [--runs 3]
        [--only pingo,snakemake,luigi] [--processes [--action-managers N] [--amqp-url URL]]

Progress goes to stderr; the table (figures and the ratios Pingo/peer) to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from devserver import ROOT, call, dev_server, free_port, get

TOOLS = ("pingo", "snakemake", "luigi")
SLOTS = 4
PEER_REQUIREMENTS = ("snakemake>=9,<10", "luigi>=3,<4")
PEER_MAJORS = {"snakemake": "9", "luigi": "3"}
SERVICES = ("workflow_manager", "action_manager", "callback", "dataset_manager", "decision")
ATTEMPTS_DIR = ".pingo-attempts"  # shared/storage/base.py

SNAKEFILE = r"""
N = int(config["count"])
CHAIN = bool(int(config["chain"]))

wildcard_constraints:
    i=r"\d+",

rule all:
    input:
        [f"out/{N - 1}"] if CHAIN else expand("out/{i}", i=range(N)),

rule noop:
    input:
        lambda w: [f"out/{int(w.i) - 1}"] if CHAIN and int(w.i) > 0 else [],
    output:
        directory("out/{i}"),
    shell:
        "mkdir -p {input} {output}"
"""

LUIGI_MODULE = r"""
import subprocess

import luigi


class Noop(luigi.Task):
    root = luigi.Parameter()
    i = luigi.IntParameter()
    chain = luigi.BoolParameter()

    def requires(self):
        if self.chain and self.i > 0:
            return [Noop(root=self.root, i=self.i - 1, chain=True)]
        return []

    def output(self):
        return luigi.LocalTarget(f"{self.root}/{self.i}")

    def run(self):
        inputs = [t.path for t in self.input()]
        subprocess.run(["mkdir", "-p", *inputs, self.output().path], check=True)


class All(luigi.WrapperTask):
    root = luigi.Parameter()
    n = luigi.IntParameter()
    chain = luigi.BoolParameter()

    def requires(self):
        if self.chain:
            return [Noop(root=self.root, i=self.n - 1, chain=True)]
        return [Noop(root=self.root, i=i, chain=False) for i in range(self.n)]
"""


@dataclass
class Outcome:
    """One workload on one tool, once."""

    wall: float  # seconds
    stamps: list[float]  # birth times of the outputs, in chain order (empty for the independent workload)
    api_hops: list[float] | None = None  # Pingo's chain only: hops from its API
    runner_rss: float | None = None  # Pingo only: the most its job runner processes held at once, MB


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def show(label: str, done: int, total: int, t0: float) -> None:
    print(f"\r  {label}: {done}/{total} done, {time.time() - t0:6.1f} s", end="", file=sys.stderr, flush=True)


def birth_times(paths: list[Path]) -> list[float]:
    out = subprocess.run(["stat", "-c", "%.9W", "--", *map(str, paths)], capture_output=True, text=True, check=True)
    stamps = [float(x) if x not in ("-", "?") else 0.0 for x in out.stdout.split()]
    if len(stamps) != len(paths) or min(stamps) <= 0:
        sys.exit(f"no birth times from this filesystem (stat -c %W said {out.stdout.split()[:3]}): cannot time hops")
    return stamps


def birth_step() -> float:
    """The smallest step between two birth times here: one tick of the filesystem's clock."""
    folder = Path(tempfile.mkdtemp(prefix="pingo-bench-tick-"))
    paths = [folder / str(i) for i in range(40)]
    for path in paths:
        path.mkdir()
        time.sleep(0.0005)
    steps = [d for d in hops(birth_times(paths)) if d > 0]
    remove(folder)
    return min(steps, default=0.0)


def hops(stamps: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(stamps)]


def hop_figures(values: list[float]) -> tuple[float, float, float]:
    """Median, p90, p99 (linear interpolation between the values)."""
    q = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), q[89], q[98]


def count_dirs(folder: Path) -> int:
    try:
        return sum(1 for e in os.scandir(folder) if not e.name.startswith("."))
    except FileNotFoundError:
        return 0


def remove(top: Path) -> None:
    """Delete a run's folder, Pingo's sealed (read-only) datasets too."""
    for dirpath, dirnames, _ in os.walk(top):
        for d in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, d), 0o700)
    shutil.rmtree(top, ignore_errors=True)


# --- peers ---------------------------------------------------------------------------


def peer_versions(venv: Path) -> dict[str, str] | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    probe = "import importlib.metadata as m; print(m.version('snakemake'), m.version('luigi'))"
    r = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    versions = dict(zip(("snakemake", "luigi"), r.stdout.split(), strict=False))
    ok = all(versions.get(k, "").split(".")[0] == major for k, major in PEER_MAJORS.items())
    return versions if ok else None


def ensure_peers(venv: Path) -> dict[str, str]:
    """The peers' own virtual environment, made (or mended) if it lacks them."""
    if versions := peer_versions(venv):
        return versions
    say(f"installing {' '.join(PEER_REQUIREMENTS)} into {venv}")
    if not (venv / "bin" / "python").exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *PEER_REQUIREMENTS]
    subprocess.run(pip, check=True, stdout=sys.stderr)
    versions = peer_versions(venv)
    if versions is None:
        sys.exit(f"the peers' venv {venv} still lacks {' '.join(PEER_REQUIREMENTS)}")
    return versions


def run_peer(tool: str, venv: Path, chain: bool, n: int, label: str) -> Outcome:
    work = Path(tempfile.mkdtemp(prefix=f"pingo-bench-{tool}-"))
    out = work / "out"
    if tool == "snakemake":
        (work / "Snakefile").write_text(SNAKEFILE)
        argv = [str(venv / "bin" / "snakemake"), "--snakefile", str(work / "Snakefile"), "--directory", str(work)]
        argv += ["--cores", str(SLOTS), "--config", f"count={n}", f"chain={int(chain)}"]
    else:
        (work / "luigi_bench.py").write_text(LUIGI_MODULE)
        argv = [str(venv / "bin" / "luigi"), "--module", "luigi_bench", "All", "--root", str(out), "--n", str(n)]
        argv += ["--workers", str(SLOTS), "--local-scheduler", *(["--chain"] if chain else [])]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(work)  # for luigi --module
    with open(work / "run.log", "wb") as log:
        t0 = time.time()
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        # Reaped in a thread of its own, so that the exit is timed exactly, not to a poll.
        ended: list[float] = []
        reaper = threading.Thread(target=lambda: (proc.wait(), ended.append(time.time())))
        reaper.start()
        while reaper.is_alive():
            show(label, count_dirs(out), n, t0)
            reaper.join(0.5)
    done = count_dirs(out)
    show(label, done, n, t0)
    wall = ended[0] - t0
    print(f" -> {wall:.2f} s", file=sys.stderr)
    if proc.returncode != 0 or done != n:
        tail = (work / "run.log").read_text(errors="replace")[-3000:]
        sys.exit(f"{tool} exited {proc.returncode} with {done}/{n} outputs; log {work / 'run.log'}:\n{tail}")
    stamps = birth_times([out / str(i) for i in range(n)]) if chain else []
    remove(work)
    return Outcome(wall, stamps)


# --- Pingo ---------------------------------------------------------------------------


@contextlib.contextmanager
def processes_server(amqp_url: str, action_managers: int = 1, **settings: str) -> Iterator[tuple[str, Path]]:
    """The five services as separate processes over RabbitMQ (as tests/support/system.py
    ``Processes`` starts them), on one embedded nx-27017 and a fresh data directory;
    ``settings`` are more ``PINGO_*`` variables (without the prefix)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from shared.store.embedded import EmbeddedMongo

    data = Path(tempfile.mkdtemp(prefix="pingo-bench-"))
    mongo = EmbeddedMongo(data)
    mongo_url = asyncio.run(mongo.start(timeout=30))
    exchange = f"pingo.bench.{uuid.uuid4().hex[:10]}"  # nothing shared with others on the broker
    port, callback_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(
        PINGO_DATA_DIR=str(data), PINGO_MONGO_URL=mongo_url, PINGO_AMQP_URL=amqp_url, PINGO_EXCHANGE=exchange,
        PINGO_PORT=str(port), PINGO_CALLBACK_PORT=str(callback_port), PINGO_LOCAL_SLOTS=str(SLOTS),
    )  # fmt: skip
    env.update({f"PINGO_{k}": v for k, v in settings.items()})
    procs: list[subprocess.Popen] = []
    try:
        for name in (*SERVICES, *["action_manager"] * (action_managers - 1)):
            with open(data / f"{name}.log", "ab") as log:
                argv = [sys.executable, "-m", f"services.{name}"]
                procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log))
        for p in (port, callback_port):
            deadline = time.time() + 60
            while True:
                try:
                    get(f"http://127.0.0.1:{p}/healthz")
                    break
                except OSError:
                    if time.time() > deadline or any(proc.poll() is not None for proc in procs):
                        sys.exit(f"the Pingo services did not start; see {data}/*.log")
                    time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", data
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        mongo.stop()
        asyncio.run(drop_bus(amqp_url, exchange))


async def drop_bus(amqp_url: str, exchange: str) -> None:
    """Delete the run's durable queues and exchanges from the shared broker."""
    import aio_pika

    try:
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            for queue in [f"{exchange}.{s}" for s in SERVICES] + [f"{exchange}.dead"]:
                await channel.queue_delete(queue)
            for name in (exchange, f"{exchange}.dead"):
                await channel.exchange_delete(name)
    except Exception as exc:
        say(f"could not remove the queues of {exchange} from the broker: {exc!r}")


def run_workflow(base: str, data: Path, name: str, actions: list[dict], label: str) -> tuple[float, dict]:
    """POST a workflow and wait for it: the wall time POST -> finishedAt, and the workflow."""
    datasets = data / "datasets"
    before = count_dirs(datasets)
    t0 = time.time()
    status, body = call(f"{base}/api/v1/workflows", json.dumps({"name": name, "actions": actions}).encode())
    if status != 201:
        sys.exit(f"POST /api/v1/workflows answered {status}: {json.dumps(body)[:2000]}")
    # The light listing, not the workflow with all its actions, so that watching costs the server little.
    listing = f"{base}/api/v1/workflows?name={name}&limit=1"
    while True:
        state = get(listing)["workflows"][0]["state"]
        if label:
            show(label, count_dirs(datasets) - before, len(actions), t0)
        if state != "RUNNING":
            break
        time.sleep(0.5)
    wf = get(f"{base}/api/v1/workflows/{body['id']}")
    if wf["state"] != "SUCCEEDED":
        errors = [(a["localId"], a["state"], a.get("error")) for a in wf["actions"] if a["state"] != "FINISHED"]
        sys.exit(f"\nPingo workflow {wf['id']} ended {wf['state']}: {errors[:5]}; see {data}")
    wall = wf["finishedAt"] - t0
    if label:
        show(label, len(actions), len(actions), t0)
        print(f" -> {wall:.2f} s", file=sys.stderr)
    return wall, wf


def noop(name: str, i: int, parent: int | None = None) -> dict:
    return {
        "id": i,
        "name": f"{name}-{i}",
        "type": "SHELL",
        "command": ["mkdir", "-p"],
        "parentActions": [] if parent is None else [parent],
    }


def run_pingo(
    server: Callable[[], contextlib.AbstractContextManager[tuple[str, Path]]], chain_n: int, indep_n: int, run: str
) -> tuple[Outcome, Outcome]:
    """Both workloads on one fresh server: the chain, then the independent actions."""
    say(f"  pingo: starting the server ({run})")
    with server() as (base, data):
        tag = uuid.uuid4().hex[:8]
        run_workflow(base, data, f"warmup-{tag}", [noop(f"warmup-{tag}", 0)], "")
        actions = [noop(f"hop-{tag}", i, i - 1 if i else None) for i in range(chain_n)]
        wall, wf = run_workflow(base, data, f"chain-{tag}", actions, f"pingo chain {run}")
        by = {a["localId"]: a for a in wf["actions"]}
        chain_actions = [by[i] for i in range(chain_n)]
        stamps = birth_times([Path(a["outputPath"]) for a in chain_actions])
        api_hops = [
            child["startedAt"] - (parent["startedAt"] + parent["seconds"])
            for parent, child in itertools.pairwise(chain_actions)
            if None not in (child["startedAt"], parent["startedAt"], parent["seconds"])
        ]
        chain = Outcome(wall, stamps, api_hops)
        actions = [noop(f"noop-{tag}", i) for i in range(indep_n)]
        with RssWatch(str(data / "local-jobs")) as rss:
            wall, _ = run_workflow(base, data, f"independent-{tag}", actions, f"pingo independent {run}")
    remove(data)
    return chain, Outcome(wall, [], runner_rss=rss.peak_mb)


def process_cpu(pid: int) -> tuple[float, float]:
    """A process's CPU seconds so far (/proc/<pid>/stat): its own, and those of the children
    it has waited for (a job runner's jobs). Raises OSError if it is gone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (
        int(fields[13]) + int(fields[14])
    ) / tick  # utime+stime, cutime+cstime


def pids_with(*markers: str) -> list[int]:
    """The processes whose command line holds any of ``markers``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmdline for m in markers):
            found.append(int(entry.name))
    return found


class RssWatch:
    """The peak total resident memory of the processes whose command line names
    ``marker`` (Pingo's job runner for one jobs folder), sampled every 0.2 s."""

    def __init__(self, marker: str) -> None:
        self.marker, self.peak_mb = marker, 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def __enter__(self) -> RssWatch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()

    def watch(self) -> None:
        while not self.stop.wait(0.2):
            total = 0
            for pid in pids_with(self.marker):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
            self.peak_mb = max(self.peak_mb, total / 1024)


# --- report --------------------------------------------------------------------------


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "ms":
        return f"{value * 1000:.1f} ms" if value < 0.01 else f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if unit == "s" else f"{value:.1f}/s"


def report(
    tools: list[str], chain: dict[str, list[Outcome]], indep: dict[str, list[Outcome]], args: argparse.Namespace
) -> None:
    def med(figure: Callable[[Outcome], float], runs: dict[str, list[Outcome]]) -> dict[str, float | None]:
        """Per tool, the median of a figure over its runs."""
        return {t: statistics.median(figure(o) for o in runs[t]) if t in tools else None for t in TOOLS}

    rows: list[tuple[str, str, dict[str, float | None]]] = [
        (f"chain of {args.chain}: hop {name}", "ms", med(lambda o, k=k: hop_figures(hops(o.stamps))[k], chain))
        for k, name in enumerate(("median", "p90", "p99"))
    ]
    rows.append((f"chain of {args.chain}: wall", "s", med(lambda o: o.wall, chain)))
    rows.append((f"{args.independent} independent: jobs/s", "/s", med(lambda o: args.independent / o.wall, indep)))

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a is not None and b else "n/a"

    print()
    print("| workload | Pingo | Snakemake | Luigi | Pingo/Snakemake | Pingo/Luigi |")
    print("|---|---:|---:|---:|---:|---:|")
    for title, unit, v in rows:
        cells = [fmt(v[t], unit) for t in TOOLS] + [ratio(v["pingo"], v[peer]) for peer in ("snakemake", "luigi")]
        print(f"| {title} | {' | '.join(cells)} |")
    print()
    print("Ratios: for hops and wall, below 1 means Pingo is faster; for jobs/s, above 1 means Pingo is faster.")
    if "pingo" in tools:
        api = [hop_figures(o.api_hops) for o in chain["pingo"] if o.api_hops and len(o.api_hops) > 1]
        if api:
            m, p90, p99 = (statistics.median(f[k] for f in api) for k in range(3))
            print(
                f"Pingo's own API (startedAt - parent startedAt+seconds): hop median {fmt(m, 'ms')}, "
                f"p90 {fmt(p90, 'ms')}, p99 {fmt(p99, 'ms')}."
            )
        peaks = [o.runner_rss for o in indep["pingo"] if o.runner_rss is not None]
        if peaks:
            print(f"Pingo's job runner, resident memory during the independent workload: at most {max(peaks):.0f} MB.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chain", type=int, default=50, help="length of the chain (default 50)")
    ap.add_argument("--independent", type=int, default=500, help="independent actions (default 500)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each tool, interleaved; figures are medians")
    ap.add_argument("--only", default=",".join(TOOLS), help="tools to run, comma-separated (default all)")
    ap.add_argument("--processes", action="store_true", help="Pingo as five service processes over RabbitMQ")
    ap.add_argument("--action-managers", type=int, default=1, help="with --processes: action manager processes")
    ap.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/", help="broker for --processes")
    ap.add_argument("--peers-venv", type=Path, default=Path.home() / ".cache" / "pingo-bench" / "peers-venv")
    args = ap.parse_args()
    tools = [t.strip() for t in args.only.split(",") if t.strip()]
    if unknown := set(tools) - set(TOOLS):
        ap.error(f"--only: unknown {', '.join(sorted(unknown))}; choose from {', '.join(TOOLS)}")
    tools = [t for t in TOOLS if t in tools]
    if args.chain < 3 or args.independent < 1 or args.runs < 1:
        ap.error("--chain must be at least 3, --independent and --runs at least 1")

    versions = ensure_peers(args.peers_venv) if set(tools) - {"pingo"} else {}
    if args.processes:
        host, port = "127.0.0.1", 5672
        with socket.socket() as s:
            s.settimeout(3)
            if s.connect_ex((host, port)) != 0:
                sys.exit(f"--processes needs RabbitMQ on {host}:{port}")

        def server() -> contextlib.AbstractContextManager[tuple[str, Path]]:
            return processes_server(args.amqp_url, args.action_managers)
    else:

        def server() -> contextlib.AbstractContextManager[tuple[str, Path]]:
            return dev_server(LOCAL_SLOTS=str(SLOTS))

    chain: dict[str, list[Outcome]] = {t: [] for t in tools}
    indep: dict[str, list[Outcome]] = {t: [] for t in tools}
    for r in range(args.runs):
        run = f"run {r + 1}/{args.runs}"
        for tool in tools:
            say(f"[{run}] {tool}")
            if tool == "pingo":
                c, i = run_pingo(server, args.chain, args.independent, run)
            else:
                c = run_peer(tool, args.peers_venv, True, args.chain, f"{tool} chain {run}")
                i = run_peer(tool, args.peers_venv, False, args.independent, f"{tool} independent {run}")
            chain[tool].append(c)
            indep[tool].append(i)
            m, p90, p99 = hop_figures(hops(c.stamps))
            say(f"  {tool}: hop median {fmt(m, 'ms')} p90 {fmt(p90, 'ms')} p99 {fmt(p99, 'ms')}, "
                f"{args.independent / i.wall:.1f} jobs/s")  # fmt: skip

    mode = (
        f"five processes over RabbitMQ, {args.action_managers} action manager(s)"
        if args.processes
        else "pingo dev (one process, in-process bus)"
    )
    peers = ", ".join(f"{k} {v}" for k, v in versions.items())
    print(f"Pingo ({mode}, local executor, {SLOTS} slots)" + (f" vs {peers}" if peers else ""))
    print(
        f"chain of {args.chain}, {args.independent} independent no-op jobs (mkdir -p); {SLOTS} jobs at once; "
        f"median of {args.runs} interleaved run(s); {os.cpu_count()} CPUs"
    )
    print(f"hops from output birth times, which step by {birth_step() * 1000:.1f} ms on this filesystem")
    report(tools, chain, indep, args)


if __name__ == "__main__":
    main()
