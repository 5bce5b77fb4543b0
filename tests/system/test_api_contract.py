"""The API contract, over real HTTP: the served OpenAPI document is valid and complete,
every real answer matches what it documents for that route and status, and every error,
on every route, is one RFC 9457 problem document."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi

from services.workflow_manager import ui
from services.workflow_manager.service import WorkflowManager
from shared.ops import OpsServer
from tests.support.net import free_port
from tests.support.system import Api
from tests.support.workflows import shell_action

PROBLEM = "application/problem+json"


class Contract:
    """The served document, and a check of real answers against it."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.routes = [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", p) + "$"), p) for p in doc["paths"]]
        self.seen: set[tuple[str, str, str]] = set()
        self.validators: dict[str, Draft202012Validator] = {}

    def template(self, path: str) -> str | None:
        return next((t for rx, t in self.routes if rx.match(path)), None)

    async def check(self, api: Api, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        """Call the gateway; fail unless the answer is documented for this route and status,
        with its content type, and its body matches the documented schema."""
        assert api.http is not None
        async with api.http.request(method, api.base + path, **kw) as r:
            status, media, text = r.status, r.content_type, await r.text()
        body = text if media == "text/plain" else json.loads(text)  # an action's log is text
        self.verify(method, path, status, media, body)
        return status, body

    def verify(self, method: str, path: str, status: int, media: str, body: Any) -> None:
        template = self.template(path.split("?")[0])
        if template is None or method.lower() not in self.doc["paths"][template]:
            # No such operation: the answer is a problem all the same.
            assert status in (404, 405) and media == PROBLEM, (method, path, status, media, body)
            self.validate({"$ref": "#/components/schemas/Problem"}, body, f"{method} {path}")
            return
        responses = self.doc["paths"][template][method.lower()]["responses"]
        assert str(status) in responses, f"{method} {path} answered {status}, not documented: {body}"
        content = responses[str(status)]["content"]
        assert media in content, f"{method} {path} {status}: {media}, documented {list(content)}"
        self.validate(content[media]["schema"], body, f"{method} {path} {status}")
        self.seen.add((template, method.lower(), str(status)))

    def validate(self, schema: dict[str, Any], body: Any, where: str) -> None:
        key = json.dumps(schema, sort_keys=True)
        if key not in self.validators:
            # The components ride along, so that "#/components/schemas/..." resolves.
            self.validators[key] = Draft202012Validator({**schema, "components": self.doc["components"]})
        errors = sorted(self.validators[key].iter_errors(body), key=lambda e: list(e.path))
        assert not errors, f"{where}: {[f'{list(e.path)}: {e.message}' for e in errors[:5]]}"


@pytest.fixture
async def contract(system: Api) -> Contract:
    status, doc = await system.request("GET", "/api/v1/openapi.json")
    assert status == 200
    return Contract(doc)


def cursor_of(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


async def test_the_openapi_document_is_valid_and_covers_every_route(system: Api, contract: Contract) -> None:
    doc = contract.doc
    validate_openapi(doc)  # raises on the first invalid part ('$defs' left in place, say)
    assert "$defs" not in json.dumps(doc["paths"]) and doc["openapi"] == "3.1.0"
    routes = {
        (route.resource.canonical, route.method.lower())
        for route in WorkflowManager(system.ctx).app().router.routes()
        if route.method != "HEAD" and not ui.is_page(route.resource.canonical)
    }
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert routes == documented, routes ^ documented
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)) == len(documented)
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for status, response in op["responses"].items():
                (media, spec), *_ = response["content"].items()
                # A real schema, not the old {"type": "object"} (the two schema documents excepted).
                if path not in ("/api/v1/openapi.json", "/api/v1/events/schema"):
                    assert "$ref" in spec["schema"], (path, method, status)
                assert (media == PROBLEM) == (int(status) >= 400), (path, method, status, media)


