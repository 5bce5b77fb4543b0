"""``pingo``: run the services, submit and watch workflows, look at datasets and timelines."""

from __future__ import annotations

import argparse
import asyncio
import copy
import importlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from pingo.client import ApiError, Client, default_url
from pingo.display import (
    console,
    dataset_changed,
    dataset_detail,
    datasets_view,
    dry_run_view,
    planned_summary,
    render_status,
    show,
    timeline_table,
    usage_table,
    watch,
    workflows_table,
)
from pingo.suggesting_parser import SuggestingParser, mark_subcommands
from pingo.terminal_text import escape_controls
from pingo.users import add_parser as users_commands

# This module is the command line and nothing else: no other module imports it. Building
# the parser imports neither the services nor the optional packages; each command imports
# what it needs when it runs.

URL_HELP = "gateway URL (default: env PINGO_URL, else http://$PINGO_HOST:$PINGO_PORT, http://127.0.0.1:8080)"

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
    "hadoop-minicluster": (
        "pingo.minicluster.cli",
        "main",
        "run Apache Hadoop's real mini cluster (HDFS with WebHDFS, YARN) and print Pingo's settings for it",
    ),
    "sqoop-classpath": (
        "pingo.minicluster.sqoop_classpath",
        "main",
        "print the class path of SQOOP actions on the local executor (PINGO_SQOOP_CLASSPATH)",
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
    print(f"pingo: {escape_controls(message, keep=chr(10))}", file=sys.stderr)
    raise SystemExit(code)


def api_error(exc: ApiError) -> NoReturn:
    first, *rest = exc.lines()
    if exc.status == 401:
        rest.append("  (set PINGO_TOKEN to your token, or put it in ~/.config/pingo/token; an admin makes one with "
                    "pingo users add NAME)")  # fmt: skip
    if exc.status == 0 and first.startswith("cannot reach"):
        rest.append("  (is Pingo running? Start one here with `pingo dev`, or point the CLI at yours with "
                    "PINGO_URL or --url)")  # fmt: skip
    # The server's words may quote a submitted name: shown, never obeyed by the terminal.
    print(*(escape_controls(line, keep="\n") for line in [f"pingo: {first}", *rest]), sep="\n", file=sys.stderr)
    raise SystemExit(1)


@asynccontextmanager
async def gateway(args: argparse.Namespace) -> AsyncIterator[Client]:
    """A client of the gateway ``--url`` names, or the environment's (PINGO_URL, PINGO_HOST,
    PINGO_PORT), open for the block. An error answer inside the block ends the command with
    the server's message (exit 1)."""
    try:
        client = Client(getattr(args, "url", None) or default_url())
    except ValueError as exc:
        fail(str(exc))
    async with client:
        try:
            yield client
        except ApiError as exc:
            api_error(exc)


def load_workflow(path: str) -> Any:
    if path.endswith(".py"):  # a workflow written in Python (docs/workflows-in-python.md)
        from pingo.workflow_file import WorkflowFileError, load

        try:
            return load(path)
        except WorkflowFileError as exc:
            fail(str(exc))
    try:
        text = Path(path).read_text()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    from shared import strict_json  # here: the parser of ``pingo`` imports nothing of ``shared``

    try:
        # A key given twice in one object is kept apart, to be refused.
        return strict_json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}")


def refuse_repeated_keys(path: str, workflow: Any) -> None:
    """Sent as it is, a file with a key given twice would reach the server with the last
    value only (JSON encoding keeps one): refused here, each key named with where it is."""
    from shared.workflow_spec import repeated_keys

    if found := repeated_keys(workflow):
        fail(f"{path}: " + "; ".join(f"{v.loc}: {v.message}" for v in found))


def load_with_values(args: argparse.Namespace) -> Any:
    """The workflow of ``args.file``, with the ``-p NAME=VALUE`` values in its ``parameterValues``
    (over any the file gives): the server fills them in (docs/planning.md, "Parameters")."""
    workflow = load_workflow(args.file)
    given = {}
    for pair in getattr(args, "param", None) or ():
        name, eq, value = pair.partition("=")
        if not eq or not name:
            fail(f"-p {pair!r}: a parameter is given as NAME=VALUE")
        given[name] = value
    if given and isinstance(workflow, dict):
        known = workflow.get("parameterValues")
        # A copy of the same kind: a top-level key given twice is still refused.
        workflow = copy.copy(workflow)
        workflow["parameterValues"] = {**(known if isinstance(known, dict) else {}), **given}
    return workflow


