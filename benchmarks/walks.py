"""The two walks of issue 25, as the modules their code passes through.

1. submission: a ``POST /api/v1/workflows`` from the gateway into the store, from the
   request's arrival (the gateway's guard and authentication included) to its answer:
   parsing, planning and writing. The events it publishes are the next walks' triggers:
   their deliveries are not followed.
2. hop: a job's end notification (``/callback/{id}`` of the parent, with its ending
   status) to the next action's start (the child's ``action.submitted`` event published:
   its job handed to the executor and recorded).

Pingo runs in this process on the embedded store, the in-process bus and the local
executor (as ``pingo dev`` and the ``system`` test fixture start it), with a two-action
chain ``parent -> child`` of SHELL jobs; a first chain, untraced, warms it up.

What counts as the walk: the code that runs in the walk's own asyncio context, from its
start to its end. A context variable is set where the walk starts (an outer aiohttp
middleware added here); the tasks it starts copy it, so a confirmation started by the
callback and an in-process bus delivery are followed; the delivery of an event that
does not lead on (walk 2 follows ``action.ready`` only) is not, nor is a loop that runs
on a timer, unless an item the walk put on an ``asyncio.Queue`` is taken by it (the
action manager's submitters), for as long as it works on that item.

What is printed, per walk: each task's ordered list of Pingo modules (files under
shared/, services/, pingo/; library code is transparent), a module listed each time
control passes into it, by a call or by a return to its caller (a coroutine suspended
and resumed by the event loop is not a pass); identical task lists are shown once with
a count. Then: the distinct modules; the passes; the returns (control coming back to a
module the task had left, summed over tasks), per module; and the pairs of modules that
hand control back and forth most. Measured with ``sys.setprofile`` (Python 3.11 has no
``sys.monitoring``), on the event loop's thread and the default executor's threads.

    python benchmarks/walks.py [--out walks.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextvars
import dis
import io
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pingo.dev import all_services  # noqa: E402
from services.callback.service import CallbackService  # noqa: E402
from services.workflow_manager.service import WorkflowManager  # noqa: E402
from shared.bus.memory import MemoryBus  # noqa: E402
from shared.config import Settings  # noqa: E402
from shared.events import Event, EventType  # noqa: E402
from shared.runtime import Context, running  # noqa: E402

PINGO = tuple(f"{ROOT}/{part}/" for part in ("shared", "services", "pingo"))
RESUME, YIELD_VALUE = dis.opmap["RESUME"], dis.opmap["YIELD_VALUE"]
SUSPENDABLE = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator


@dataclass
class Walk:
    name: str
    follow: frozenset[str]  # the event types whose in-process delivery is part of the walk
    on: bool = True
    started: float = 0.0
    seconds: float = 0.0
    # Per task (or thread): its ordered modules, and where control is now.
    passes: dict[Any, list[str]] = field(default_factory=dict)
    here: dict[Any, str | None] = field(default_factory=dict)
    order: list[Any] = field(default_factory=list)


WALK: contextvars.ContextVar[Walk | None] = contextvars.ContextVar("walk", default=None)
_modules: dict[str, str | None] = {}


def module_of(filename: str) -> str | None:
    if filename not in _modules:
        _modules[filename] = filename[len(str(ROOT)) + 1 :] if filename.startswith(PINGO) else None
    return _modules[filename]


def pingo_caller(frame: FrameType | None) -> str | None:
    while frame is not None:
        if (mod := module_of(frame.f_code.co_filename)) is not None:
            return mod
        frame = frame.f_back
    return None


def where() -> Any:
    try:
        return asyncio.current_task() or threading.get_ident()
    except RuntimeError:  # a worker thread: no loop
        return threading.get_ident()


def profile(frame: FrameType, event: str, _: Any) -> None:
    walk = WALK.get()
    if walk is None or not walk.on or event not in ("call", "return"):
        return
    code = frame.f_code
    if code.co_flags & SUSPENDABLE:
        # A coroutine or generator resumed or suspended: control is where it was, not passed.
        op, arg = code.co_code[frame.f_lasti], code.co_code[frame.f_lasti + 1]
        if (event == "call" and not (op == RESUME and arg == 0)) or (event == "return" and op == YIELD_VALUE):
            return
    mod = module_of(code.co_filename) if event == "call" else pingo_caller(frame.f_back)
    if mod is None:
        return
    key = where()
    if key not in walk.passes:
        walk.passes[key], walk.here[key] = [], None
        walk.order.append(key)
    if walk.here[key] != mod:
        walk.here[key] = mod
        walk.passes[key].append(mod)


def traced_thread() -> None:
    sys.setprofile(profile)


# --- where walks start, follow and end: hooks around Pingo's objects, Pingo unchanged ---

Starter = Callable[[web.Request], Walk | None]


def entry(starter: list[Starter | None]) -> Callable:
    @web.middleware
    async def begin(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        walk = starter[0](request) if starter[0] is not None else None
        if walk is None:
            return await handler(request)
        starter[0] = None  # once
        token = WALK.set(walk)
        walk.started = time.perf_counter()
        try:
            return await handler(request)
        finally:
            WALK.reset(token)
            if walk.name.startswith("1"):
                walk.on = False
                walk.seconds = time.perf_counter() - walk.started

    return begin


def with_entry(cls: type, starter: list[Starter | None]) -> None:
    made = cls.app

    def app(self: Any) -> web.Application:
        application = made(self)
        application.middlewares.insert(0, entry(starter))
        return application

    cls.app = app  # type: ignore[method-assign]


def follow_only_leading_events() -> None:
    deliver = MemoryBus._deliver

    async def delivered(self: MemoryBus, handler: Any, event: Event) -> None:
        walk = WALK.get()
        if walk is not None and event.type.value not in walk.follow:
            WALK.set(None)  # this delivery's task only
        await deliver(self, handler, event)

    MemoryBus._deliver = delivered  # type: ignore[method-assign]


def follow_queued_items() -> None:
    """An item put on an asyncio.Queue inside a walk carries it to the task that takes it."""
    carried: dict[int, Walk] = {}
    takers: set[asyncio.Task] = set()  # the tasks that hold a walk because they took its item
    put_nowait, get_nowait = asyncio.Queue.put_nowait, asyncio.Queue.get_nowait

    def put(self: asyncio.Queue, item: Any) -> None:
        if (walk := WALK.get()) is not None:
            carried[id(item)] = walk
        put_nowait(self, item)

    def get(self: asyncio.Queue) -> Any:
        item = get_nowait(self)
        task = asyncio.current_task()
        if (walk := carried.pop(id(item), None)) is not None and task is not None:
            WALK.set(walk)  # the taker's task, until it takes the next item
            takers.add(task)
        elif task in takers:
            WALK.set(None)
            takers.discard(task)
        return item

    asyncio.Queue.put_nowait = put  # type: ignore[method-assign]
    asyncio.Queue.get_nowait = get  # type: ignore[method-assign]


def end_on_start(ctx: Context, ended: dict[str, tuple[asyncio.Future, Walk | None]]) -> None:
    publish = ctx.bus.publish

    async def published(event: Event) -> None:
        await publish(event)
        done, expected = ended.get(event.subject.action_id or "", (None, None))
        if event.type == EventType.ACTION_SUBMITTED and done is not None and not done.done():
            walk = WALK.get()
            if walk is not expected:  # another way than the walk saw the parent end
                done.set_exception(RuntimeError(f"{event.subject.action_id} was started outside the walk"))
                return
            if walk is not None:
                walk.on = False
                walk.seconds = time.perf_counter() - walk.started
            done.set_result(None)

    ctx.bus.publish = published  # type: ignore[method-assign]


# --- the run ---


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chain(tag: str, go: Path) -> dict[str, Any]:
    # The parent ends once ``go`` exists: after its start was recorded and its RUNNING
    # notification handled, so that only its end notification can see it end.
    def action(i: int, command: list[str], parents: list[int]) -> dict[str, Any]:
        return {"id": i, "name": f"{tag}-{i}", "type": "SHELL", "command": command, "parentActions": parents}

    waits = ["sh", "-c", f'while [ ! -e "{go}" ]; do sleep 0.05; done; mkdir -p "$@"', "job"]
    return {"name": f"walks-{tag}", "actions": [action(0, waits, []), action(1, ["mkdir", "-p"], [0])]}


async def run(data: Path) -> tuple[Walk, Walk]:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(8, initializer=traced_thread))
    settings = Settings(
        data_dir=data / "data", port=free_port(), callback_port=free_port(), output_roots=[data / "outputs"],
        # Nothing but the notification may see the parent's end: the poller and scrapers wait.
        poll_interval=60, poll_max_interval=120, scrape_interval=60, settle_interval=60,
    )  # fmt: skip
    gateway: list[Starter | None] = [None]
    callbacks: list[Starter | None] = [None]
    with_entry(WorkflowManager, gateway)
    with_entry(CallbackService, callbacks)
    follow_only_leading_events()
    follow_queued_items()
    ctx = await Context.open(settings)
    ended: dict[str, tuple[asyncio.Future, Walk | None]] = {}
    end_on_start(ctx, ended)
    base = f"http://127.0.0.1:{settings.port}"
    async with running(ctx, all_services) as services, aiohttp.ClientSession() as http:
        (callback,) = [s for s in services if isinstance(s, CallbackService)]

        async def running_quietly(wf_id: str, action_id: str) -> None:
            """The parent RUNNING, and no notification being confirmed."""
            deadline = time.time() + 60
            while True:
                wf = await (await http.get(f"{base}/api/v1/workflows/{wf_id}")).json()
                states = {a["id"]: a["state"] for a in wf["actions"]}
                if states[action_id] == "RUNNING" and not callback.pending:
                    return
                if time.time() > deadline:
                    sys.exit(f"{action_id} did not start: {states}; see {data}")
                await asyncio.sleep(0.05)

        async def one_chain(traced: bool) -> tuple[Walk, Walk]:
            submission = Walk("1. submission: POST /api/v1/workflows -> the store", frozenset())
            hop = Walk("2. hop: the parent job's end notification -> the child's start", frozenset({"action.ready"}))
            if traced:
                gateway[0] = lambda r: submission if r.method == "POST" and r.path == "/api/v1/workflows" else None
            tag = uuid.uuid4().hex[:8]
            go = data / f"go-{tag}"
            sys.setprofile(profile)
            async with http.post(f"{base}/api/v1/workflows", json=chain(tag, go)) as r:
                plan = await r.json()
                assert r.status == 201, plan
            sys.setprofile(None)
            parent, child = (a["id"] for a in sorted(plan["actions"], key=lambda a: a["localId"]))
            await running_quietly(plan["id"], parent)
            callbacks[0] = lambda r: (
                hop
                if traced and r.match_info.get("action_id") == parent and r.query.get("status") not in (None, "RUNNING")
                else None
            )
            started = loop.create_future()
            ended[child] = (started, hop if traced else None)
            sys.setprofile(profile)
            go.touch()
            await asyncio.wait_for(started, 60)
            sys.setprofile(None)
            deadline = time.time() + 60
            while (await (await http.get(f"{base}/api/v1/workflows/{plan['id']}")).json())["state"] == "RUNNING":
                if time.time() > deadline:
                    sys.exit(f"workflow {plan['id']} did not end; see {data}")
                await asyncio.sleep(0.1)
            return submission, hop

        await one_chain(traced=False)
        return await one_chain(traced=True)


@dataclass
class Figures:
    distinct: int
    passes: int
    tasks: int
    returns: int
    service_store: int


def report(walk: Walk, out: io.TextIOBase) -> Figures:
    lists = [walk.passes[k] for k in walk.order if walk.passes[k]]
    print(f"== {walk.name}", file=out)
    print(f"   {walk.seconds * 1000:.0f} ms traced (profiling slows it: compare the counts, not the time)", file=out)
    shown: collections.Counter[tuple[str, ...]] = collections.Counter(tuple(seq) for seq in lists)
    for n, (seq, times) in enumerate(shown.items(), 1):
        print(f"   task {n}{f' (x{times})' if times > 1 else ''}: {len(seq)} passes", file=out)
        for mod in seq:
            print(f"      {mod}", file=out)
    distinct = {m for seq in lists for m in seq}
    returns: collections.Counter[str] = collections.Counter()
    pairs: collections.Counter[tuple[str, str]] = collections.Counter()
    for seq in lists:
        seen: set[str] = set()
        for i, mod in enumerate(seq):
            if mod in seen:
                returns[mod] += 1
            seen.add(mod)
            if i:
                pairs[tuple(sorted((seq[i - 1], mod)))] += 1  # type: ignore[index]
    print(f"   distinct modules: {len(distinct)}", file=out)
    print(f"   passes: {sum(len(seq) for seq in lists)} in {len(lists)} task(s)", file=out)
    print(f"   returns to a module left before: {sum(returns.values())}", file=out)
    for mod, n in returns.most_common():
        print(f"      {n:4d}  {mod}", file=out)
    print("   hand-overs between two modules, both ways (most first):", file=out)
    for (a, b), n in pairs.most_common(15):
        print(f"      {n:4d}  {a} <-> {b}", file=out)
    service_store = sum(n for (a, b), n in pairs.items() if _service_store(a, b))
    print(f"   hand-overs between a service module and the store (shared/store/): {service_store}", file=out)
    print(file=out)
    passes = sum(len(seq) for seq in lists)
    return Figures(len(distinct), passes, len(lists), sum(returns.values()), service_store)


def _service_store(a: str, b: str) -> bool:
    return (a.startswith("services/") and b.startswith("shared/store/")) or (
        b.startswith("services/") and a.startswith("shared/store/")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="also write the report to this file")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="pingo-walks-"))
    try:
        walks = asyncio.run(run(data))
    finally:
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    out = io.StringIO()
    figures = [report(walk, out) for walk in walks]
    print(f"{'walk':<12} {'modules':>8} {'passes':>7} {'tasks':>6} {'returns':>8} {'service<->store':>16}", file=out)
    for walk, f in zip(walks, figures, strict=True):
        name = walk.name.split(":")[0]
        print(f"{name:<12} {f.distinct:>8} {f.passes:>7} {f.tasks:>6} {f.returns:>8} {f.service_store:>16}", file=out)
    print(out.getvalue(), end="")
    if args.out:
        args.out.write_text(out.getvalue())


if __name__ == "__main__":
    main()