async def test_every_answer_matches_its_documented_schema(system: Api, contract: Contract, tmp_path) -> None:
    c = contract
    body = {"name": "contract", "actions": [shell_action(1, "ct-a"), shell_action(2, "ct-b", [1])]}
    _, dry = await c.check(system, "POST", "/api/v1/workflows?dryRun=true", json=body)
    _, plan = await c.check(system, "POST", "/api/v1/workflows", json=body)
    wf = await system.wait(plan["id"])
    assert wf["state"] == "SUCCEEDED"
    wf_path = f"/api/v1/workflows/{plan['id']}"
    h = plan["actions"][0]["hash"]
    for path in (
        "/api/v1/workflows", "/api/v1/workflows?limit=1&state=SUCCEEDED", wf_path, f"{wf_path}/timeline",
        f"{wf_path}/timeline?limit=2", "/api/v1/datasets", "/api/v1/datasets?limit=1", f"/api/v1/datasets/{h}",
        "/api/v1/history/stats", "/api/v1/history/stats?resolution=1m", "/api/v1/openapi.json",
        "/api/v1/events/schema", "/healthz",
    ):  # fmt: skip
        status, _ = await c.check(system, "GET", path)
        assert status == 200, path
    assert (await c.check(system, "GET", f"/api/v1/actions/{plan['actions'][0]['id']}/logs?tail=1"))[0] == 200
    _, page = await c.check(system, "GET", f"{wf_path}/timeline?limit=2")
    assert page["next"] and len(page["transitions"]) == 2
    _, rest = await c.check(system, "GET", f"{wf_path}/timeline?cursor={page['next']}")
    _, whole = await c.check(system, "GET", f"{wf_path}/timeline")
    assert page["transitions"] + rest["transitions"] == whole["transitions"]
    assert (await c.check(system, "POST", f"{wf_path}/kill"))[0] == 409
    running = await c.check(system, "POST", "/api/v1/workflows", json={"name": "slow", "actions": [
        shell_action(1, "ct-slow", seconds=30)]})  # fmt: skip
    assert (await c.check(system, "POST", f"/api/v1/workflows/{running[1]['id']}/kill"))[0] == 202
    # Errors, one of each kind a route documents.
    assert (await c.check(system, "GET", "/api/v1/workflows/wf-nope"))[0] == 404
    assert (await c.check(system, "GET", "/api/v1/workflows/wf-nope/timeline"))[0] == 404
    assert (await c.check(system, "POST", "/api/v1/workflows/wf-nope/kill"))[0] == 404
    assert (await c.check(system, "GET", "/api/v1/datasets/nope"))[0] == 404
    assert (await c.check(system, "GET", "/api/v1/history/stats?from=2&to=1"))[0] == 400
    assert (await c.check(system, "POST", "/api/v1/workflows", data="{", headers={"Content-Type": "application/json"}))[
        0
    ] == 400
    status, rejected = await c.check(system, "POST", "/api/v1/workflows", json={"actions": [{"id": 1}]})
    assert status == 422 and rejected["violations"] and all(v["loc"] for v in rejected["violations"])
    status, _ = await c.check(system, "POST", "/api/v1/workflows", data="x", headers={"Content-Type": "text/plain"})
    assert status == 415
    big = json.dumps({"name": "x" * (system.settings.max_body_bytes + 10), "actions": []})
    assert (await c.check(system, "POST", "/api/v1/workflows", data=big,
                          headers={"Content-Type": "application/json"}))[0] == 413  # fmt: skip
    host = {"Host": f"evil.example:{system.settings.port}"}
    assert (await c.check(system, "GET", "/api/v1/datasets", headers=host))[0] == 400
    assert (await c.check(system, "GET", "/api/v1/datasets", headers={"Origin": "http://evil.example"}))[0] == 403
    # Datasets by hand (the leaf, so that nothing above reads the first one again).
    leaf = plan["actions"][1]["hash"]
    assert (await c.check(system, "PATCH", f"/api/v1/datasets/{leaf}", json={"pinned": True}))[0] == 200
    assert (await c.check(system, "PATCH", f"/api/v1/datasets/{leaf}", json={"pinned": 1}))[0] == 422
    assert (await c.check(system, "POST", f"/api/v1/datasets/{leaf}/invalidate?descendants=true"))[0] == 200
    assert (await c.check(system, "DELETE", f"/api/v1/datasets/{leaf}"))[0] == 202
    assert (await c.check(system, "DELETE", "/api/v1/datasets/nope"))[0] == 404
    # Every success each operation documents has been seen for real.
    documented_ok = {
        (p, m, s) for p, ops in c.doc["paths"].items() for m, op in ops.items() for s in op["responses"] if s < "400"
    }
    assert documented_ok <= c.seen, documented_ok - c.seen
    assert dry and plan


