"""Webhook deliveries: the outbox (docs/webhooks.md, "Deliveries"). One document per URL
and workflow end, written before anything is sent, so a delivery survives a restart of
any service and an outage of the broker; its body is fixed when it is written, so every
attempt sends the same bytes under the same ``webhook-id``.

``{_id: "<workflow>/<url digest>", workflow_id, owner, url, origin: workflow|installation,
message_id, body (the event's JSON text), state: PENDING|DELIVERED|GAVE_UP, attempts,
next_try_at, last_status (HTTP status, or null), last_error, created_at, updated_at}``.

A PENDING delivery moves only here, each move guarded by the ``attempts`` it was read
with, so two replicas never record one attempt twice: PENDING -> PENDING (an attempt
failed; another is due at ``next_try_at``), PENDING -> DELIVERED (a 2xx answer) or
GAVE_UP (the last attempt failed).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError

from shared.store.client import Store


class DeliveryState(StrEnum):
    PENDING = "PENDING"
    DELIVERED = "DELIVERED"
    GAVE_UP = "GAVE_UP"


def collection(store: Store) -> AsyncCollection:
    return store.db["webhook_deliveries"]


def delivery_id(workflow_id: str, url: str) -> str:
    """One delivery per workflow end and URL, whichever replica writes it first."""
    return f"{workflow_id}/{hashlib.sha256(url.encode()).hexdigest()[:16]}"


def new_document(
    workflow_id: str, owner: str | None, url: str, origin: str, message_id: str, body: str, now: float
) -> dict[str, Any]:
    return {
        "_id": delivery_id(workflow_id, url),
        "workflow_id": workflow_id,
        "owner": owner,
        "url": url,
        "origin": origin,
        "message_id": message_id,
        "body": body,
        "state": str(DeliveryState.PENDING),
        "attempts": 0,
        "next_try_at": now,
        "last_status": None,
        "last_error": None,
        "created_at": now,
        "updated_at": now,
    }


async def create(store: Store, docs: list[dict[str, Any]]) -> None:
    """Write ``docs``; one already written (by another replica, or before a crash) stays as it is."""
    for doc in docs:
        try:
            await collection(store).insert_one(doc)
        except DuplicateKeyError:
            pass


async def due(store: Store, now: float, limit: int) -> list[dict[str, Any]]:
    """PENDING deliveries whose next attempt is due, oldest first."""
    where = {"state": str(DeliveryState.PENDING), "next_try_at": {"$lte": now}}
    return [d async for d in collection(store).find(where).sort("next_try_at", 1).limit(limit)]


async def claim(store: Store, doc: dict[str, Any], until: float, now: float) -> bool:
    """Take ``doc``'s attempt: its next try is pushed to ``until``, so no other replica
    sends it meanwhile, and a sender that dies mid-attempt leaves it due again then."""
    won = await collection(store).find_one_and_update(
        {"_id": doc["_id"], "state": str(DeliveryState.PENDING), "attempts": doc["attempts"],
         "next_try_at": doc["next_try_at"]},
        {"$set": {"next_try_at": until, "updated_at": now}},
    )  # fmt: skip
    return won is not None


async def record(
    store: Store, doc: dict[str, Any], state: DeliveryState, status: int | None, error: str | None,
    next_try_at: float | None, now: float,
) -> bool:  # fmt: skip
    """The outcome of the attempt taken with ``claim``: the one guarded writer of a delivery."""
    update: dict[str, Any] = {"state": str(state), "attempts": doc["attempts"] + 1, "last_status": status,
                              "last_error": error, "updated_at": now}  # fmt: skip
    if next_try_at is not None:
        update["next_try_at"] = next_try_at
    won = await collection(store).find_one_and_update(
        {"_id": doc["_id"], "state": str(DeliveryState.PENDING), "attempts": doc["attempts"]}, {"$set": update}
    )
    return won is not None


async def of_workflow(store: Store, workflow_id: str) -> list[dict[str, Any]]:
    return [d async for d in collection(store).find({"workflow_id": workflow_id}).sort("_id", 1)]