def cmd_validate(args: argparse.Namespace) -> int:
    """The workflow language's checks, here: no server, nothing stored. Paths against the
    allowed roots, action folders and executor support are the server's to check
    (``pingo submit --dry-run``)."""
    from shared.workflow_spec import parse_workflow

    spec, violations = parse_workflow(load_with_values(args))
    if args.json:
        found = [v.model_dump(exclude_none=True) for v in violations]
        print(json.dumps({"valid": spec is not None, "violations": found}, indent=2))
    elif spec is None:
        print(f"pingo: {args.file}: {len(violations)} violation(s)", file=sys.stderr)
        for v in violations:
            where = v.loc if v.actionId is None else f"{v.loc} (action {json.dumps(v.actionId)})"
            print(f"  - {where}: {v.message}", file=sys.stderr)
    else:
        g = spec.graph()
        roots = sum(g.in_degree(n) == 0 for n in g)
        leaves = sum(g.out_degree(n) == 0 for n in g)
        counts = ((len(g), "action", "actions"), (roots, "root", "roots"), (leaves, "leaf", "leaves"))
        print(f"{args.file}: valid: " + ", ".join(f"{n} {one if n == 1 else many}" for n, one, many in counts))
    return 0 if spec is not None else 1


async def cmd_dry_run(args: argparse.Namespace, workflow: Any) -> int:
    async with gateway(args) as client:
        plan = await client.dry_run(workflow)
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        show(console(), dry_run_view(plan))
    return 0


async def cmd_submit(args: argparse.Namespace) -> int:
    workflow = load_with_values(args)
    refuse_repeated_keys(args.file, workflow)
    if args.dry_run:
        if args.wait:
            fail("--dry-run submits nothing to wait for: give one of --dry-run and --wait")
        return await cmd_dry_run(args, workflow)
    async with gateway(args) as client:
        plan = await client.submit(workflow)
        # With --json, stdout is the JSON alone (a program reads it); the summary is for a person.
        print(f"submitted {plan['id']}: {planned_summary(plan['actions'])}", file=sys.stderr if args.json else None)
        if not args.wait:
            print(json.dumps(plan, indent=2) if args.json else plan["id"])
            return 0
        wf = await watch(client, plan["id"])
        print(f"{wf['id']} {wf['state']}")
        return 0 if wf["state"] == "SUCCEEDED" else 1


async def cmd_status(args: argparse.Namespace) -> int:
    async with gateway(args) as client:
        wf = await client.workflow(args.id)
    if args.json:
        print(json.dumps(wf, indent=2))
    else:
        show(console(), render_status(wf))
    return 0


async def cmd_list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        fail("--limit must be at least 1")
    async with gateway(args) as client:
        found = await client.workflows(args.limit, state=args.state, name=args.name)
        # The list leaves actions out: an ended workflow's outcome counts are recorded on it;
        # only one still running is read whole.
        gate = asyncio.Semaphore(8)

        async def detailed(wf: dict[str, Any]) -> dict[str, Any]:
            if wf.get("outcome"):
                return wf
            async with gate:
                return await client.workflow(wf["id"])

        if not args.json:  # --json prints the list's own items, as the API gives them
            found = await asyncio.gather(*(detailed(wf) for wf in found))
    if args.json:
        print(json.dumps(found, indent=2))
    elif not found:
        print("no workflows" + (" matching" if args.state or args.name else ""), file=sys.stderr)
    else:
        show(console(), workflows_table(found))
    return 0


async def cmd_kill(args: argparse.Namespace) -> int:
    async with gateway(args) as client:
        wf = await client.kill(args.id)
    print(f"{wf['id']} kill requested; now {wf['state']}")
    return 0


async def cmd_datasets(args: argparse.Namespace) -> int:
    if getattr(args, "datasets_command", None) in ("delete", "invalidate", "pin", "unpin", "expire"):
        return await cmd_dataset_change(args)
    if getattr(args, "hash", None):
        return await cmd_dataset_show(args)
    if args.by_user:
        async with gateway(args) as client:
            rows = await client.usage_by_user()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            show(console(), usage_table(rows))
        return 0
    async with gateway(args) as client:
        body = await client.datasets(args.state)
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    show(console(), datasets_view(body))
    return 0


async def full_hash(client: Client, given: str) -> str:
    """The hash ``given`` names: itself, or the one dataset whose hash starts with it (the
    table shows 12 characters of a hash)."""
    try:
        return (await client.dataset(given))["hash"]
    except ApiError as exc:
        if exc.status != 404:
            raise
        listed = (await client.datasets())["datasets"]
        matches = [x["hash"] for x in listed if x["hash"].startswith(given)]
        if len(matches) > 1:
            fail(f"{given!r} is the start of {len(matches)} dataset hashes: give more of it", 1)
        if not matches:
            raise
        return matches[0]


async def cmd_dataset_show(args: argparse.Namespace) -> int:
    async with gateway(args) as client:
        d = await client.dataset(await full_hash(client, args.hash))
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        show(console(), dataset_detail(d))
    return 0


