"""``pingo``: run the services, submit and watch workflows, look at datasets and timelines."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from pingo.client import ApiError, Client
from pingo.display import human, render_dag, render_progress, watch

# This module is the command line and nothing else: no other module imports it. Building
# the parser imports neither the services nor the optional packages; each command imports
# what it needs when it runs.

DEFAULT_URL = os.environ.get("PINGO_URL", "http://127.0.0.1:8080")

# Commands owned by another package, which parses their arguments (``pingo`` hands them
# over untouched) and runs them: name -> (module, function(argv, prog) -> exit code, help).
# The package is imported only when its command runs, so every other command works in an
# installation without it: the service image leaves out the Hadoop emulator.
ELSEWHERE = {
    "emulate-hadoop": (
        "hadoop_emulator.cli",
        "main",
        "run an emulated Oozie + WebHDFS (NameNode, DataNode) over a local dir",
    ),
    "evaluate": (
        "evaluation.cli",
        "main_evaluate",
        "thesis section 4.2 on the simulator: CSV and plots of every algorithm",
    ),
    "whatif": (
        "evaluation.cli",
        "main_whatif",
        "replay this installation's recorded history under other algorithms/capacities",
    ),
}


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"pingo: {message}", file=sys.stderr)
    raise SystemExit(code)


def api_error(exc: ApiError) -> NoReturn:
    body = exc.body if isinstance(exc.body, dict) else {"error": str(exc.body)}
    print(f"pingo: {body.get('error', exc)}", file=sys.stderr)
    for v in body.get("violations", []):
        where = v.get("loc", "?") + (f" (action {v['actionId']})" if "actionId" in v else "")
        print(f"  - {where}: {v['message']}", file=sys.stderr)
    raise SystemExit(1)


def load_workflow(path: str) -> Any:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}")


async def cmd_submit(args: argparse.Namespace) -> int:
    workflow = load_workflow(args.file)
    async with Client(args.url) as client:
        try:
            plan = await client.submit(workflow)
        except ApiError as exc:
            api_error(exc)
        computed = sum(a["decision"] == "compute" for a in plan["actions"])
        following = sum(a.get("reason") == "in_flight" for a in plan["actions"])
        reused = len(plan["actions"]) - computed - following
        print(
            f"submitted {plan['id']}: {computed} to compute, {reused} reused"
            + (f", {following} following a computation in flight" if following else "")
        )
        if not args.wait:
            print(json.dumps(plan, indent=2) if args.json else plan["id"])
            return 0
        wf = await watch(client, plan["id"])
        print(f"{wf['id']} {wf['state']}")
        return 0 if wf["state"] == "SUCCEEDED" else 1


async def cmd_status(args: argparse.Namespace) -> int:
    async with Client(args.url) as client:
        try:
            wf = await client.workflow(args.id)
        except ApiError as exc:
            api_error(exc)
    if args.json:
        print(json.dumps(wf, indent=2))
    else:
        print("\n".join(render_dag(wf)))
        print("\n".join(render_progress(wf, wf.get("createdAt") or time.time())[1:]))
    return 0


async def cmd_kill(args: argparse.Namespace) -> int:
    async with Client(args.url) as client:
        try:
            wf = await client.kill(args.id)
        except ApiError as exc:
            api_error(exc)
    print(f"{wf['id']} kill requested; now {wf['state']}")
    return 0


async def cmd_datasets(args: argparse.Namespace) -> int:
    async with Client(args.url) as client:
        try:
            body = await client.datasets(args.state)
        except ApiError as exc:
            api_error(exc)
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    stored = body["bytesByState"].get("STORED", 0)
    cap = body["capacityBytes"]
    bar = int(30 * min(1.0, stored / cap)) if cap else 0
    print(
        f"managed intermediate storage [{'█' * bar}{'░' * (30 - bar)}] {human(stored)} of {human(cap)} "
        f"(decision at {body['threshold']:.0%})"
    )
    for state, size in sorted(body["bytesByState"].items()):
        print(f"  {state:<17} {human(size)}")
    print(f"{'hash':<14} {'state':<17} {'size':>10} {'files':>6} {'checksum':<10} {'compute':>8} {'uses':>5} claims")
    for d in body["datasets"]:
        secs = f"{d['computeSeconds']:.1f}s" if d["computeSeconds"] is not None else "-"
        files = d.get("files") if d.get("files") is not None else "-"
        checksum = (d.get("checksum") or "-")[:8]
        print(
            f"{d['hash'][:12]:<14} {d['state']:<17} {human(d['size']):>10} {files:>6} {checksum:<10} {secs:>8} "
            f"{d['useCount']:>5} {len(d['claims'])}"
        )
    return 0


async def cmd_timeline(args: argparse.Namespace) -> int:
    async with Client(args.url) as client:
        try:
            body = await client.timeline(args.id)
        except ApiError as exc:
            api_error(exc)
    rows = body["transitions"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    t0 = rows[0]["at"] if rows else 0
    for r in rows:
        note = f"  ({r['note']})" if r.get("note") else ""
        ident = r["id"] if r["kind"] != "dataset" else r["id"][:12]
        print(f"+{r['at'] - t0:8.3f}s  {r['kind']:<8} {ident:<40} {r['state']:<17} by {r['by']}{note}")
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    from pingo.dev import all_services
    from shared.config import Settings
    from shared.runtime import configure_logging, serve

    configure_logging(args.log_level)
    overrides: dict[str, Any] = {}
    if args.port:
        overrides["port"] = args.port
        if "PINGO_CALLBACK_PORT" not in os.environ:
            overrides["callback_port"] = args.port + 1
    settings = Settings(**overrides)
    print(
        f"pingo dev: gateway on http://{settings.host}:{settings.port}, callbacks on {settings.callback_url}, "
        f"data in {settings.data_dir.resolve()}",
        flush=True,
    )
    asyncio.run(serve(all_services, settings))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from pingo.dev import SERVICES
    from shared.runtime import configure_logging, serve

    configure_logging(args.log_level)
    asyncio.run(serve(lambda ctx: [SERVICES[args.service](ctx)]))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pingo.demo import run_demo

    return asyncio.run(run_demo(args))


def cmd_elsewhere(args: argparse.Namespace) -> int:
    module_name, function, _ = ELSEWHERE[args.command]
    package = module_name.partition(".")[0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name not in (package, module_name):
            raise
        fail(
            f"{args.command}: the {package} package is not installed here"
            + (" (the service image leaves it out)" if package == "hadoop_emulator" else "")
        )
    return getattr(module, function)(args.argv, f"pingo {args.command}")


def service_names() -> list[str]:
    """The services ``python -m services.<name>`` runs: the subpackages of ``services`` with a
    ``__main__``. Read from the package, so that the parser imports none of them."""
    import services

    return sorted(p.name for p in resources.files(services).iterdir() if p.joinpath("__main__.py").is_file())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pingo", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def client_cmd(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_)
        c.add_argument("--url", default=DEFAULT_URL, help=f"gateway URL (default {DEFAULT_URL}, env PINGO_URL)")
        c.add_argument("--json", action="store_true", help="print the raw JSON")
        return c

    d = sub.add_parser("dev", help="run all five services in one process (embedded defaults)")
    d.add_argument(
        "--port", type=int, help="gateway port (default 8080); callbacks on port+1 unless PINGO_CALLBACK_PORT is set"
    )
    d.add_argument("--log-level", default="INFO")
    d.set_defaults(run=cmd_dev)
    s = sub.add_parser("serve", help="run one service")
    s.add_argument("service", choices=service_names())
    s.add_argument("--log-level", default="INFO")
    s.set_defaults(run=cmd_serve)
    m = sub.add_parser("demo", help="start Pingo, run the bundled examples twice, show what was reused")
    m.add_argument("--port", type=int, default=None)
    m.add_argument("--examples", default=str(Path("examples")), help="folder of example workflows")
    m.add_argument("--keep-running", action="store_true", help="keep serving after the demo")
    m.set_defaults(run=cmd_demo)
    for name, (_, _, help_) in ELSEWHERE.items():
        # No options of its own (prefix_chars that no argument starts with): every argument,
        # --help included, goes to the owning package's parser.
        e = sub.add_parser(name, help=help_, add_help=False, prefix_chars="\0")
        e.add_argument("argv", nargs=argparse.REMAINDER)
        e.set_defaults(run=cmd_elsewhere)
    c = client_cmd("submit", "submit a workflow JSON file")
    c.add_argument("file")
    c.add_argument("--wait", action="store_true", help="show live progress until the workflow ends")
    c.set_defaults(run=cmd_submit)
    c = client_cmd("status", "a workflow's state, drawn as its DAG")
    c.add_argument("id")
    c.set_defaults(run=cmd_status)
    c = client_cmd("kill", "kill a running workflow")
    c.add_argument("id")
    c.set_defaults(run=cmd_kill)
    c = client_cmd("datasets", "managed datasets and storage usage")
    c.add_argument("--state")
    c.set_defaults(run=cmd_datasets)
    c = client_cmd("timeline", "a workflow's transitions in time order")
    c.add_argument("id")
    c.set_defaults(run=cmd_timeline)
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        result = args.run(args)
        code = asyncio.run(result) if asyncio.iscoroutine(result) else result
    except BrokenPipeError:
        # The reader went away (pingo datasets | head): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    raise SystemExit(code)


if __name__ == "__main__":
    main()
