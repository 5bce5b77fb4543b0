"""``GET /api/v1/actions/{id}/logs``: an attempt's standard output or error, streamed from
the executor that ran it (docs/api.md, "Action logs").

The gateway reads no file itself: the executor's ``logs`` does (the local executor from the
shared jobs folder, the Oozie executor from Oozie's job log). The answer is streamed in the
executor's chunks, never held whole; a followed log stays open until the attempt's job ends.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pymongo
from aiohttp import web

from services.workflow_manager import auth, queries, sharing
from services.workflow_manager.guard import error
from shared.executors.base import LogsGone
from shared.problems import LOGS_GONE, SHARED_COMPUTATION
from shared.runtime import Context
from shared.states import ActionState
from shared.store import actions as acts
from shared.store import workflows as wfs

log = logging.getLogger(__name__)
A = ActionState
TEXT = "text/plain; charset=utf-8"
FIELDS = {"workflow_id": 1, "state": 1, "attempt": 1, "job_id": 1, "attempt_log": 1, "takeover_of": 1}


def attempt_jobs(action: dict[str, Any]) -> dict[int, str | None]:
    """Each attempt's job id: those that ended (their records), and the one in flight."""
    jobs: dict[int, str | None] = {int(r.get("attempt") or 0): r.get("job_id") for r in action.get("attempt_log") or []}
    if action.get("state") in (A.SUBMITTED, A.RUNNING) and action.get("attempt"):
        jobs[int(action["attempt"])] = action.get("job_id")
    jobs.pop(0, None)
    return jobs


async def get_logs(ctx: Context, request: web.Request) -> web.StreamResponse:
    q: queries.LogQuery = queries.parse(request, queries.LogQuery)
    action_id = request.match_info["id"]
    # The route is exempt from the guard's GET deadline (it may stream for long): its store
    # reads, all made before streaming, keep the same bound.
    with pymongo.timeout(ctx.settings.request_timeout):
        action = await acts.get(ctx.store, action_id, FIELDS)
        wf = await wfs.brief(ctx.store, action["workflow_id"]) if action else None
    if action is None or wf is None or not auth.identity(request).sees(wf.owner):
        return error(404, f"no action {action_id!r}")  # another user's is as one that does not exist
    jobs = attempt_jobs(action)
    if not jobs:
        state = action.get("state")
        return error(404, f"action {action_id} has no attempt: it never ran (it is {state})")
    attempt = q.attempt or max(jobs)
    if attempt not in jobs:
        known = ", ".join(str(n) for n in sorted(jobs))
        return error(404, f"action {action_id} has no attempt {attempt} (its attempts: {known})")
    job_id = jobs[attempt]
    if not job_id:
        return error(404, f"attempt {attempt} of action {action_id} has no job (it was never started)")
    if await sharing.adopted_from_hidden(ctx.store, action, job_id, auth.identity(request)):
        # A takeover adopted the running job of another user's identical action: its output
        # is theirs (docs/users.md, "Shared computations").
        return error(
            403, f"attempt {attempt} of action {action_id} is a computation shared with another user's workflow, "
            "whose job ran it: its logs are not shown", type=SHARED_COMPUTATION,
        )  # fmt: skip
    try:
        chunks = await ctx.executor.logs(job_id, q.stream, q.tail, q.follow)
    except LogsGone as exc:
        if action.get("state") == A.SUBMITTED and attempt == action.get("attempt"):
            # Claimed with the job id its executor names in advance, and the job not made
            # yet (docs/state-machines.md): not started, rather than removed.
            return error(404, f"attempt {attempt} of action {action_id} has not started yet")
        return error(410, f"the logs of attempt {attempt} of action {action_id} were removed: {exc}", type=LOGS_GONE)
    except Exception as exc:  # the cluster cannot be reached or refuses: not the caller's fault
        log.warning("reading the logs of job %s failed: %s", job_id, exc)
        return error(502, f"the executor could not give the logs of attempt {attempt} of action {action_id}: {exc}")
    response = web.StreamResponse(headers={"Content-Type": TEXT, "Cache-Control": "no-store"})
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        await response.prepare(request)
        try:
            async for chunk in chunks:
                await response.write(chunk)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client left (a follower interrupted): nothing more to send
        except Exception:
            # The status line is sent: the only way left to say the log is cut is to drop
            # the connection before the last chunk, so no client takes it for the whole log.
            log.exception("reading the logs of job %s failed half-way", job_id)
            if request.transport is not None:
                request.transport.close()
    return response