async def cmd_dataset_change(args: argparse.Namespace) -> int:
    """``pingo datasets delete|invalidate|pin|unpin|expire HASH``: owner or admin only."""
    verb = args.datasets_command
    async with gateway(args) as client:
        h = await full_hash(client, args.hash)
        if verb == "delete":
            body = await client.delete_dataset(h)
        elif verb == "invalidate":
            body = await client.invalidate_dataset(h, args.descendants)
        elif verb == "expire":
            body = await client.change_dataset(h, {"expiresAt": expiry(args.when)})
        else:
            body = await client.change_dataset(h, {"pinned": verb == "pin"})
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        print(dataset_changed(verb, body))
    return 0


def expiry(when: str) -> float | str | None:
    """``never``, a time from now (``+30m``, ``+7d``), or what the API takes (ISO 8601, Unix seconds)."""
    if when.lower() == "never":
        return None
    if when.startswith("+") and when[-1:] in UNITS:
        try:
            return time.time() + float(when[1:-1]) * UNITS[when[-1]]
        except ValueError:
            fail(f"{when!r}: a time from now is +N followed by s, m, h or d (+7d)", 2)
    return when


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


async def cmd_timeline(args: argparse.Namespace) -> int:
    async with gateway(args) as client:
        rows = await client.timeline(args.id)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        show(console(), timeline_table(rows))
    return 0


