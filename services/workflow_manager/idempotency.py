"""``Idempotency-Key`` on ``POST /api/v1/workflows`` (docs/api.md, "Retrying a submission"),
after the IETF draft "The Idempotency-Key HTTP Header Field":

- a retry with the key of a submission that made a workflow, by the same user and with the
  same body, within ``PINGO_IDEMPOTENCY_SECONDS``, answers what that submission answered
  (201, its body and ``Location``; ``Idempotent-Replayed: true``) and makes nothing;
- the same key with another body: 422 (``idempotency-key-reused``);
- the same key while its first request is still being planned: 409
  (``idempotency-key-in-flight``, ``Retry-After``);
- a key that is not a string of 1 to 255 printable ASCII characters: 400.

A submission that made no workflow (refused, planning abandoned) keeps no key: the retry
is a new attempt. A dry run writes nothing and ignores the key. The keys live in the store
(``shared.store.idempotency``), so every replica sees them.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from typing import Any

from aiohttp import web

from services.workflow_manager.views import Plan, planned_action
from shared.problems import (
    IDEMPOTENCY_IN_FLIGHT,
    IDEMPOTENCY_KEY_INVALID,
    IDEMPOTENCY_KEY_REUSED,
    ProblemError,
    problem,
)
from shared.runtime import Context
from shared.states import WorkflowState
from shared.store import actions as acts
from shared.store import idempotency as keys
from shared.store import workflows as wfs

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
MAX_KEY = 255
# An answer kept for a retry, compressed; a larger one (a workflow of many thousand
# actions) is rebuilt from the store instead, its actions in their states of now.
MAX_KEPT_ANSWER = 8 * 1024 * 1024
RETRY_IN_FLIGHT = 1  # seconds: planning usually ends within that


def key_of(request: web.Request) -> str | None:
    """The request's key, if it sent one: a Structured Field string (``"abc"``) or, as many
    clients send it, a bare token (``abc``)."""
    given = request.headers.getall(HEADER, [])
    if not given:
        return None
    value = given[0].strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if len(given) > 1 or not 1 <= len(value) <= MAX_KEY or not all(" " <= c <= "~" for c in value):
        raise ProblemError(problem(
            400, f"{HEADER} must be given once, a string of 1 to {MAX_KEY} printable ASCII characters "
            '(a UUID, say: "8e03978e-40d5-43e8-bc93-6894a57f9324")', type=IDEMPOTENCY_KEY_INVALID,
        ))  # fmt: skip
    return value


def fingerprint(body: Any) -> str:
    """The body's digest, whatever its spacing and key order: the same workflow sent again
    is the same request."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def replay(status: int, location: str, text: str) -> web.Response:
    headers = {"Location": location, REPLAYED: "true"}
    return web.Response(status=status, text=text, content_type="application/json", headers=headers)


async def rebuilt(ctx: Context, wf_id: str) -> str:
    """A submission's answer, made again from the store (its actions' states are today's)."""
    wf = await wfs.get(ctx.store, wf_id, {"state": 1})
    actions = await acts.records_of_workflow(ctx.store, wf_id)
    state = wf["state"] if wf else WorkflowState.FAILED
    return Plan(id=wf_id, state=state, actions=[planned_action(a) for a in actions]).model_dump_json()


async def claim(
    ctx: Context, owner: str | None, key: str, body: Any, workflow_id: str
) -> keys.Held | web.StreamResponse:
    """Take ``key`` for this submission (``Held``: plan ``workflow_id``), or the answer for
    a request that repeats one already made: the first one's answer, a 409 or a 422."""
    print_ = fingerprint(body)
    now = time.time()
    retention = ctx.settings.idempotency_seconds
    found = await keys.take(ctx.store, owner, key, print_, workflow_id, now, retention)
    if isinstance(found, keys.Held):
        return found
    if found.fingerprint != print_:
        return problem(422, f"{HEADER} {key!r} was used for another workflow: a new submission needs a new key",
                       type=IDEMPOTENCY_KEY_REUSED)  # fmt: skip
    if found.state == keys.DONE:
        answer = found.answer or {}
        location = answer.get("location") or f"/api/v1/workflows/{found.workflow_id}"
        kept = answer.get("body")
        text = zlib.decompress(kept).decode() if kept is not None else await rebuilt(ctx, found.workflow_id)
        return replay(int(answer.get("status") or 201), location, text)
    # Pending: its holder is planning, or died (before or after writing its workflow).
    wf = await wfs.get(ctx.store, found.workflow_id, {"state": 1, "counts": 1})
    if wf is not None and wf.get("counts") is not None:
        # Planned and written; its holder ended before recording the answer: answer it now.
        location = f"/api/v1/workflows/{found.workflow_id}"
        text = await rebuilt(ctx, found.workflow_id)
        await keys.answered(ctx.store, keys.holder(found), 201, location, _kept(text))
        return replay(201, location, text)
    taken_at = float(found.taken_at or found.created_at or 0)
    planning = wf is not None and wf.get("state") == WorkflowState.PLANNING
    if planning or (wf is None and now - taken_at < ctx.settings.stale_after):
        return in_flight(key)
    # Its holder made no workflow (it died before writing one, or the planning sweep undid
    # it): this retry takes the key over.
    held = await keys.take_over(ctx.store, found, workflow_id, now)
    return held if held is not None else in_flight(key)


def in_flight(key: str) -> web.Response:
    return problem(
        409, f"a submission with {HEADER} {key!r} is still being planned: try again shortly",
        headers={"Retry-After": str(RETRY_IN_FLIGHT)}, type=IDEMPOTENCY_IN_FLIGHT, retryAfter=RETRY_IN_FLIGHT,
    )  # fmt: skip


def _kept(text: str) -> bytes | None:
    packed = zlib.compress(text.encode())
    return packed if len(packed) <= MAX_KEPT_ANSWER else None


async def remember(ctx: Context, held: keys.Held, response: web.Response) -> None:
    """Keep the answer a submission gave, for its retries."""
    assert response.text is not None
    location = response.headers.get("Location", f"/api/v1/workflows/{held.workflow_id}")
    await keys.answered(ctx.store, held, response.status, location, _kept(response.text))


async def release(ctx: Context, held: keys.Held) -> None:
    await keys.release(ctx.store, held)
