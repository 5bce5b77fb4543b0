"""The workflow manager: the HTTP gateway (submit, query, kill) and reuse planning."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from services.workflow_manager import guard, openapi
from services.workflow_manager.guard import error
from services.workflow_manager.submission import PlanningLost, fingerprints, resolve_paths, submit, undo
from services.workflow_manager.views import action_view, dataset_view, timeline, workflow_view
from shared.events import Event
from shared.runtime import Context, health
from shared.states import ActionState, DatasetState, WorkflowState
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import stats
from shared.store import workflows as wfs
from shared.ticker import Ticker, cancel_all, forever
from shared.workflow_spec import MAX_DEPTH, id_order, parse_workflow, too_deep

log = logging.getLogger(__name__)
A, W = ActionState, WorkflowState
BY = "workflow_manager"
# After answering a request whose body did not all arrive (a 408), read and discard what
# the client still sends for this long before closing: closing on unread input resets
# the connection, and a reset can destroy the answer before the client reads it.
LINGER = 1.0


def parse_time(raw: str) -> float:
    """Unix seconds or ISO 8601 (UTC unless it says otherwise). ValueError for anything else,
    NaN and infinities included: they would reach MongoDB as range bounds."""
    try:
        value = float(raw)
    except ValueError:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        try:
            value = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
        except (OverflowError, OSError) as exc:
            raise ValueError(raw) from exc
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def bad_query(problems: list[str]) -> web.Response:
    """400 naming every bad query parameter at once."""
    return error(400, "; ".join(problems), problems=problems)


def query_limit(request: web.Request, default: int, ceiling: int, problems: list[str]) -> int:
    raw = request.query.get("limit")
    if raw is None:
        return default
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= ceiling:
        problems.append(f"limit must be an integer from 1 to {ceiling}, not {raw!r}")
        return default
    return limit


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


class WorkflowManager:
    name = BY

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.outcomes = ctx.outcomes(BY)
        self.runner: web.AppRunner | None = None
        self.tasks: list[asyncio.Task] = []
        self.kills: set[asyncio.Task] = set()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_body_bytes)
        guard.install(app, self.settings, self.ctx.store.client)  # Host/Origin/Content-Type, deadlines, JSON errors
        r = app.router
        r.add_post("/api/v1/workflows", self.post_workflow)
        r.add_get("/api/v1/workflows", self.list_workflows)
        r.add_get("/api/v1/workflows/{id}", self.get_workflow)
        r.add_post("/api/v1/workflows/{id}/kill", self.kill_workflow)
        r.add_get("/api/v1/workflows/{id}/timeline", self.get_timeline)
        r.add_get("/api/v1/datasets", self.list_datasets)
        r.add_get("/api/v1/history/stats", self.history_stats)
        r.add_get("/api/v1/openapi.json", self.get_openapi)
        r.add_get("/api/v1/events/schema", self.get_event_schema)
        r.add_get("/healthz", health)
        return app

    async def start(self) -> None:
        self.runner = web.AppRunner(self.app(), access_log=None, lingering_time=LINGER)
        await self.runner.setup()
        await web.TCPSite(self.runner, self.settings.host, self.settings.port).start()
        self.tasks.append(
            asyncio.create_task(forever("planning sweep", self.sweep_planning, Ticker(self.settings.settle_interval)))
        )

    async def stop(self) -> None:
        await cancel_all(self.tasks)
        await cancel_all(list(self.kills))
        if self.runner is not None:
            await self.runner.cleanup()

    async def get_openapi(self, _: web.Request) -> web.Response:
        return web.json_response(openapi.document())

    async def get_event_schema(self, _: web.Request) -> web.Response:
        return web.json_response(Event.model_json_schema())

    async def sweep_planning(self) -> bool:
        """Undo workflows whose planner died mid-submission: their planning lease (renewed
        every ``stale_after``/4 while a planner lives) is older than ``stale_after``."""
        cutoff = time.time() - self.settings.stale_after
        stale = [
            wf
            for wf in await wfs.in_state(
                self.ctx.store, W.PLANNING, {"_id": 1, "planning_lease_at": 1, "created_at": 1}
            )
            if float(wf.get("planning_lease_at") or wf.get("created_at") or 0) < cutoff
        ]
        for wf in stale:
            # Guarded by the lease value we judged: a planner that renewed since keeps its workflow.
            seen = {"planning_lease_at": wf.get("planning_lease_at")}
            if await undo(self.ctx, wf["_id"], "planning interrupted", where=seen):
                log.warning("workflow %s was left PLANNING by a dead planner; undone", wf["_id"])
        return False

    async def post_workflow(self, request: web.Request) -> web.Response:
        raw = await request.read()  # already read by the guard, within the body deadline
        try:
            body = json.loads(raw, parse_constant=_not_json)
        except (ValueError, UnicodeDecodeError) as exc:
            return error(400, f"malformed JSON: {exc}")
        except RecursionError:
            return error(400, "malformed JSON: nested too deeply")
        if (deep := too_deep(body)) is not None:
            return error(400, f"malformed JSON: nested deeper than {MAX_DEPTH} levels",
                         violations=[deep.model_dump(exclude_none=True)])  # fmt: skip
        parsed: list = []
        spec, violations = parse_workflow(body, parsed)
        paths, local = await resolve_paths(parsed, self.settings, self.ctx.storage, self.ctx.executor.supports)
        violations = [*violations, *local]
        prints: dict = {}
        if not violations:
            prints, violations = await fingerprints(parsed, paths, self.ctx.storage)
        if violations:
            return web.json_response(
                {
                    "error": f"the workflow has {len(violations)} violation(s)",
                    "violations": [v.model_dump(exclude_none=True) for v in violations],
                },
                status=422,
            )
        try:
            result = await submit(self.ctx, body, spec, paths, prints)
        except PlanningLost:
            response = error(503, "planning stalled and was abandoned; nothing was kept: submit again")
            response.headers["Retry-After"] = "1"
            return response
        wf, docs = result["workflow"], result["actions"]
        if wf.get("kill_requested") and wf["state"] == W.RUNNING:
            self.apply_kill(wf["_id"])  # killed while it was being planned
        docs.sort(key=lambda d: id_order(d["local_id"]))
        return web.json_response(
            {"id": wf["_id"], "state": wf["state"], "actions": [action_view(d, full=False) for d in docs]},
            status=201,
            headers={"Location": f"/api/v1/workflows/{wf['_id']}"},
        )

    async def list_workflows(self, request: web.Request) -> web.Response:
        problems = []
        state, name, before = request.query.get("state"), request.query.get("name"), None
        if state and state not in W.__members__:
            problems.append(f"state must be one of {', '.join(W.__members__)}")
        limit = query_limit(request, 50, 1000, problems)
        if raw_before := request.query.get("before"):
            try:
                before = parse_time(raw_before)
            except ValueError:
                problems.append(f"before must be an ISO 8601 time or Unix seconds, not {raw_before!r}")
        if problems:
            return bad_query(problems)
        found = await wfs.newest(self.ctx.store, limit, state=state, name=name, before=before)
        return web.json_response({"workflows": [workflow_view(w) for w in found]})

    async def _workflow(self, request: web.Request) -> dict[str, Any] | None:
        return await wfs.get(self.ctx.store, request.match_info["id"], {"definition": 0})

    async def _actions(self, wf_id: str) -> list[dict[str, Any]]:
        docs = await acts.of_workflow(self.ctx.store, wf_id, {"secret": 0})
        return sorted(docs, key=lambda a: id_order(a["local_id"]))

    async def get_workflow(self, request: web.Request) -> web.Response:
        wf = await self._workflow(request)
        if wf is None:
            return error(404, f"no workflow {request.match_info['id']!r}")
        return web.json_response(workflow_view(wf, await self._actions(wf["_id"])))

    async def get_timeline(self, request: web.Request) -> web.Response:
        wf = await self._workflow(request)
        if wf is None:
            return error(404, f"no workflow {request.match_info['id']!r}")
        actions = await self._actions(wf["_id"])
        hashes = sorted({a["hash"] for a in actions if a.get("managed")})
        datasets = list((await ds.get_many(self.ctx.store, hashes, {"history": 1})).values())
        return web.json_response({"id": wf["_id"], "transitions": timeline(wf, actions, datasets)})

    async def kill_workflow(self, request: web.Request) -> web.Response:
        """Record the kill and answer 202 at once; the work is done in the background, in
        bulk. Only the request that flips ``kill_requested`` starts it (repeats answer 202
        and do nothing); a kill during planning is applied when planning ends."""
        wf_id = request.match_info["id"]
        wf = await wfs.request_kill(self.ctx.store, wf_id, time.time())
        if wf is None:
            existing = await wfs.get(self.ctx.store, wf_id, {"state": 1})
            if existing is None:
                return error(404, f"no workflow {wf_id!r}")
            return error(409, f"workflow {wf_id} already ended {existing['state']}")
        if not wf.get("kill_requested") and wf["state"] == W.RUNNING:
            self.apply_kill(wf_id)
        # The document as it was before this request, with the kill now recorded.
        return web.json_response(workflow_view({**wf, "kill_requested": True}), status=202)

    def apply_kill(self, wf_id: str) -> None:
        task = asyncio.create_task(self.outcomes.kill_workflow(wf_id))
        self.kills.add(task)
        task.add_done_callback(self._kill_done)

    def _kill_done(self, task: asyncio.Task) -> None:
        self.kills.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("applying a kill failed; the repair sweep retries it", exc_info=task.exception())

    async def history_stats(self, request: web.Request) -> web.Response:
        """Per-bucket statistics between ``from`` and ``to`` (ISO 8601 or Unix seconds;
        default: the last day) at ``resolution`` 1m, 30m, 1d or 10d (default 30m)."""
        problems = []
        resolution = request.query.get("resolution", "30m")
        if resolution not in stats.RESOLUTIONS:
            problems.append(f"resolution must be one of {', '.join(stats.RESOLUTIONS)}")
        now = time.time()
        bounds = {}
        for name, default in (("to", now), ("from", None)):
            raw = request.query.get(name)
            if raw is None:
                bounds[name] = default
                continue
            try:
                bounds[name] = parse_time(raw)
            except ValueError:
                problems.append(f"{name} must be an ISO 8601 time or Unix seconds, not {raw!r}")
                bounds[name] = default
        end = bounds["to"]
        start = bounds["from"] if bounds["from"] is not None else end - 86_400
        if start >= end:
            problems.append("from must be before to")
        width = stats.RESOLUTIONS.get(resolution, 1)
        if not problems and (end - start) / width > stats.MAX_BUCKETS:
            problems.append(
                f"{(end - start) / width:.0f} buckets of {resolution}: use a coarser resolution or a shorter range"
            )
        if problems:
            return bad_query(problems)
        buckets = await stats.query(self.ctx.store, resolution, start, end)
        totals = {k: sum(b[k] for b in buckets) for k in stats.COUNTERS}
        failures: dict[str, int] = {}
        for b in buckets:
            for reason, n in b["failures"].items():
                failures[reason] = failures.get(reason, 0) + n
        return web.json_response({"resolution": resolution, "from": start, "to": end, "buckets": buckets,
                                  "totals": {**totals, "failures": failures}})  # fmt: skip

    async def list_datasets(self, request: web.Request) -> web.Response:
        problems: list[str] = []
        state = request.query.get("state")
        if state and state not in DatasetState.__members__:
            problems.append(f"state must be one of {', '.join(DatasetState.__members__)}")
        limit = query_limit(request, 1000, 10_000, problems)
        if problems:
            return bad_query(problems)
        docs = await ds.newest(self.ctx.store, limit, state)
        by_state: dict[str, int] = {}
        for d in docs:
            by_state[d["state"]] = by_state.get(d["state"], 0) + int(d.get("size") or 0)
        return web.json_response(
            {
                "capacityBytes": self.settings.capacity_bytes,
                "threshold": self.settings.threshold,
                # What the storage itself says is under the managed root (GETCONTENTSUMMARY on HDFS).
                "managedRootBytes": await self.ctx.storage.usage(),
                "bytesByState": by_state,
                "datasets": [dataset_view(d) for d in docs],
            }
        )