async def cmd_logs(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    wrote = False
    async with gateway(args) as client:
        async for chunk in client.logs(args.action_id, args.attempt, args.stream, args.tail, args.follow):
            out.write(chunk)
            out.flush()  # as it arrives: a followed log is read while the job runs
            wrote = wrote or bool(chunk)
    if not wrote:
        # Said on stderr, so that `pingo logs A > file` still holds the log and nothing else;
        # without it, a job that wrote nothing reads as logs that do not work.
        other = "stderr" if args.stream == "stdout" else "stdout"
        print(f"(no output: the job wrote nothing to {args.stream}; see --stream {other})", file=sys.stderr)
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    from pingo.dev import all_services, other_storage, port_conflict, taken_ports
    from shared.runtime import configure_logging, load_settings, serve

    overrides: dict[str, Any] = {}
    if args.port:
        overrides["port"] = args.port
        if "PINGO_CALLBACK_PORT" not in os.environ:
            overrides["callback_port"] = args.port + 1
    if args.log_level:
        overrides["log_level"] = args.log_level
    settings = load_settings(**overrides)
    configure_logging(settings.log_level, settings.log_format, "dev")
    if taken := taken_ports(settings):
        fail(port_conflict(settings, taken, asyncio.run(other_storage(settings))), 1)
    print(
        f"pingo dev: gateway on http://{settings.host}:{settings.port}, callbacks on {settings.callback_url}, "
        f"data in {settings.data_dir.resolve()}",
        flush=True,
    )
    asyncio.run(serve(all_services, settings))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from pingo.dev import SERVICES
    from shared.runtime import configure_logging, load_settings, serve

    settings = load_settings(**({"log_level": args.log_level} if args.log_level else {}))
    configure_logging(settings.log_level, settings.log_format, args.service)
    asyncio.run(serve(lambda ctx: [SERVICES[args.service](ctx)], settings))
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


PARAM_HELP = "a value for one of the workflow's parameters (repeat for each)"
LOG_LEVEL_HELP = "DEBUG, INFO, WARNING or ERROR (default: PINGO_LOG_LEVEL, else INFO)"


def datasets_commands(c: argparse.ArgumentParser) -> None:
    """``pingo datasets``'s options, and its verbs on one dataset (``show``, and the
    datasets by hand of docs/api.md)."""
    c.add_argument("--state")
    c.add_argument(
        "--by-user", action="store_true", help="per user: datasets kept, compute time spent, time saved by reuse"
    )
    c.set_defaults(run=cmd_datasets)
    shows = c.add_subparsers(dest="datasets_command", metavar="{show,delete,invalidate,pin,unpin,expire} HASH")
    one = shows.add_parser("show", help="one dataset and the workflow that made it (a hash or its start)")
    one.add_argument("hash")
    # SUPPRESS: given before ``show`` (pingo datasets --json show H) they are not reset here.
    one.add_argument("--url", default=argparse.SUPPRESS, help=URL_HELP)
    one.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the raw JSON")
    # Datasets by hand (docs/api.md): the owner of the workflow that made it, or an admin.
    for verb, text in (
        ("delete", "delete a dataset, a final output too: refused while a workflow still needs it"),
        ("invalidate", "never reuse it again: its next use computes it; its files go once nothing needs them"),
        ("pin", "never choose it for eviction"),
        ("unpin", "an ordinary dataset again"),
        ("expire", "delete it once WHEN has passed and nothing needs it"),
    ):
        one = shows.add_parser(verb, help=text)
        one.add_argument("hash", help="a hash, or its start")
        if verb == "invalidate":
            one.add_argument("--descendants", action="store_true", help="and every dataset computed from it")
        if verb == "expire":
            one.add_argument("when", help="ISO 8601 time, Unix seconds, +N[smhd] from now, or never")
        one.add_argument("--url", default=argparse.SUPPRESS, help=URL_HELP)
        one.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the raw JSON")


def parser() -> argparse.ArgumentParser:
    p = SuggestingParser(prog="pingo", description=__doc__)
    p.add_argument("--version", action="version", version=f"pingo {installed_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    def client_cmd(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_)
        c.add_argument("--url", help=URL_HELP)
        c.add_argument("--json", action="store_true", help="print the raw JSON")
        return c

    d = sub.add_parser("dev", help="run all five services in one process (embedded defaults)")
    d.add_argument(
        "--port", type=int, help="gateway port (default 8080); callbacks on port+1 unless PINGO_CALLBACK_PORT is set"
    )
    d.add_argument("--log-level", help=LOG_LEVEL_HELP)
    d.set_defaults(run=cmd_dev)
    s = sub.add_parser("serve", help="run one service")
    s.add_argument("service", choices=service_names())
    s.add_argument("--log-level", help=LOG_LEVEL_HELP)
    s.set_defaults(run=cmd_serve)
    m = sub.add_parser("demo", help="start Pingo, run the bundled examples twice, show what was reused")
    m.add_argument("--port", type=int, default=None)
    m.add_argument("--examples", default=str(Path("examples")), help="folder of example workflows")
    m.add_argument("--keep-running", action="store_true", help="keep serving after the demo")
    m.add_argument(
        "--fresh",
        action="store_true",
        help="start from an empty catalogue in a temporary folder (removed after), not the one of earlier runs",
    )
    m.set_defaults(run=cmd_demo)
    for name, (_, _, help_) in ELSEWHERE.items():
        # No options of its own (prefix_chars that no argument starts with): every argument,
        # --help included, goes to the owning package's parser.
        e = sub.add_parser(name, help=help_, add_help=False, prefix_chars="\0")
        e.add_argument("argv", nargs=argparse.REMAINDER)
        e.set_defaults(run=cmd_elsewhere)
    c = client_cmd("submit", "submit a workflow: a JSON file, or a Python file that builds one")
    c.add_argument("file")
    c.add_argument("--wait", action="store_true", help="show live progress until the workflow ends")
    c.add_argument(
        "--dry-run", action="store_true", help="show what would be computed, reused or skipped, and why; submit nothing"
    )
    c.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help=PARAM_HELP)
    c.set_defaults(run=cmd_submit)
    v = sub.add_parser("validate", help="check a workflow (JSON or .py file) offline: every violation, where it is")
    v.add_argument("file")
    v.add_argument("--json", action="store_true", help="print the result as JSON")
    v.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help=PARAM_HELP)
    v.set_defaults(run=cmd_validate)
    c = client_cmd("status", "a workflow's state, drawn as its DAG")
    c.add_argument("id")
    c.set_defaults(run=cmd_status)
    c = client_cmd("kill", "kill a running workflow")
    c.add_argument("id")
    c.set_defaults(run=cmd_kill)
    c = client_cmd("list", "workflows, newest first: outcome counts, submitted, how long they took")
    c.add_argument("--state", type=str.upper, help="only workflows in this state (RUNNING, SUCCEEDED, FAILED, ...)")
    c.add_argument("--name", help="only workflows whose name contains N, or matches the glob N (*, ?, [..]); any case")
    c.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    c.set_defaults(run=cmd_list)
    datasets_commands(client_cmd("datasets", "managed datasets and storage usage; `datasets show HASH` for one"))
    c = client_cmd("timeline", "a workflow's transitions in time order")
    c.add_argument("id")
    c.set_defaults(run=cmd_timeline)
    c = sub.add_parser("logs", help="an action attempt's standard output or error (--follow: until it ends)")
    c.add_argument("action_id", metavar="ACTION_ID", help="the action's id, as `pingo status --json` shows it")
    c.add_argument("--attempt", type=int, help="1-based (default: the latest)")
    c.add_argument("--stream", choices=("stdout", "stderr"), default="stdout")
    c.add_argument("--tail", type=int, metavar="N", help="only the last N lines")
    c.add_argument("--follow", "-f", action="store_true", help="keep printing what it writes until it ends")
    c.add_argument("--url", help=URL_HELP)
    c.set_defaults(run=cmd_logs)
    users_commands(sub)
    mark_subcommands(p)
    return p


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pingo")
    except PackageNotFoundError:
        return "(not installed: running from a source tree)"


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