BAD_QUERIES = [
    "limit=abc", "limit=0", "limit=-1", "limit=1e3", "limit=99999999999999999999", "limit=1&limit=2",
    "cursor=garbage!", f"cursor={cursor_of({'key': 'x'})}",
    f"cursor={cursor_of({'key': 'x', 'id': 'y'})}", f"cursor={cursor_of([1, 2])}", "cursor=",
    "state=NOPE", "stat=FAILED", "before=nan", "before=9999-99-99", "from=inf", "to=-1e999", "resolution=2h",
    "from=2&to=1", "dryRun=maybe", "%ff=%fe",
]  # fmt: skip
BAD_IDS = ["wf-nope", "%00", "x" * 3000, "%E2%9C%93", "..%2F..%2Fetc"]


async def test_every_route_answers_bad_input_with_one_problem_shape(system: Api, contract: Contract) -> None:
    """A sweep over every route: bad ids, bad query parameters, wrong methods, bad bodies and
    wrong content types. Each answer is a problem (its own status, the request as its
    instance), documented for the route, and none is a 500."""
    c = contract
    calls: list[tuple[str, str, dict[str, Any]]] = []
    for template, ops in c.doc["paths"].items():
        ids = BAD_IDS if "{" in template else [""]
        for n, bad_id in enumerate(ids):
            path = re.sub(r"\{[^}]+\}", bad_id, template)
            for method in ("get", "post", "put", "delete", "patch"):
                calls.append((method.upper(), path, {}))
                if n:
                    continue  # the other bad ids: every method, once
                if method in ops:
                    calls += [(method.upper(), f"{path}?{q}", {}) for q in BAD_QUERIES]
                if method in ("post", "put"):
                    calls += [
                        (method.upper(), path, {"data": "x", "headers": {"Content-Type": "text/plain"}}),
                        (method.upper(), path, {"data": b"\xff\xfe", "headers": {"Content-Type": "application/json"}}),
                        (method.upper(), path, {"data": "[", "headers": {"Content-Type": "application/json"}}),
                        (method.upper(), path, {"json": None}),
                        (method.upper(), path, {"json": [1, 2]}),
                        (method.upper(), path, {"json": {"actions": "none"}}),
                        (method.upper(), path, {"data": "[" * 500 + "]" * 500,
                                                "headers": {"Content-Type": "application/json"}}),
                    ]  # fmt: skip
    calls.append(("GET", "/api/v1/no-such-route", {}))
    answered: dict[int, int] = {}
    for method, path, kw in calls:
        assert system.http is not None
        async with system.http.request(method, system.base + path, **kw) as r:
            status, media, text = r.status, r.content_type, await r.text()
        if status < 400:
            continue  # some "bad" inputs are fine somewhere: a body on a GET, a kill of nothing running
        assert status != 500, (method, path, text)
        assert media == PROBLEM, (method, path, status, media, text[:300])
        body = json.loads(text)
        assert body["status"] == status and body["title"] and body["detail"] and body["type"], body
        assert body["instance"] == r.url.raw_path_qs or body["instance"].split("?")[0] == r.url.raw_path, body
        if status in (400, 422) and "violations" in body:
            assert all(isinstance(v["loc"], str) and v["message"] for v in body["violations"]), body
        c.verify(method, path, status, media, body)  # documented for this route and status
        answered[status] = answered.get(status, 0) + 1
    assert {400, 404, 405, 415, 422} <= set(answered), answered


