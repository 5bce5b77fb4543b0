"""Delivering webhooks (docs/webhooks.md): the callback service's timer calls ``run_once``.

1. Workflows that ended with ``webhooks_due`` set (at submission, when the workflow or the
   installation names webhooks) get one outbox document per URL (``shared/store/webhooks.py``),
   its body the ``workflow.finished`` event made by the functions the bus's event is made
   with (``shared.lifecycle``'s payload and subject), then the flag is cleared. A crash in
   between writes nothing twice: a delivery's id is its workflow and URL.
2. Due deliveries are claimed (one replica sends each attempt), signed (``signing``) and
   POSTed; the answer is recorded: a 2xx is DELIVERED; anything else (another status, a
   redirect, which is never followed, a refused connection, a timeout) is tried again after
   ``PINGO_WEBHOOK_RETRY_SECONDS``, doubling, up to ``PINGO_WEBHOOK_ATTEMPTS`` attempts.

The store is the only state, so deliveries survive any restart, and the broker plays no
part: an outage of it delays nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import aiohttp

from shared.events import Event, EventType, checked
from shared.lifecycle.effects import PAYLOAD_OF
from shared.lifecycle.moves import source_of, subject
from shared.metrics import WEBHOOK_ATTEMPTS
from shared.runtime import Context
from shared.states import WorkflowState
from shared.store import webhooks as hooks
from shared.store import workflows as wfs
from shared.store.webhooks import DeliveryState
from shared.webhooks import signing
from shared.webhooks.urls import redacted

log = logging.getLogger(__name__)
W = WorkflowState
PRODUCER = "callback"  # the service whose timer sends them
BATCH = 20  # deliveries sent at once
LONGEST_WAIT = 3600.0  # between two attempts, seconds
ENDED = (W.SUCCEEDED, W.FAILED, W.KILLED)
# What making the event reads of a workflow.
FIELDS = {
    "name": 1, "state": 1, "owner": 1, "outcome": 1, "created_at": 1, "finished_at": 1, "history": 1, "webhooks": 1,
}  # fmt: skip


async def run_once(ctx: Context) -> bool:
    """One round: the ended workflows' deliveries written, the due ones sent. True: more is due."""
    for wf in await wfs.webhooks_due(ctx.store, FIELDS):
        if wf["state"] in ENDED:
            await enqueue(ctx, wf)
    return await deliver_due(ctx)


def finished_event(wf: dict[str, Any]) -> Event:
    """The ``workflow.finished`` event of ``wf``, as the bus carries it. Its id is made from
    the workflow's, so the same end always makes the same body."""
    return Event(
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"pingo:workflow.finished:{wf['_id']}").hex,
        type=EventType.WORKFLOW_FINISHED,
        time=float(wf.get("finished_at") or time.time()),
        producer=PRODUCER,
        subject=subject("workflow", wf),
        payload=checked(EventType.WORKFLOW_FINISHED, PAYLOAD_OF[EventType.WORKFLOW_FINISHED](wf)),
    )


async def enqueue(ctx: Context, wf: dict[str, Any]) -> None:
    # A planning undone (PLANNING -> FAILED) was never submitted as far as anyone outside can
    # tell: the bus announces no end, and neither does a webhook.
    if not (wf["state"] == W.FAILED and source_of(wf, None) == W.PLANNING):
        own = list(wf.get("webhooks") or [])
        targets = [(u, "workflow") for u in own] + [(u, "installation") for u in ctx.settings.webhooks if u not in own]
        event = finished_event(wf)
        body, now = event.model_dump_json(), time.time()
        docs = [hooks.new_document(wf["_id"], wf.get("owner"), u, o, event.id, body, now) for u, o in targets]
        await hooks.create(ctx.store, docs)
    await wfs.webhooks_written(ctx.store, wf["_id"])


def next_wait(settings_first: float, attempts: int) -> float:
    """The wait after failed attempt number ``attempts`` (1 = the first)."""
    return min(LONGEST_WAIT, settings_first * 2 ** (attempts - 1))


async def deliver_due(ctx: Context) -> bool:
    now = time.time()
    due = await hooks.due(ctx.store, now, BATCH)
    if not due:
        return False
    lease = now + ctx.settings.webhook_timeout + 30
    mine = [d for d in due if await hooks.claim(ctx.store, d, lease, now)]
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(attempt(ctx, session, d) for d in mine))
    return len(due) >= BATCH


async def attempt(ctx: Context, session: aiohttp.ClientSession, d: dict[str, Any]) -> None:
    settings = ctx.settings
    status: int | None = None
    error: str | None = None
    if settings.webhook_secret is None:
        error = "PINGO_WEBHOOK_SECRET is unset: nothing is sent unsigned"
    else:
        signed = signing.headers(settings.webhook_secret.get_secret_value(), d["message_id"], d["body"], time.time())
        try:
            async with session.post(
                d["url"], data=d["body"].encode(), headers=signed, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=settings.webhook_timeout),
            ) as response:  # fmt: skip
                status = response.status
            if not 200 <= status < 300:
                error = f"answered {status}"
        except Exception as exc:  # any failure to reach it is one failed attempt
            # Not str(exc): aiohttp's messages may quote the URL, which may hold a token.
            error = type(exc).__name__
    now = time.time()
    attempts = d["attempts"] + 1
    if error is None:
        await hooks.record(ctx.store, d, DeliveryState.DELIVERED, status, None, None, now)
        WEBHOOK_ATTEMPTS.labels("delivered").inc()
        log.info("webhook %s for %s delivered (attempt %d)", redacted(d["url"]), d["workflow_id"], attempts)
    elif attempts >= settings.webhook_attempts:
        await hooks.record(ctx.store, d, DeliveryState.GAVE_UP, status, error, None, now)
        WEBHOOK_ATTEMPTS.labels("gave_up").inc()
        log.warning("webhook %s for %s given up after %d attempts: %s", redacted(d["url"]), d["workflow_id"],
                    attempts, error)  # fmt: skip
    else:
        retry_at = now + next_wait(settings.webhook_retry_seconds, attempts)
        await hooks.record(ctx.store, d, DeliveryState.PENDING, status, error, retry_at, now)
        WEBHOOK_ATTEMPTS.labels("retrying").inc()
        log.info("webhook %s for %s failed (%s); attempt %d in %.0f s", redacted(d["url"]), d["workflow_id"], error,
                 attempts + 1, retry_at - now)  # fmt: skip
