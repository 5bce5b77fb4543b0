"""The workflow manager: the HTTP gateway (submit, query, kill) and reuse planning."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from aiohttp import web

from services.workflow_manager import (
    action_logs,
    auth,
    curation,
    guard,
    idempotency,
    openapi,
    provenance,
    queries,
    sharing,
    ui,
)
from services.workflow_manager.dry_run import SubmitQuery, dry_run
from services.workflow_manager.guard import error
from services.workflow_manager.routes import definitions
from services.workflow_manager.submission import check
from services.workflow_manager.views import (
    DatasetList,
    HistoryStats,
    Plan,
    Timeline,
    UserUsage,
    WorkflowList,
    answer,
    dataset_view,
    planned_action,
    redacted,
    timeline,
    workflow_detail,
    workflow_of,
    workflow_view,
)
from shared import strict_json
from shared.collector import run_paused
from shared.connections import CappedRunner
from shared.lifecycle.curating import Curator
from shared.lifecycle.previewing import preview
from shared.lifecycle.repairing import PlanningSweep
from shared.lifecycle.submitting import PlanningLost, Submitter, new_workflow_id
from shared.problems import ALREADY_ENDED, INVALID_WORKFLOW, MALFORMED_BODY, PLANNING_ABANDONED
from shared.runtime import Context
from shared.states import DATASET_HELD, ActionState, WorkflowState
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import stats
from shared.store import workflows as wfs
from shared.store.idempotency import Held
from shared.store.records import ActionRecord, Totals, WorkflowRecord
from shared.ticker import Ticker, cancel_all, forever
from shared.workflow_spec import MAX_DEPTH, is_plain, too_deep

log = logging.getLogger(__name__)
A, W = ActionState, WorkflowState
BY = "workflow_manager"
# After answering a request whose body did not all arrive (a 408), read and discard what
# the client still sends for this long before closing: closing on unread input resets
# the connection, and a reset can destroy the answer before the client reads it.
LINGER = 1.0
TIE = "\x1f"  # between the parts of a timeline row's place in a cursor


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def plan_view(wf: WorkflowRecord, actions: list[ActionRecord]) -> Plan:
    """The 201 of a submission: what each action of the plan (in id order) will do."""
    return Plan(id=wf.id, state=wf.state, actions=[planned_action(a) for a in actions])


class WorkflowManager:
    name = BY

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.outcomes = ctx.outcomes(BY)
        self.submitter = Submitter(ctx.store, ctx.storage, self.outcomes.mover, ctx.settings)
        self.curator = Curator(ctx.store, self.outcomes.mover)  # datasets by hand
        self.planning_sweep = PlanningSweep(ctx.store, self.submitter, ctx.settings.stale_after)
        self.runner: web.AppRunner | None = None
        self.tasks: list[asyncio.Task] = []
        self.kills: set[asyncio.Task] = set()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_body_bytes)
        guard.install(app, self.settings, self.ctx.store.client)  # Host/Origin/Content-Type, deadlines, JSON errors
        auth.Authenticator(self.settings, self.ctx.store).install(app)  # who is asking (docs/users.md)
        app.router.add_routes(definitions(self))  # one table: the router's and the OpenAPI document's
        ui.install(app)  # the web view: pages at /, /workflows/{id}, /storage, /history
        return app

    async def start(self) -> None:
        await auth.check_exposure(self.settings, self.ctx.store)
        await auth.check_isolation(self.settings, self.ctx.store)
        # Connections capped and timed (shared/connections.py): idle ones cannot starve the gateway.
        self.runner = CappedRunner(self.app(), self.settings, access_log=None, lingering_time=LINGER)
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

    async def get_action_logs(self, request: web.Request) -> web.StreamResponse:
        return await action_logs.get_logs(self.ctx, request)

    get_action_logs.long_lived = True  # type: ignore[attr-defined]  # may stream for long: see guard

    async def get_openapi(self, _: web.Request) -> web.Response:
        return web.json_response(openapi.document())

    async def get_event_schema(self, _: web.Request) -> web.Response:
        return web.json_response(openapi.event_schema())

    async def sweep_planning(self) -> bool:
        """Undo workflows whose planner died mid-submission (``shared.lifecycle.repairing``)."""
        return await self.planning_sweep.run()

    async def post_workflow(self, request: web.Request) -> web.StreamResponse:
        # A request with no query and no key asks nothing of their parsers.
        q: SubmitQuery = queries.parse(request, SubmitQuery) if request.query else SubmitQuery()
        # A malformed key is refused before anything is read.
        key = idempotency.key_of(request) if idempotency.HEADER in request.headers else None
        raw = await request.read()  # already read by the guard, within the body deadline
        try:
            # A key given twice in one object is kept apart, to be refused (repeated_keys).
            body = strict_json.loads(raw, parse_constant=_not_json)
        except (ValueError, UnicodeDecodeError) as exc:
            return error(400, f"malformed JSON: {exc}", type=MALFORMED_BODY)
        except RecursionError:
            return error(400, "malformed JSON: nested too deeply", type=MALFORMED_BODY)
        # One walk of the whole body, in a worker thread (a big one takes a while): the
        # common body has nothing for any document check, its depth included, and parsing
        # it is then spared a second walk.
        plain = await asyncio.to_thread(run_paused, is_plain, body)
        if not plain and (deep := too_deep(body)) is not None:
            return error(400, f"malformed JSON: nested deeper than {MAX_DEPTH} levels", type=MALFORMED_BODY,
                         violations=[deep.model_dump(exclude_none=True)])  # fmt: skip
        who = auth.identity(request)
        owner = who.name
        checked = await check(body, self.settings, self.ctx.storage, self.ctx.executor, owner, plain)
        spec, paths, prints, violations = checked.spec, checked.paths, checked.prints, checked.violations
        if violations:
            return error(
                422,
                f"the workflow has {len(violations)} violation(s)",
                type=INVALID_WORKFLOW,
                violations=[v.model_dump(exclude_none=True) for v in violations],
            )
        if q.dryRun:  # the plan a submission would make now; nothing is written (a key is ignored)
            found = await preview(self.ctx.store, self.ctx.storage, self.settings.verify_reuse, spec, prints, owner)
            plan = dry_run(found, spec.name, paths, self.ctx.storage.root)
            return answer(await sharing.for_caller(self.ctx.store, plan, who))
        wf_id, held = new_workflow_id(), None
        if key is not None:  # a retry of a submission answers it (docs/api.md, "Retrying a submission")
            claimed = await idempotency.claim(self.ctx, owner, key, body, wf_id)
            if not isinstance(claimed, Held):
                return claimed
            held, wf_id = claimed, claimed.workflow_id
        try:
            submitted = await self.submitter.submit(body, spec, paths, prints, owner, wf_id=wf_id)
        except BaseException as exc:
            if held is not None:  # no workflow was made: a retry may make it
                await idempotency.release(self.ctx, held)
            if not isinstance(exc, PlanningLost):
                raise
            response = error(
                503, "planning stalled and was abandoned; nothing was kept: submit again", type=PLANNING_ABANDONED
            )
            response.headers["Retry-After"] = "1"
            return response
        wf = submitted.workflow
        if wf.kill_requested and wf.state == W.RUNNING:
            self.apply_kill(wf.id)  # killed while it was being planned
        # A big plan's view is CPU work: in a worker thread, other requests are answered meanwhile.
        plan = await asyncio.to_thread(run_paused, plan_view, wf, submitted.actions)
        if not who.admin:  # an admin (anyone while users are off) is shown everything
            plan = await sharing.for_caller(self.ctx.store, plan, who)
        response = await asyncio.to_thread(run_paused, answer, plan, 201, {"Location": f"/api/v1/workflows/{wf.id}"})
        if held is not None:
            await idempotency.remember(self.ctx, held, response)
        return response

    async def list_workflows(self, request: web.Request) -> web.Response:
        q: queries.WorkflowQuery = queries.parse(request, queries.WorkflowQuery)
        after = (float(q.cursor.key or 0), q.cursor.id) if q.cursor else None
        who = auth.identity(request)
        # Users see their own workflows; admins (and everyone while users are off) see all.
        owner = None if who.admin else who.name
        found = await wfs.newest(
            self.ctx.store, q.limit + 1, state=q.state, name=q.name, before=q.before, after=after, owner=owner
        )
        page, more = found[: q.limit], len(found) > q.limit
        last = page[-1] if page else None
        cursor = queries.encode_cursor(last.created_at, last.id) if more and last else None
        return answer(WorkflowList(workflows=[workflow_view(w) for w in page], next=cursor))

    async def _workflow(self, request: web.Request) -> WorkflowRecord | None:
        """The workflow of the path, if the caller may see it: another user's is answered as
        one that does not exist, so that ids cannot be probed."""
        wf = await wfs.record(self.ctx.store, request.match_info["id"])
        return wf if wf is not None and auth.identity(request).sees(wf.owner) else None

    async def get_workflow(self, request: web.Request) -> web.Response:
        wf = await self._workflow(request)
        if wf is None:
            return error(404, f"no workflow {request.match_info['id']!r}")
        detail = workflow_detail(wf, await acts.records_of_workflow(self.ctx.store, wf.id))
        return answer(await sharing.for_caller(self.ctx.store, detail, auth.identity(request)))

    async def get_timeline(self, request: web.Request) -> web.Response:
        q: queries.TimelineQuery = queries.parse(request, queries.TimelineQuery)
        wf = await self._workflow(request)
        if wf is None:
            return error(404, f"no workflow {request.match_info['id']!r}")
        actions = await acts.records_of_workflow(self.ctx.store, wf.id)
        hashes = sorted({a.hash for a in actions if a.managed and a.hash})
        datasets = await ds.histories(self.ctx.store, hashes)
        rows = timeline(wf, actions, datasets)
        if q.cursor is not None:
            after = (float(q.cursor.key or 0), *q.cursor.id.split(TIE, 2))
            rows = [r for r in rows if (r.at, r.kind, r.id, r.state) > after]
        page, more = rows[: q.limit], len(rows) > q.limit
        last = page[-1] if more else None
        cursor = queries.encode_cursor(last.at, TIE.join((last.kind, last.id, last.state))) if last else None
        view = Timeline(id=wf.id, owner=wf.owner, transitions=page, next=cursor)
        return answer(await sharing.for_caller(self.ctx.store, view, auth.identity(request)))

    async def kill_workflow(self, request: web.Request) -> web.Response:
        """Record the kill and answer 202 at once; the work is done in the background, in
        bulk. Only the request that flips ``kill_requested`` starts it (repeats answer 202
        and do nothing); a kill during planning is applied when planning ends."""
        wf_id = request.match_info["id"]
        who = auth.identity(request)
        existing = await wfs.record(self.ctx.store, wf_id, {"state": 1, "owner": 1})
        if existing is None or not who.sees(existing.owner):
            return error(404, f"no workflow {wf_id!r}")
        wf = await wfs.request_kill(self.ctx.store, wf_id, time.time(), by=who.name)
        if wf is None:
            ended = await wfs.record(self.ctx.store, wf_id, {"state": 1}) or existing
            return error(409, f"workflow {wf_id} already ended {ended.state}", type=ALREADY_ENDED)
        if not wf.kill_requested and wf.state == W.RUNNING:
            self.apply_kill(wf_id)
        # The document as it was before this request, with the kill now recorded.
        return answer(workflow_view(dataclasses.replace(wf, kill_requested=True)), 202)

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
        q: queries.StatsQuery = queries.parse(request, queries.StatsQuery)
        assert q.start is not None and q.end is not None  # the query model's defaults
        buckets = await stats.query(self.ctx.store, q.resolution, q.start, q.end)
        totals = Totals.of_all(buckets)
        who = auth.identity(request)
        users_totals = {
            name: t for name, t in (await stats.per_user(self.ctx.store, q.resolution, q.start, q.end)).items()
            if who.sees(name)
        }  # fmt: skip
        # The records' attributes are the views' fields: read as they are, not copied into dicts.
        view = HistoryStats.model_validate(
            {"resolution": q.resolution, "from": q.start, "to": q.end, "buckets": buckets,
             "totals": totals, "byUser": users_totals}, from_attributes=True,
        )  # fmt: skip
        return answer(view)

    async def list_datasets(self, request: web.Request) -> web.Response:
        q: queries.DatasetQuery = queries.parse(request, queries.DatasetQuery)
        after = (float(q.cursor.key or 0), q.cursor.id) if q.cursor else None
        docs, by_state, usage = await asyncio.gather(
            ds.newest(self.ctx.store, q.limit + 1, q.state, after=after),
            ds.bytes_by_state(self.ctx.store),
            # What the storage itself says is under the managed root (GETCONTENTSUMMARY on HDFS).
            self.ctx.storage.usage(),
        )
        page, more = docs[: q.limit], len(docs) > q.limit
        cursor = queries.encode_cursor(page[-1].updated_at, page[-1].id) if more else None
        who = auth.identity(request)
        named = {workflow_of(a) for d in page for a in d.named_actions}
        found = await wfs.briefs(self.ctx.store, named) if named else {}
        names = {wf_id: w.name for wf_id, w in found.items()}
        makers = sorted({m for d in page if (m := d.maker)})
        action_names = {a.id: a.name for a in await acts.records(self.ctx.store, makers, {"name": 1})}
        visible = None if who.admin else {wf_id for wf_id, w in found.items() if who.sees(w.owner)}
        view = DatasetList(
            byUser=await self.usage_by_user(auth.identity(request)) if q.byUser else None,
            capacityBytes=self.settings.capacity_bytes,
            threshold=self.settings.threshold,
            managedRootBytes=usage,
            bytesByState=by_state,
            usedBytes=sum(by_state.get(str(s), 0) for s in DATASET_HELD),
            datasets=[
                redacted(dataset_view(d, names, action_names), visible).model_copy(
                    update={"canChange": who.sees(d.owner)}
                )
                for d in page
            ],
            next=cursor,
        )
        return answer(view)

    async def usage_by_user(self, who: auth.Identity) -> list[UserUsage]:
        held, spent = await asyncio.gather(
            ds.held_by_owner(self.ctx.store), stats.per_user(self.ctx.store, "10d", 0.0, time.time() + 1)
        )
        rows = []
        # The statistics name work done while users were off NO_USER; the catalogue, None.
        for name in set(held) | {n if n != stats.NO_USER else None for n in spent}:
            if not who.sees(name):
                continue
            n, size = held.get(name, (0, 0))
            t = spent.get(stats.NO_USER if name is None else name) or Totals()
            rows.append(
                UserUsage(
                    user=name, datasets=n, bytes=size, computeSeconds=float(t.compute_seconds),
                    savedSeconds=float(t.saved_seconds), savedFromOthersSeconds=float(t.saved_others_seconds),
                )
            )  # fmt: skip
        return sorted(rows, key=lambda r: (-r.bytes, r.user or ""))

    async def get_dataset(self, request: web.Request) -> web.Response:
        h = request.match_info["hash"]
        d = await ds.record(self.ctx.store, h)
        if d is None:
            return error(404, f"no dataset {h!r}")
        caller = auth.identity(request)
        detail = await provenance.detail(self.ctx.store, d, caller.sees)
        detail.canChange = caller.sees(d.owner)
        return answer(await sharing.for_caller(self.ctx.store, detail, caller))  # its history's notes too

    async def delete_dataset(self, request: web.Request) -> web.Response:
        return await curation.delete(self.ctx, self.curator, request)

    async def invalidate_dataset(self, request: web.Request) -> web.Response:
        return await curation.invalidate(self.ctx, self.curator, request)

    async def patch_dataset(self, request: web.Request) -> web.Response:
        return await curation.patch(self.ctx, self.curator, request)
