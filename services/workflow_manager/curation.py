"""Datasets by hand over HTTP: delete, invalidate, pin, unpin and expire a dataset
(docs/api.md, "Datasets by hand"). The work is ``shared.lifecycle.curating``'s; this
module decides who may ask, reads the request and shapes the answer.

Only the owner of the workflow that committed a dataset (``owner``) or an admin may
change it; anyone else is answered 404, as for a workflow of another user: what one may
not act on is not shown to exist to that route (docs/users.md).
"""

from __future__ import annotations

from typing import Annotated, Any

from aiohttp import web
from pydantic import BeforeValidator, Field, StrictBool, ValidationError

from services.workflow_manager import auth, queries
from services.workflow_manager.guard import error
from services.workflow_manager.views import Dataset, View, answer, dataset_view
from shared import strict_json
from shared.lifecycle.curating import Curator, StillNeeded
from shared.problems import DATASET_NEEDED, MALFORMED_BODY
from shared.runtime import Context
from shared.store import datasets as ds
from shared.store.records import DatasetRecord


class InvalidateQuery(queries.Query):
    descendants: bool = Field(False, description="Also every dataset computed from it, as recorded actions tell")


# A time in a body: ISO 8601 text or Unix seconds as a number (a query parameter is always text).
BodyTime = Annotated[
    float,
    BeforeValidator(queries.parse_time),
    Field(
        json_schema_extra={"type": ["string", "number"], "description": "ISO 8601 (UTC unless it says) or Unix seconds"}
    ),
]


class DatasetPatch(View):
    """What a user may change of a dataset; a field left out is left as it is."""

    model_config = View.model_config | {"extra": "forbid"}

    pinned: StrictBool | None = Field(None, description="true: never chosen for eviction; false: an ordinary dataset")
    expiresAt: BodyTime | None = Field(
        None,
        description="Deleted once this time has passed and nothing needs it (ISO 8601 or Unix seconds); null "
        "removes the date",
    )


class Invalidation(View):
    invalidated: list[str] = Field(description="The hashes withdrawn from reuse: computed again at their next use")
    skipped: dict[str, str] = Field(
        description="Descendants left as they were, with why (already gone, being computed)"
    )
    dataset: Dataset


async def _mine(ctx: Context, request: web.Request) -> dict[str, Any] | web.Response:
    """The dataset of the path if the caller may change it, else the 404 to answer."""
    h = request.match_info["hash"]
    d = await ds.get(ctx.store, h)
    if d is None or not auth.identity(request).sees(d.get("owner")):
        return error(404, f"no dataset {h!r} of yours")
    return d


def _view(d: dict[str, Any]) -> Dataset:
    return dataset_view(DatasetRecord.of(d))


def _conflict(exc: StillNeeded) -> web.Response:
    return error(409, str(exc), type=DATASET_NEEDED)


async def delete(ctx: Context, curator: Curator, request: web.Request) -> web.Response:
    d = await _mine(ctx, request)
    if isinstance(d, web.Response):
        return d
    try:
        done = await curator.delete(d["_id"], auth.identity(request).name)
    except StillNeeded as exc:
        return _conflict(exc)
    return answer(_view(done or d), 202)


async def invalidate(ctx: Context, curator: Curator, request: web.Request) -> web.Response:
    q: InvalidateQuery = queries.parse(request, InvalidateQuery)
    d = await _mine(ctx, request)
    if isinstance(d, web.Response):
        return d
    try:
        out = await curator.invalidate(d["_id"], auth.identity(request).name, q.descendants)
    except StillNeeded as exc:
        return _conflict(exc)
    return answer(Invalidation(invalidated=out.invalidated, skipped=out.skipped, dataset=_view(out.dataset or d)))


async def patch(ctx: Context, curator: Curator, request: web.Request) -> web.Response:
    try:
        body = strict_json.loads(await request.read())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return error(400, f"malformed JSON: {exc}"[:500], type=MALFORMED_BODY)
    try:
        change = DatasetPatch.model_validate(body)
    except ValidationError as exc:
        listed = [
            {"loc": ".".join(map(str, v["loc"])) or "body", "message": v["msg"]} for v in exc.errors(include_url=False)
        ]
        return error(422, f"the change has {len(listed)} violation(s)", violations=listed)
    d = await _mine(ctx, request)
    if isinstance(d, web.Response):
        return d
    who, h = auth.identity(request).name, d["_id"]
    given = change.model_fields_set
    try:
        if "pinned" in given and change.pinned is not None and bool(d.get("pinned")) != change.pinned:
            d = await curator.pin(h, who, change.pinned) or d
        if "expiresAt" in given and change.expiresAt != d.get("expires_at"):
            d = await curator.expire(h, who, change.expiresAt) or d
    except StillNeeded as exc:
        return _conflict(exc)
    return answer(_view(d))