async def test_a_query_problem_names_every_parameter(system: Api) -> None:
    status, body = await system.request("GET", "/api/v1/workflows?limit=abc&stat=FAILED&cursor=zz&before=soon")
    assert status == 400 and body["type"].endswith("invalid-query"), body
    found = {v["loc"]: v["message"] for v in body["violations"]}
    assert set(found) == {"limit", "stat", "cursor", "before"} and all(v["in"] == "query" for v in body["violations"])
    assert "did you mean 'state'" in found["stat"]
    assert "limit must be an integer from 1 to 1000, not 'abc'" == found["limit"]


async def test_the_callback_endpoint_answers_problems(system: Api) -> None:
    base = f"http://127.0.0.1:{system.settings.callback_port}"
    assert system.http is not None
    for path, expected in (("/callback/wf-nope.1?secret=x", 403), ("/nowhere", 404)):
        async with system.http.get(base + path) as r:
            body = await r.json(content_type=None)
            assert r.status == expected and r.content_type == PROBLEM, (path, r.status, body)
            # The path alone: a callback's query holds the secret, never echoed back.
            assert body["status"] == expected and body["instance"] == path.split("?")[0] and body["detail"], body
    async with system.http.post(base + "/healthz") as r:
        assert r.status == 405 and r.content_type == PROBLEM and "GET" in r.headers["Allow"]


async def test_every_error_body_is_a_problem_document(system: Api) -> None:
    """Whoever answers the error (a handler, the router, the web view's files, the body
    limit, the operations endpoint), its body is an RFC 9457 problem document: a missing
    asset of the web view was a 404 with an empty body."""
    ops = OpsServer(system.ctx.store, system.ctx.bus, "127.0.0.1", free_port())
    await ops.start()
    limit = system.settings.max_body_bytes
    json_type = {"Content-Type": "application/json"}
    calls: list[tuple[str, str, dict[str, Any], int]] = [
        ("GET", "/ui/no-such-script.js", {}, 404),
        ("HEAD", "/ui/no-such-script.js", {}, 404),
        ("GET", "/ui/vendor/../../service.py", {}, 404),
        ("GET", "/ui/%2e%2e/service.py", {}, 404),
        ("GET", "/ui/vendor/%00", {}, 404),
        ("GET", "/ui/", {}, 404),
        ("GET", "/no/such/page", {}, 404),
        ("GET", "/api/v1/workflows/wf-nope", {}, 404),
        ("DELETE", "/api/v1/workflows", {}, 405),
        ("PUT", "/ui/page.html", {}, 405),
        ("POST", "/api/v1/workflows", {"data": b"{" + b" " * limit + b"}", "headers": json_type}, 413),
        ("POST", "/api/v1/workflows", {"data": "x", "headers": {"Content-Type": "text/plain"}}, 415),
        ("POST", "/api/v1/workflows", {"data": "{", "headers": json_type}, 400),
        ("POST", "/api/v1/workflows", {"json": {"actions": []}}, 422),
        ("GET", "/api/v1/workflows?limit=0", {}, 400),
        ("GET", "/api/v1/workflows", {"headers": {"Host": "evil.example"}}, 400),
        ("GET", "/api/v1/workflows", {"headers": {"Origin": "http://evil.example"}}, 403),
        ("GET", f"http://127.0.0.1:{ops.port}/nowhere", {}, 404),
        ("POST", f"http://127.0.0.1:{ops.port}/metrics", {}, 405),
    ]
    assert system.http is not None
    try:
        for method, path, kw, expected in calls:
            url = path if path.startswith("http") else system.base + path
            async with system.http.request(method, url, **kw) as r:
                status, media, text = r.status, r.content_type, await r.text()
            assert status == expected, (method, path, status, text[:200])
            assert media == PROBLEM, (method, path, status, media, text[:200])
            if method == "HEAD":
                continue  # no body, by HTTP's rules
            body = json.loads(text)
            assert body["status"] == status and body["title"] and body["detail"] and body["type"], body
    finally:
        await ops.stop()
    # The files of the web view are still served.
    async with system.http.get(system.base + "/ui/page.html") as r:
        assert r.status == 200 and "<html" in (await r.text()).lower()
    async with system.http.get(system.base + "/ui/vendor/dagre.min.js") as r:
        assert r.status == 200 and "javascript" in r.content_type and len(await r.read()) > 1000
