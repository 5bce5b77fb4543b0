"""``Idempotency-Key`` on ``POST /api/v1/workflows`` (docs/api.md, "Retrying a submission"):
a retried submission answers the workflow the first one made and makes no other, across
gateway replicas; the CLI's client sends a key and reuses it when an answer is lost."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web

from pingo.client import ApiError, Client
from pingo.dev import all_services
from services.workflow_manager.service import WorkflowManager
from shared.runtime import Context, running
from shared.store import idempotency as keys
from shared.store import users
from tests.support.net import free_port
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action

WORKFLOWS = "/api/v1/workflows"


def body(label: str = "idem") -> dict[str, Any]:
    return {"name": label, "actions": [shell_action(1, f"{label}-a"), shell_action(2, f"{label}-b", [1])]}


async def post(api: Api, payload: Any, key: str | None, base: str | None = None) -> tuple[int, Any, Any]:
    assert api.http is not None
    headers = {"Idempotency-Key": key} if key is not None else {}
    async with api.http.post((base or api.base) + WORKFLOWS, json=payload, headers=headers) as r:
        return r.status, await r.json(content_type=None), r.headers


async def workflows(api: Api) -> int:
    return await api.db["workflows"].count_documents({})


async def test_a_retried_submission_answers_the_first_workflow_and_makes_no_other(system: Api) -> None:
    first_status, first, first_headers = await post(system, body(), "key-1")
    assert first_status == 201, first
    assert "Idempotent-Replayed" not in first_headers
    # The same request again (its 201 was lost, say), with the body's keys in another order.
    again = dict(reversed(list(body().items())))
    status, replayed, headers = await post(system, again, "key-1")
    assert status == 201 and replayed == first, replayed
    assert headers["Location"] == first_headers["Location"] == f"{WORKFLOWS}/{first['id']}"
    assert headers["Idempotent-Replayed"] == "true"
    # A quoted key (a Structured Field string) is the same key.
    status, quoted, _ = await post(system, body(), '"key-1"')
    assert status == 201 and quoted["id"] == first["id"]
    assert await workflows(system) == 1
    # Another key, or none: a new submission.
    status, other, _ = await post(system, body(), "key-2")
    assert status == 201 and other["id"] != first["id"]
    status, plain, _ = await post(system, body(), None)
    assert status == 201 and plain["id"] not in (first["id"], other["id"])
    assert await workflows(system) == 3


async def test_the_same_key_with_another_body_is_a_422_and_makes_nothing(system: Api) -> None:
    status, first, _ = await post(system, body("one"), "shared-key")
    assert status == 201, first
    status, problem, _ = await post(system, body("two"), "shared-key")
    assert status == 422 and problem["type"].endswith("idempotency-key-reused"), problem
    assert "shared-key" in problem["detail"]
    assert await workflows(system) == 1


async def test_a_submission_that_made_no_workflow_keeps_no_key(system: Api) -> None:
    """Refused (422) under a key: the key is free for the corrected workflow."""
    broken = {"name": "broken", "actions": [{"id": 1, "name": "x", "type": "SHELL"}]}
    status, problem, _ = await post(system, broken, "fix-me")
    assert status == 422 and problem["type"].endswith("invalid-workflow"), problem
    status, plan, _ = await post(system, body(), "fix-me")
    assert status == 201, plan
    assert await workflows(system) == 1


async def test_a_malformed_key_is_a_400_problem(system: Api) -> None:
    assert system.http is not None
    for headers in (
        {"Idempotency-Key": ""},
        {"Idempotency-Key": "k" * 256},
        {"Idempotency-Key": "caf\u00e9"},
        {"Idempotency-Key": "tab\there"},
    ):
        async with system.http.post(system.base + WORKFLOWS, json=body(), headers=headers) as r:
            problem = await r.json(content_type=None)
            assert r.status == 400 and problem["type"].endswith("idempotency-key-invalid"), (headers, problem)
    twice = [("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
    async with system.http.post(system.base + WORKFLOWS, json=body(), headers=twice) as r:
        assert r.status == 400
    assert await workflows(system) == 0


async def test_concurrent_duplicates_over_two_gateway_replicas_make_one_workflow(system: Api) -> None:
    """Two gateways on one store, each given the same submission at once: one plans it,
    every other answer is that workflow (201) or "still being planned" (409)."""
    other_settings = system.settings.model_copy(update={"port": free_port()})
    other_ctx = await Context.open(other_settings)
    replica = WorkflowManager(other_ctx)
    await replica.start()
    try:
        bases = [system.base, f"http://{other_settings.host}:{other_settings.port}"]
        answers = await asyncio.gather(*(post(system, body("race"), "race-key", bases[i % 2]) for i in range(12)))
        statuses = [status for status, _, _ in answers]
        assert set(statuses) <= {201, 409} and 201 in statuses, [(s, b) for s, b, _ in answers]
        ids = {out["id"] for status, out, _ in answers if status == 201}
        assert len(ids) == 1, ids
        for status, out, headers in answers:
            if status == 409:
                assert out["type"].endswith("idempotency-key-in-flight") and headers["Retry-After"], out
        # Planned now: a late retry on either replica answers the same workflow.
        for base in bases:
            status, out, _ = await post(system, body("race"), "race-key", base)
            assert status == 201 and out["id"] in ids
        assert await workflows(system) == 1
    finally:
        await replica.stop()
        await other_ctx.close()


async def test_a_key_held_by_a_planner_that_died_is_answered_or_taken_over(system: Api) -> None:
    """The holder of a key died: after writing its workflow (the retry answers that one),
    or before (once ``stale_after`` has passed, the retry plans the workflow)."""
    col = keys.keys(system.ctx.store)
    status, first, _ = await post(system, body("died-after"), "died-after")
    assert status == 201
    # As if its planner had died before recording the answer.
    await col.update_one({"key": "died-after"}, {"$set": {"state": keys.PENDING}, "$unset": {"answer": ""}})
    status, again, headers = await post(system, body("died-after"), "died-after")
    assert status == 201 and again["id"] == first["id"] and headers["Idempotent-Replayed"] == "true", again

    # A holder that took the key a moment ago and wrote nothing yet: still in flight.
    payload = body("died-before")
    status, _, _ = await post(system, payload, "died-before")  # only to learn the key's fingerprint
    assert status == 201
    taken = await col.find_one({"key": "died-before"})
    assert taken is not None
    now = time.time()
    await col.delete_one({"_id": taken["_id"]})
    pending = {**taken, "state": keys.PENDING, "workflow_id": "wf-neverwritten", "token": "dead", "taken_at": now}
    del pending["answer"], pending["_id"]
    await col.insert_one(dict(pending))
    status, problem, _ = await post(system, payload, "died-before")
    assert status == 409 and problem["type"].endswith("idempotency-key-in-flight"), problem
    # Its holder is long gone (stale_after has passed): the retry takes the key and plans.
    stale = now - system.settings.stale_after - 1
    await col.update_one({"key": "died-before"}, {"$set": {"taken_at": stale}})
    status, plan, _ = await post(system, payload, "died-before")
    assert status == 201 and plan["id"] != "wf-neverwritten", plan
    status, replayed, _ = await post(system, payload, "died-before")
    assert status == 201 and replayed["id"] == plan["id"]


async def test_a_key_is_forgotten_after_the_retention(system: Api) -> None:
    status, first, _ = await post(system, body(), "old-key")
    assert status == 201
    # A day later (the retention, PINGO_IDEMPOTENCY_SECONDS): the key was taken that long ago.
    ago = time.time() - system.settings.idempotency_seconds - 1
    await keys.keys(system.ctx.store).update_one({"key": "old-key"}, {"$set": {"created_at": ago}})
    status, second, headers = await post(system, body(), "old-key")
    assert status == 201 and second["id"] != first["id"] and "Idempotent-Replayed" not in headers
    status, third, _ = await post(system, body(), "old-key")
    assert status == 201 and third["id"] == second["id"]


async def test_the_cli_client_retries_a_lost_answer_under_the_same_key(system: Api) -> None:
    """A proxy that forwards the first submission to the gateway, then drops the connection
    instead of answering (a lost 201): ``pingo submit``'s client sends it again with the
    same key and gets the workflow the first try made."""
    seen: list[str | None] = []
    assert system.http is not None
    http = system.http

    async def forward(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Idempotency-Key"))
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "idempotency-key")}
        async with http.post(system.base + request.path, data=await request.read(), headers=headers) as r:
            status, text = r.status, await r.text()
            location = r.headers.get("Location")
        if len(seen) == 1:
            assert request.transport is not None
            request.transport.abort()  # planned and written; the answer never reaches the client
            return web.Response(status=500)
        out = web.Response(status=status, text=text, content_type="application/json")
        if location:
            out.headers["Location"] = location
        return out

    proxy = web.Application()
    proxy.router.add_post(WORKFLOWS, forward)
    runner = web.AppRunner(proxy)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with Client(f"http://127.0.0.1:{port}", token="") as client:
            plan = await client.submit(body("lost"))
        assert len(seen) == 2 and seen[0] and seen[0] == seen[1], seen
        assert await workflows(system) == 1
        assert plan["id"] == (await system.db["workflows"].find_one({}))["_id"]
        # Each submission has its own key.
        async with Client(f"http://127.0.0.1:{port}", token="") as client:
            other = await client.submit(body("lost"))
        assert other["id"] != plan["id"] and seen[2] != seen[0]
    finally:
        await runner.cleanup()


async def test_a_server_that_cannot_be_reached_is_said_at_once() -> None:
    """No retries when nothing was sent: the CLI says so without the 15 s of retries."""
    started = time.monotonic()
    async with Client(f"http://127.0.0.1:{free_port()}", token="") as client:
        with pytest.raises(ApiError, match="cannot reach"):
            await client.submit(body())
    assert time.monotonic() - started < 10


async def test_keys_are_per_user(tmp_path, mongo_url) -> None:
    """Bob sending alice's key (and her body) gets a workflow of his own, never hers."""
    settings = make_settings(tmp_path, mongo_url, auth_cache_seconds=0.5)
    ctx = await Context.open(settings)
    tokens = {name: await users.add(ctx.store, name, False, time.time()) for name in ("alice", "bob")}
    async with running(ctx, all_services):
        alice, bob = Api(settings, token=tokens["alice"]), Api(settings, token=tokens["bob"])
        await alice.open()
        await bob.open()
        try:
            status, hers, _ = await post(alice, body(), "same-key")
            assert status == 201
            status, his, headers = await post(bob, body(), "same-key")
            assert status == 201 and his["id"] != hers["id"] and "Idempotent-Replayed" not in headers
            status, again, _ = await post(alice, body(), "same-key")
            assert status == 201 and again["id"] == hers["id"]
            owners = {w["_id"]: w["owner"] async for w in alice.db["workflows"].find({}, {"owner": 1})}
            assert owners == {hers["id"]: "alice", his["id"]: "bob"}
        finally:
            await alice.close()
            await bob.close()
