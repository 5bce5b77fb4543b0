"""The callback service (thesis section 3.5): the URL executors notify, and the timers of
the poller (``shared.lifecycle.polling``), the repair sweep and the webhook outbox.

A notification is only a hint. The endpoint checks the per-action secret, answers at
once, then asks the executor for the job's real status before any transition
(``shared.lifecycle.ending.Outcomes.check``).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from collections.abc import Coroutine, Mapping
from typing import Any

from aiohttp import web

from shared import callback_batches, callback_tokens, logs, problems
from shared.connections import CappedRunner
from shared.executors.base import JobState
from shared.lifecycle.polling import Poller
from shared.lifecycle.repairing import Repairs
from shared.metrics import CALLBACK_BATCHES, CALLBACKS
from shared.runtime import Context, health
from shared.states import ActionState
from shared.store.actions import ActionDoc
from shared.ticker import Ticker, cancel_all, forever
from shared.webhooks import delivery as webhooks

log = logging.getLogger(__name__)
A = ActionState
# How long a notification waits for its job's id to be recorded, re-reading first after
# JOB_ID_WAIT_FIRST, then at doubling intervals (CallbackService.job_recorded).
JOB_ID_WAIT = 1.0
JOB_ID_WAIT_FIRST = 0.005
# What a job's notification says when it ended (its ``status``): only those are finished
# from a signed notification without reading the action first.
ENDED_STATES = frozenset(s.value for s in (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED))


class CallbackService:
    name = "callback"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.outcomes = ctx.outcomes(self.name)
        self.poller = Poller(
            ctx.store, ctx.executor, self.outcomes.mover, self.outcomes, self.name, self.settings.poll_interval,
            self.settings.poll_max_interval, self.settings.stale_after,
        )  # fmt: skip
        self.poll_ticker = Ticker(min(1.0, self.settings.poll_interval))
        self.repairs = Repairs.of(self.outcomes, self.settings.settle_interval)
        self.repair_ticker = Ticker(self.settings.settle_interval)
        self.tasks: list[asyncio.Task] = []
        self.pending: set[asyncio.Task] = set()
        self.runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[problems.middleware])  # errors as RFC 9457 problems
        app.router.add_route("*", "/callback/{action_id}", self.on_callback)
        app.router.add_post(callback_batches.BATCH_PATH, self.on_batch)
        app.router.add_get("/healthz", health)
        return app

    async def start(self) -> None:
        # Connections capped and timed as the gateway's (shared/connections.py).
        self.runner = CappedRunner(self.app(), self.settings, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, self.settings.callback_host, self.settings.callback_port).start()
        self.tasks.append(asyncio.create_task(forever("poller", self.poll, self.poll_ticker)))
        self.tasks.append(asyncio.create_task(forever("repair", self.repair, self.repair_ticker)))
        # Webhooks from the outbox in the store (docs/webhooks.md).
        self.tasks.append(asyncio.create_task(forever("webhooks", lambda: webhooks.run_once(self.ctx), Ticker(1.0))))

    async def stop(self) -> None:
        await cancel_all(self.tasks)
        await cancel_all(list(self.pending))
        if self.runner is not None:
            await self.runner.cleanup()

    async def on_callback(self, request: web.Request) -> web.Response:
        action_id = request.match_info["action_id"]
        if await self.admit(action_id, request.query, request.remote):
            return web.json_response({"ok": True})
        return problems.problem(403, "wrong secret")

    async def on_batch(self, request: web.Request) -> web.Response:
        """Many notifications in one request, each the path and query its GET would have
        asked (a job runner's ends that came together, docs/architecture.md, "callback").
        Each is checked as its GET is; the signed ones are confirmed in one loop turn, so
        their ends are finished as one group. The answer gives each entry its GET's
        status (200, or 403 for an unknown id and a wrong secret alike)."""
        body = await read_capped(request)
        if body is None:
            CALLBACK_BATCHES.labels("refused").inc()
            return problems.problem(413, f"a batch takes at most {callback_batches.BATCH_MAX_BYTES} bytes")
        entries = callback_batches.parse(body)
        if isinstance(entries, str):
            CALLBACK_BATCHES.labels("refused").inc()
            return problems.problem(422, entries, type=problems.MALFORMED_BODY)
        # The signed first, all spawned before any await: they land together in the
        # finishing group commits (shared/group_commit.py).
        results: list[int] = [0] * len(entries)
        older: list[int] = []
        for i, (action_id, query) in enumerate(entries):
            if self.admit_signed(action_id, query):
                results[i] = 200
            else:
                older.append(i)
        for i in older:
            action_id, query = entries[i]
            results[i] = 200 if await self.admit_older(action_id, query, request.remote) else 403
        CALLBACK_BATCHES.labels("accepted").inc()
        return web.json_response({"ok": True, "results": results})

    async def admit(self, action_id: str, query: Mapping[str, str], remote: str | None) -> bool:
        """Check one notification as its GET is, and start confirming it if it holds."""
        return self.admit_signed(action_id, query) or await self.admit_older(action_id, query, remote)

    def admit_signed(self, action_id: str, query: Mapping[str, str]) -> bool:
        dataset = query.get("dataset") or None
        if not (
            self.ctx.callback_key
            and callback_tokens.valid(self.ctx.callback_key, action_id, dataset, query.get("secret", ""))
        ):
            return False
        # Signed by a service: nothing to read before answering (docs/performance.md, "A chain's hop").
        CALLBACKS.labels("accepted").inc()
        with logs.about(action_id.split(".", 1)[0], action_id):  # action ids are <workflow id>.<local id>
            self.spawn(self.confirm_signed(action_id, dataset, query.get("jobId"), query.get("status")))
        return True

    async def admit_older(self, action_id: str, query: Mapping[str, str], remote: str | None) -> bool:
        """An older URL, with the action's stored secret: what checking it and then the job
        needs, read once."""
        action = await self.outcomes.notified(action_id)
        # The confirming task started below inherits the ids for its lines.
        with logs.about(action.get("workflow_id") if action else None, action_id):
            expected = action.get("secret") if action is not None else None
            # An unknown action and a wrong secret get the same answer: it must not tell which
            # ids exist. An action with no secret (REUSED, SKIPPED: never run) takes no callback.
            valid = isinstance(expected, str) and expected != ""
            secret = query.get("secret", "")
            matches = hmac.compare_digest(secret.encode(), (expected if valid else secrets.token_urlsafe(18)).encode())
            if not (valid and matches) or action is None:
                log.warning("refused a callback for %r from %s", action_id, remote)
                CALLBACKS.labels("refused").inc()
                return False
            CALLBACKS.labels("accepted").inc()
            self.spawn(self.confirm(action, query.get("jobId")))
            return True

    def spawn(self, confirming: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(confirming)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def confirm_signed(self, action_id: str, dataset: str | None, job_id: str | None, state: str | None) -> None:
        """A signed notification: a job's end is finished from the lease alone
        (``Outcomes.finish_notified``); anything else, or an end not finished so, is
        confirmed as an older URL's is, from the action read first."""
        try:
            if job_id and state in ENDED_STATES:
                if await self.outcomes.finish_notified(action_id, job_id, dataset, state == JobState.SUCCEEDED.value):
                    return
            action = await self.outcomes.notified(action_id)
        except Exception:
            log.exception("confirming a callback for %s failed; the poller will retry", action_id)
            return
        if action is not None:
            await self.confirm(action, job_id)

    async def confirm(self, action: ActionDoc, job_id: str | None) -> None:
        action_id = action["_id"]
        try:
            if action.get("job_handed_to"):
                # Its job was adopted by a follower (its own workflow was killed): news for that one.
                action = await self.outcomes.notified(action["job_handed_to"])
            if action is not None and action["state"] == A.SUBMITTED and not action.get("job_id"):
                action = await self.job_recorded(action)
            if action is None or (job_id and action.get("job_id") and job_id != action["job_id"]):
                return  # a late notification about an earlier attempt
            await self.outcomes.check(action)
        except Exception:
            log.exception("confirming a callback for %s failed; the poller will retry", action_id)

    async def job_recorded(self, action: ActionDoc) -> ActionDoc | None:
        """A job that ends at once can notify before its submitter has recorded its id (it
        does so as soon as the executor answers): wait briefly for the id rather than
        leave the end to the poller, ``PINGO_POLL_INTERVAL`` later. The action as read last."""
        delay = JOB_ID_WAIT_FIRST
        waited = 0.0
        while waited < JOB_ID_WAIT:
            await asyncio.sleep(delay)
            waited += delay
            fresh = await self.outcomes.notified(action["_id"])
            if fresh is None or fresh.get("job_id") or fresh["state"] != A.SUBMITTED:
                return fresh
            delay *= 2
        return action

    async def poll(self) -> bool:
        """Ask the executor about the jobs in flight (``shared.lifecycle.polling.Poller``)."""
        return await self.poller.poll()

    async def repair(self) -> bool:
        """Finish what a crash interrupted (``shared.lifecycle.repairing.Repairs``)."""
        return await self.repairs.run()


async def read_capped(request: web.Request) -> bytes | None:
    """The request's body, or None if it is over ``callback_batches.BATCH_MAX_BYTES``."""
    if (request.content_length or 0) > callback_batches.BATCH_MAX_BYTES:
        return None
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > callback_batches.BATCH_MAX_BYTES:
            return None
    return bytes(body)
