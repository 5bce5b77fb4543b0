"""The one shape of every error the HTTP API answers: an RFC 9457 problem document
(``application/problem+json``), with the list of what was wrong as the ``violations``
extension member when there is such a list (a rejected workflow, bad query parameters).

``type`` is ``about:blank`` (the status says it all) unless the problem has a kind of its
own a client may act on; those are the ``tag:`` URIs below, listed in docs/api.md. They
name the problem and are not meant to be fetched.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from shared.errors import PingoError

PROBLEM_JSON = "application/problem+json"
BLANK = "about:blank"
_TAG = "tag:pingo,2026:problems/"
INVALID_WORKFLOW = _TAG + "invalid-workflow"
INVALID_QUERY = _TAG + "invalid-query"
MALFORMED_BODY = _TAG + "malformed-body"
STORE_UNAVAILABLE = _TAG + "store-unavailable"
PLANNING_ABANDONED = _TAG + "planning-abandoned"
HOST_NOT_ALLOWED = _TAG + "host-not-allowed"
CROSS_ORIGIN = _TAG + "cross-origin"
ALREADY_ENDED = _TAG + "already-ended"
UNAUTHENTICATED = _TAG + "unauthenticated"
LOGS_GONE = _TAG + "logs-gone"
IDEMPOTENCY_KEY_INVALID = _TAG + "idempotency-key-invalid"
IDEMPOTENCY_KEY_REUSED = _TAG + "idempotency-key-reused"
IDEMPOTENCY_IN_FLIGHT = _TAG + "idempotency-key-in-flight"
SHARED_COMPUTATION = _TAG + "shared-computation"
DATASET_NEEDED = _TAG + "dataset-needed"


class ProblemViolation(BaseModel):
    """One thing wrong with the request, and where."""

    model_config = ConfigDict(extra="allow")

    loc: str = Field(description="Where: a JSON path into the body (actions[2].command) or a query parameter's name")
    message: str
    in_: str | None = Field(None, alias="in", description="query for a query parameter; absent for the body")
    actionId: int | str | None = None
    field: str | None = None


class Problem(BaseModel):
    """RFC 9457 problem details."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: str = Field(BLANK, description="A URI naming the kind of problem; about:blank when the status says it all")
    title: str = Field(description="Short, the same for every problem of this type")
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="What went wrong with this request, for a person")
    instance: str | None = Field(None, description="The request's path and query")
    violations: list[ProblemViolation] | None = Field(None, description="Every violation at once (400, 422)")
    retryAfter: int | None = Field(None, description="Seconds to wait before trying again (503)")
    reference: str | None = Field(None, description="500: the reference of the logged failure")


class ProblemResponse(web.Response):
    """A problem answer; the gateway's outer middleware fills ``instance`` in from the request."""

    def __init__(self, problem: Problem, headers: dict[str, str] | None = None) -> None:
        self.problem = problem
        super().__init__(status=problem.status, headers=headers, content_type=PROBLEM_JSON, text=render(problem))

    def locate(self, instance: str) -> None:
        if self.problem.instance is None:
            self.problem.instance = instance
            self.text = render(self.problem)


class ProblemError(PingoError):
    """Raised deep in a handler (a query that does not parse): answered as its problem."""

    def __init__(self, response: ProblemResponse) -> None:
        super().__init__(response.problem.detail)
        self.response = response


def render(problem: Problem) -> str:
    return problem.model_dump_json(exclude_none=True, by_alias=True)


def title_of(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


TITLES = {
    INVALID_WORKFLOW: "The workflow breaks rules",
    INVALID_QUERY: "Bad query parameters",
    MALFORMED_BODY: "The body is not valid JSON",
    STORE_UNAVAILABLE: "The store is unavailable",
    PLANNING_ABANDONED: "Planning was abandoned",
    HOST_NOT_ALLOWED: "Host not allowed",
    CROSS_ORIGIN: "Cross-origin request refused",
    ALREADY_ENDED: "The workflow has already ended",
    UNAUTHENTICATED: "Credentials missing or refused",
    LOGS_GONE: "The logs were removed",
    IDEMPOTENCY_KEY_INVALID: "Bad Idempotency-Key",
    IDEMPOTENCY_KEY_REUSED: "The Idempotency-Key was used for another request",
    IDEMPOTENCY_IN_FLIGHT: "A request with this Idempotency-Key is in progress",
    SHARED_COMPUTATION: "The job is another user's",
    DATASET_NEEDED: "A workflow still needs the dataset",
}


def problem(
    status: int,
    detail: str,
    headers: dict[str, str] | None = None,
    *,
    type: str = BLANK,
    violations: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> ProblemResponse:
    """The answer for an error: ``detail`` says what went wrong with this request."""
    title = TITLES.get(type) or title_of(status)
    body = Problem(type=type, title=title, status=status, detail=detail, violations=violations, **extra)
    return ProblemResponse(body, headers)


@web.middleware
async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """For a service without the gateway's guard (the callback endpoint): its HTTP errors
    (no such route, wrong method) as problems, with ``instance`` filled in (the path only)."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kept = {k: v for k, v in exc.headers.items() if k == "Allow"}
        response = problem(exc.status, f"{request.method} {request.path}: {exc.reason}", headers=kept)
    if isinstance(response, ProblemResponse):
        # The path alone: a callback's query holds its action's secret, never echoed back.
        response.locate(request.path)
    return response
