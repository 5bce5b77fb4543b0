"""Query parameters parsed by their models: every violation named, cursors opaque and checked."""

from __future__ import annotations

import base64
import json

import pytest
from aiohttp.test_utils import make_mocked_request

from services.workflow_manager import queries
from shared.problems import PROBLEM_JSON, ProblemError


def cursor_of(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def parse(query: str, model: type[queries.Query]) -> queries.Query:
    return queries.parse(make_mocked_request("GET", f"/x?{query}"), model)


def violations(query: str, model: type[queries.Query]) -> dict[str, str]:
    with pytest.raises(ProblemError) as caught:
        parse(query, model)
    response = caught.value.response
    assert response.status == 400 and response.content_type == PROBLEM_JSON
    body = json.loads(response.text)
    assert body["detail"] == "; ".join(v["message"] for v in body["violations"])
    return {v["loc"]: v["message"] for v in body["violations"]}


def test_a_good_query_parses_with_defaults() -> None:
    q = parse("state=FAILED&before=2026-01-01T00:00:00Z", queries.WorkflowQuery)
    assert isinstance(q, queries.WorkflowQuery)
    assert q.state == "FAILED" and q.limit == 50 and q.before == 1767225600.0 and q.cursor is None


def test_every_bad_parameter_is_named_once() -> None:
    found = violations("limit=abc&state=DONE&before=nan&stat=x&name=a&name=b", queries.WorkflowQuery)
    assert found == {
        "state": "state must be one of PLANNING, RUNNING, SUCCEEDED, FAILED, KILLED, not 'DONE'",
        "limit": "limit must be an integer from 1 to 1000, not 'abc'",
        "before": "before must be an ISO 8601 time or Unix seconds, not 'nan'",
        "stat": "unknown query parameter 'stat': did you mean 'state'?",
        "name": "name is given 2 times: give it once",
    }


@pytest.mark.parametrize("raw", ["inf", "-inf", "1e999", "nan", "tomorrow", "9999-99-99"])
def test_times_that_are_not_finite_or_not_times_are_refused(raw: str) -> None:
    assert set(violations(f"from={raw}", queries.StatsQuery)) == {"from"}


def test_a_cursor_round_trips_and_a_forged_one_is_refused() -> None:
    raw = queries.encode_cursor(1767225600.5, "wf-0123456789ab")
    assert set(raw) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    q = parse(f"cursor={raw}", queries.DatasetQuery)
    assert isinstance(q, queries.DatasetQuery) and q.cursor == queries.Cursor(key=1767225600.5, id="wf-0123456789ab")
    for forged in ("abc", "e30", queries.encode_cursor(None, "x")[:-2] + "!!", cursor_of({"key": "x", "id": "y"})):
        assert "is not a cursor this API gave" in violations(f"cursor={forged}", queries.DatasetQuery)["cursor"]


def test_stats_bounds_are_checked_together() -> None:
    assert violations("from=2&to=1", queries.StatsQuery) == {"from": "from must be before to"}
    assert "use a coarser resolution" in violations("from=0&to=1e9&resolution=1m", queries.StatsQuery)["resolution"]
    q = parse("resolution=1d", queries.StatsQuery)
    assert isinstance(q, queries.StatsQuery) and q.start is not None and q.end is not None
    assert q.end - q.start == 86_400
