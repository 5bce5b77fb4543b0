"""The query parameters of each list and statistics route, parsed by one pydantic model
each: every bad parameter is named at once in a 400 problem, never a 500.

A parameter the route does not know is a violation too (with the closest known name):
``?stat=FAILED`` would otherwise list every workflow without a word.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import math
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from shared.problems import INVALID_QUERY, ProblemError, problem
from shared.states import DatasetState, WorkflowState
from shared.store import stats


def parse_time(raw: Any) -> float:
    """Unix seconds or ISO 8601 (UTC unless it says otherwise). ValueError for anything else,
    NaN and infinities included: they would reach MongoDB as range bounds."""
    if not isinstance(raw, str | int | float):
        raise ValueError("must be an ISO 8601 time or Unix seconds")
    try:
        value = float(raw)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
            value = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError, OSError):
            raise ValueError(f"must be an ISO 8601 time or Unix seconds, not {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"must be an ISO 8601 time or Unix seconds, not {raw!r}")
    return value


Time = Annotated[
    float,
    BeforeValidator(parse_time),
    Field(json_schema_extra={"type": "string", "description": "ISO 8601 (UTC unless it says) or Unix seconds"}),
]


class Cursor(BaseModel):
    """Where a page ended: the sort key and id of its last item (a keyset; opaque to clients)."""

    key: float | None
    id: str


def encode_cursor(key: float | None, item_id: str) -> str:
    raw = json.dumps({"key": key, "id": item_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(raw: Any) -> Cursor:
    if not isinstance(raw, str):
        raise ValueError("must be the next value of a previous page")
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        cursor = Cursor.model_validate_json(data)
    except (binascii.Error, ValueError):
        raise ValueError("is not a cursor this API gave: pass the next value of a previous page unchanged") from None
    if isinstance(cursor.key, float) and not math.isfinite(cursor.key):
        raise ValueError("is not a cursor this API gave: pass the next value of a previous page unchanged")
    return cursor


CursorParam = Annotated[
    Cursor | None,
    BeforeValidator(lambda v: None if v is None else decode_cursor(v)),
    Field(json_schema_extra={"type": "string", "description": "The next value of the previous page"}),
]


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class WorkflowQuery(Query):
    state: WorkflowState | None = None
    name: str | None = None
    limit: int = Field(50, ge=1, le=1000)
    before: Time | None = Field(None, description="Only workflows created before this time")
    cursor: CursorParam = None


class DatasetQuery(Query):
    state: DatasetState | None = None
    limit: int = Field(1000, ge=1, le=10_000)
    cursor: CursorParam = None
    byUser: bool = Field(False, description="Add each user's share of storage and of the compute time saved")


class TimelineQuery(Query):
    limit: int = Field(10_000, ge=1, le=10_000)
    cursor: CursorParam = None


class LogQuery(Query):
    attempt: int | None = Field(None, ge=1, le=1_000_000, description="1-based; default the latest attempt")
    stream: Literal["stdout", "stderr"] = "stdout"
    tail: int | None = Field(None, ge=0, le=1_000_000, description="Only the last N lines")
    follow: bool = Field(False, description="Keep sending what the attempt writes until it ends")


class StatsQuery(Query):
    resolution: Literal["1m", "30m", "1d", "10d"] = "30m"
    start: Time | None = Field(None, alias="from", description="Default: a day before to")
    end: Time | None = Field(None, alias="to", description="Default: now")

    @model_validator(mode="after")
    def defaults(self) -> StatsQuery:
        if self.end is None:
            self.end = time.time()
        if self.start is None:
            self.start = self.end - 86_400
        return self


def _message(name: str, err: dict[str, Any], model: type[Query]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        known = [f.alias or n for n, f in model.model_fields.items()]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f": did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
        return f"unknown query parameter {name!r}{hint}"
    if kind in ("enum", "literal_error"):
        expected = err["ctx"]["expected"].replace("' or '", "', '").replace("'", "")
        return f"{name} must be one of {expected}, not {err['input']!r}"
    if kind in ("int_parsing", "greater_than_equal", "less_than_equal", "int_from_float"):
        field = model.model_fields[name if name in model.model_fields else "limit"]
        low, high = (next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None),
                     next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None))  # fmt: skip
        return f"{name} must be an integer from {low} to {high}, not {err['input']!r}"
    text = str(err.get("ctx", {}).get("error") or err["msg"])
    return f"{name} {text.removeprefix('Value error, ')}"


def parse(request: web.Request, model: type[Query]) -> Any:
    """The route's query parameters as ``model``; raises a 400 problem listing every violation."""
    raw: dict[str, Any] = {}
    violations: list[dict[str, Any]] = []
    for name in request.query:
        values = request.query.getall(name)
        if len(values) > 1 and name not in raw:
            message = f"{name} is given {len(values)} times: give it once"
            violations.append({"loc": name, "in": "query", "message": message})
        raw[name] = values[0]
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "query"
            violations.append({"loc": name, "in": "query", "message": _message(name, err, model)})
    else:
        violations += [{"loc": loc, "in": "query", "message": m} for loc, m in checks(parsed)]
    if violations:
        detail = "; ".join(v["message"] for v in violations)
        raise ProblemError(problem(400, detail, type=INVALID_QUERY, violations=violations))
    return parsed


def checks(parsed: Query) -> list[tuple[str, str]]:
    """What no single parameter says wrong, but they do together."""
    if not isinstance(parsed, StatsQuery) or parsed.start is None or parsed.end is None:
        return []  # every other query's parameters stand alone
    if parsed.start >= parsed.end:
        return [("from", "from must be before to")]
    buckets = (parsed.end - parsed.start) / stats.RESOLUTIONS[parsed.resolution]
    if buckets > stats.MAX_BUCKETS:
        return [("resolution", f"{buckets:.0f} buckets of {parsed.resolution}: "
                 "use a coarser resolution or a shorter range")]  # fmt: skip
    return []
