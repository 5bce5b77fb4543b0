"""Many users, one Pingo (docs/users.md): tokens, ownership, shared datasets, OIDC."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aio_pika
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from pingo.dev import all_services
from shared.runtime import Context, running
from shared.store import users
from tests.support.dev import pingo, user_env
from tests.support.gates import Gate
from tests.support.net import free_port
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT, diamond, shell_action


class Team:
    """The services in process with three users: alice, bob and the admin root."""

    def __init__(self, anonymous: Api, tokens: dict[str, str], ctx: Context) -> None:
        self.anonymous = anonymous
        self.tokens = tokens
        self.ctx = ctx
        self.apis: dict[str, Api] = {}

    async def api(self, name: str) -> Api:
        if name not in self.apis:
            api = Api(self.anonymous.settings, token=self.tokens[name])
            await api.open()
            self.apis[name] = api
        return self.apis[name]

    async def close(self) -> None:
        for api in self.apis.values():
            await api.close()


async def start_team(settings) -> Any:
    ctx = await Context.open(settings)
    now = time.time()
    tokens = {
        "alice": await users.add(ctx.store, "alice", False, now),
        "bob": await users.add(ctx.store, "bob", False, now),
        "root": await users.add(ctx.store, "root", True, now),
    }
    return ctx, tokens


@pytest.fixture
async def team(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str):
    """``@pytest.mark.settings(name=value, ...)`` overrides some of its settings."""
    marker = request.node.get_closest_marker("settings")
    overrides = {
        "auth_cache_seconds": 0.5,
        "output_roots": [tmp_path / "home" / "{user}"],
        **(marker.kwargs if marker else {}),
    }
    settings = make_settings(tmp_path, mongo_url, **overrides)
    ctx, tokens = await start_team(settings)
    async with running(ctx, all_services):
        anonymous = Api(settings)
        await anonymous.open()
        t = Team(anonymous, tokens, ctx)
        yield t
        await t.close()
        await anonymous.close()


async def test_users_see_and_kill_only_their_own_workflows_and_admins_all(team: Team) -> None:
    alice, bob, root = await team.api("alice"), await team.api("bob"), await team.api("root")
    a_plan = await alice.submit({"name": "alice-wf", "actions": [shell_action(1, "own-a", seconds=30)]})
    b_wf = await bob.run({"name": "bob-wf", "actions": [shell_action(1, "own-b")]})
    a_id, b_id = a_plan["id"], b_wf["id"]

    async def listed(api: Api) -> set[str]:
        status, body = await api.request("GET", "/api/v1/workflows")
        assert status == 200, body
        return {w["id"] for w in body["workflows"]}

    assert await listed(alice) == {a_id} and await listed(bob) == {b_id}
    assert await listed(root) == {a_id, b_id}
    wf = await alice.workflow(a_id)
    assert wf["owner"] == "alice"
    # Another user's workflow does not exist for bob, whatever he asks of it: ids cannot be probed.
    for method, path in [
        ("GET", f"/api/v1/workflows/{a_id}"),
        ("GET", f"/api/v1/workflows/{a_id}/timeline"),
        ("POST", f"/api/v1/workflows/{a_id}/kill"),
        ("GET", f"/api/v1/actions/{a_id}.1/logs"),
    ]:
        status, body = await bob.request(method, path)
        assert status == 404, (method, path, body)
        _, missing = await bob.request(method, path.replace(a_id, "wf-000000000000"))
        assert body["detail"] == missing["detail"].replace("wf-000000000000", a_id)
    assert (await alice.workflow(a_id))["state"] == "RUNNING"  # bob's kill did nothing
    # The admin kills it; the workflow and its timeline say who did.
    status, body = await root.request("POST", f"/api/v1/workflows/{a_id}/kill")
    assert status == 202, body
    done = await alice.wait(a_id)
    assert done["state"] == "KILLED" and done["killedBy"] == "root"
    status, tl = await alice.request("GET", f"/api/v1/workflows/{a_id}/timeline")
    assert status == 200 and tl["owner"] == "alice"
    assert any(r["state"] == "KILL_REQUESTED" and r["by"] == "user root" for r in tl["transitions"])


async def test_missing_malformed_unknown_and_revoked_credentials_are_401(team: Team) -> None:
    anon = team.anonymous
    status, body = await anon.request("GET", "/api/v1/workflows")
    assert status == 401 and body["type"].endswith("/unauthenticated"), body
    assert "Bearer" in body["detail"]
    for header in ["Basic YWxpY2U6eA==", "Bearer", "Bearer pingo_not-a-real-token", "Bearer eyJhbGciOi.x.y"]:
        status, body = await anon.request("GET", "/api/v1/workflows", headers={"Authorization": header})
        assert status == 401, (header, body)
        assert body["status"] == 401 and body["detail"]
    # The gateway says how to authenticate (RFC 6750).
    assert anon.http is not None
    async with anon.http.get(anon.base + "/api/v1/datasets") as r:
        assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    # Probes and the web view's pages need no credentials; the data behind them does.
    for path in ("/healthz", "/"):
        async with anon.http.get(anon.base + path) as r:
            assert r.status == 200, path
    # Revoking bob stops his token on the next request after the cache time (0.5 s here).
    bob = await team.api("bob")
    assert (await bob.request("GET", "/api/v1/workflows"))[0] == 200
    assert await users.revoke(team.ctx.store, "bob", time.time())
    deadline = time.time() + 5
    while (await bob.request("GET", "/api/v1/workflows"))[0] != 401:
        assert time.time() < deadline, "a revoked token still works after 5 s"
        await asyncio.sleep(0.1)
    alice = await team.api("alice")
    assert (await alice.request("GET", "/api/v1/workflows"))[0] == 200  # others are unaffected


async def test_unmanaged_outputs_only_under_the_owners_root(team: Team, tmp_path: Path) -> None:
    alice = await team.api("alice")
    theirs = str(tmp_path / "home" / "bob" / "x")
    body = {
        "name": "paths",
        "actions": [
            shell_action(1, "p-ok", isManaged=False, outputPath="result"),
            shell_action(2, "p-bad", isManaged=False, outputPath=theirs),
        ],
    }
    status, problem = await alice.request("POST", "/api/v1/workflows", json=body)
    assert status == 422, problem
    (violation,) = problem["violations"]
    assert violation["loc"] == "actions[1].outputPath"
    assert str(tmp_path / "home" / "alice") in violation["message"]
    ok = await alice.run({"name": "paths", "actions": [body["actions"][0]]})
    assert ok["state"] == "SUCCEEDED"
    assert ok["actions"][0]["outputPath"] == str(tmp_path / "home" / "alice" / "result")


async def test_datasets_stay_shared_across_users(team: Team) -> None:
    alice, bob = await team.api("alice"), await team.api("bob")
    first = await alice.run(diamond("shared"))
    assert first["state"] == "SUCCEEDED"
    second = await bob.run(diamond("shared"))
    assert second["state"] == "SUCCEEDED" and second["owner"] == "bob"
    # bob computes nothing alice already computed: the leaf is reused, the rest skipped.
    assert {a["state"] for a in second["actions"]} <= {"REUSED", "SKIPPED"}, second["actions"]
    status, listed = await bob.request("GET", "/api/v1/datasets")
    assert status == 200 and len(listed["datasets"]) >= 4
    # Shared, but silent about others' workflows: bob reads alice's datasets without
    # learning which workflows of hers made or read them; an admin sees all.
    assert all(d["producedBy"] is None and d["workflow"] is None for d in listed["datasets"])
    leaf = next(a for a in first["actions"] if a["localId"] == 4)
    status, seen_by_bob = await bob.request("GET", f"/api/v1/datasets/{leaf['hash']}")
    assert status == 200, seen_by_bob
    assert seen_by_bob["producer"] is None and first["id"] not in json.dumps(seen_by_bob)
    assert [c["workflow"]["id"] for c in seen_by_bob["consumers"]] == [second["id"]]
    root = await team.api("root")
    _, seen_by_root = await root.request("GET", f"/api/v1/datasets/{leaf['hash']}")
    assert seen_by_root["producer"]["workflow"]["id"] == first["id"]
    # Usage is attributed: alice's workflow made and keeps the datasets; bob's saved time
    # by reusing them. A user sees their own share, an admin everyone's.
    status, usage = await root.request("GET", "/api/v1/datasets?byUser=true&limit=1")
    assert status == 200, usage
    by = {r["user"]: r for r in usage["byUser"]}
    assert set(by) == {"alice", "bob"}
    assert by["alice"]["datasets"] == 4 and by["alice"]["bytes"] == sum(d["size"] for d in listed["datasets"])
    assert by["alice"]["computeSeconds"] > 0 and by["alice"]["savedFromOthersSeconds"] == 0
    assert by["bob"]["datasets"] == 0 and by["bob"]["computeSeconds"] == 0
    assert 0 < by["bob"]["savedFromOthersSeconds"] <= by["bob"]["savedSeconds"]
    _, own = await bob.request("GET", "/api/v1/datasets?byUser=true&limit=1")
    assert [r["user"] for r in own["byUser"]] == ["bob"]
    status, history = await root.request("GET", "/api/v1/history/stats?resolution=1d")
    assert status == 200, history
    assert history["byUser"]["alice"]["actions_computed"] == 4 and history["byUser"]["bob"]["actions_reused"] == 1
    assert history["totals"]["actions_computed"] == 4
    _, mine = await alice.request("GET", "/api/v1/history/stats?resolution=1d")
    assert set(mine["byUser"]) == {"alice"}
    # The same from the command line.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(PINGO_URL=root.base, PINGO_TOKEN=team.tokens["root"])
    shown = await asyncio.to_thread(pingo, "datasets", "--by-user", env=env)
    assert shown.returncode == 0, shown.stderr
    alice_row = next(line for line in shown.stdout.splitlines() if line.startswith("alice"))
    assert alice_row.split()[1] == "4"
    assert any(line.startswith("bob") for line in shown.stdout.splitlines())


async def test_events_are_routed_by_owner(tmp_path: Path, mongo_url: str, amqp_url: str) -> None:
    settings = make_settings(tmp_path, mongo_url, amqp_url=amqp_url)
    ctx, tokens = await start_team(settings)
    got: list[tuple[str, dict[str, Any]]] = []
    conn = await aio_pika.connect(amqp_url)
    try:
        channel = await conn.channel()
        exchange = await channel.declare_exchange(settings.exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue(exclusive=True, auto_delete=True)
        await queue.bind(exchange, routing_key="*.*.alice.*")  # everything about alice's workflows

        async def on_message(m: aio_pika.abc.AbstractIncomingMessage) -> None:
            async with m.process():
                got.append((m.routing_key or "", json.loads(m.body)))

        await queue.consume(on_message)
        async with running(ctx, all_services):
            alice, bob = Api(settings, tokens["alice"]), Api(settings, tokens["bob"])
            await alice.open()
            await bob.open()
            try:
                b = await bob.run({"name": "b", "actions": [shell_action(1, "ev-b")]})
                a = await alice.run({"name": "a", "actions": [shell_action(1, "ev-a")]})
            finally:
                await alice.close()
                await bob.close()
            async with asyncio.timeout(20):
                while not any(body["type"] == "workflow.finished" for _, body in got):
                    await asyncio.sleep(0.05)
    finally:
        await conn.close()
    assert {body["subject"]["workflow_id"] for _, body in got} == {a["id"]}
    assert {body["subject"]["owner"] for _, body in got} == {"alice"}
    assert all(key == f"{body['type']}.alice.{a['id']}" for key, body in got)
    assert b["id"] not in json.dumps(got)


# --- OIDC ------------------------------------------------------------------------------------


class Provider:
    """A local identity provider: a discovery document and a key set on a real HTTP server."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/realms/team"
        self.runner: web.AppRunner | None = None

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": "pingo", "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": "k1"})

    async def start(self) -> None:
        app = web.Application()
        discovery = {"issuer": self.issuer, "jwks_uri": f"{self.issuer}/protocol/openid-connect/certs"}

        async def configuration(_: web.Request) -> web.Response:
            return web.json_response(discovery)

        async def certs(_: web.Request) -> web.Response:
            return web.json_response(self.jwks())

        app.router.add_get("/realms/team/.well-known/openid-configuration", configuration)
        app.router.add_get("/realms/team/protocol/openid-connect/certs", certs)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_oidc_tokens_are_verified_against_the_providers_keys(tmp_path: Path, mongo_url: str) -> None:
    provider = Provider()
    await provider.start()
    settings = make_settings(
        tmp_path, mongo_url, oidc_issuer=provider.issuer, oidc_audience="pingo", oidc_admin_group="pingo-admins"
    )
    ctx = await Context.open(settings)
    try:
        async with running(ctx, all_services):
            carol = Api(settings, provider.token(preferred_username="carol"))
            boss = Api(settings, provider.token(preferred_username="boss", groups=["pingo-admins"]))
            for api in (carol, boss):
                await api.open()
            try:
                wf = await carol.run({"name": "c", "actions": [shell_action(1, "oidc-c")]})
                assert wf["owner"] == "carol"
                status, listed = await boss.request("GET", "/api/v1/workflows")
                assert status == 200 and wf["id"] in {w["id"] for w in listed["workflows"]}
                now = int(time.time())
                other = Provider()  # a key the issuer never published
                refused = {
                    "expired": provider.token(preferred_username="carol", exp=now - 120, iat=now - 600),
                    "wrong audience": provider.token(preferred_username="carol", aud="another-app"),
                    "wrong issuer": provider.token(preferred_username="carol", iss="http://evil.example"),
                    "forged": other.token(preferred_username="carol"),
                    "no user claim": provider.token(sub="123"),
                    "bad user name": provider.token(preferred_username="Carol.Smith"),
                }
                for why, token in refused.items():
                    status, body = await carol.request(
                        "GET", "/api/v1/workflows", headers={"Authorization": f"Bearer {token}"}
                    )
                    assert status == 401, (why, body)
                    assert body["detail"].startswith("the token"), (why, body)
            finally:
                for api in (carol, boss):
                    await api.close()
    finally:
        await provider.stop()


# --- starting safely ---------------------------------------------------------------------------


def test_a_gateway_reachable_from_other_machines_refuses_to_start_without_users(tmp_path: Path) -> None:
    env = user_env(
        PINGO_DATA_DIR=str(tmp_path / "data"),
        PINGO_HOST="0.0.0.0",
        PINGO_PORT=str(free_port()),
        PINGO_CALLBACK_PORT=str(free_port()),
    )
    refused = pingo("dev", env=env)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "no authentication is configured" in refused.stderr and "pingo users add" in refused.stderr
    off = pingo("dev", env={**env, "PINGO_AUTH": "off"})
    assert off.returncode == 2 and "PINGO_AUTH=off" in off.stderr
    # Once a user exists, the same start goes ahead (and is stopped here).
    added = pingo("users", "add", "ops", "--admin", env=env)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("pingo_") and token not in added.stderr
    listed = pingo("users", "list", "--json", env=env)
    (ops,) = json.loads(listed.stdout)
    assert ops["name"] == "ops" and ops["admin"] is True and token not in listed.stdout
    dev = subprocess.Popen(
        [sys.executable, "-m", "pingo.cli", "dev"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        base_env = {**env, "PINGO_HOST": "127.0.0.1"}
        deadline = time.time() + 60
        while True:
            anonymous = pingo("list", env=base_env)
            if anonymous.returncode == 1 and "credentials required" in anonymous.stderr:
                break
            assert time.time() < deadline, anonymous.stderr
            time.sleep(0.5)
        assert "PINGO_TOKEN" in anonymous.stderr
        signed_in = pingo("list", env={**base_env, "PINGO_TOKEN": token})
        assert signed_in.returncode == 0, signed_in.stderr
    finally:
        dev.terminate()
        dev.wait(timeout=30)


async def test_another_users_action_definition_is_shown_only_to_admins_and_its_owner(team: Team) -> None:
    alice, bob, root = await team.api("alice"), await team.api("bob"), await team.api("root")
    key = "alice-api-key-0d5e"
    made = shell_action(1, "keyed", configurationParameters=[{"key": "ALICE_API_KEY", "value": key}])
    wf = await alice.run({"name": "keyed", "actions": [made, shell_action(2, "keyed-child", [1])]})
    assert wf["state"] == "SUCCEEDED", wf["actions"]
    h = wf["actions"][0]["hash"]
    # bob sees the dataset (datasets are shared) and that another user's action made it:
    # not the action, its workflow, nor its definition (alice's key).
    status, seen = await bob.request("GET", f"/api/v1/datasets/{h}")
    assert status == 200, seen
    assert key not in json.dumps(seen) and wf["id"] not in json.dumps(seen)
    assert seen["lineage"] is None and seen["othersActions"] is True
    assert seen["producer"] is None and seen["computations"] == [] and seen["consumers"] == []
    # Its owner and an admin see the definition.
    for api in (alice, root):
        status, full = await api.request("GET", f"/api/v1/datasets/{h}")
        assert status == 200 and key in full["lineage"]["definition"], full
        assert full["producer"]["workflow"]["id"] == wf["id"]
    # A user who submits the identical action knows its definition: theirs reuses it and
    # shows it, still without alice's workflow.
    mine = await bob.run({"name": "same", "actions": [made]})
    assert mine["actions"][0]["state"] == "REUSED"
    status, seen = await bob.request("GET", f"/api/v1/datasets/{h}")
    assert key in seen["lineage"]["definition"] and wf["id"] not in json.dumps(seen)


# Its job waits at a gate in the test's folder, which a sandboxed job cannot see (its /tmp
# is its own); what bob learns of alice's job is the API's to keep, not the sandbox's.
@pytest.mark.settings(job_sandbox="off")
async def test_following_another_users_computation_shows_only_that_it_is_shared(team: Team, gate: Gate) -> None:
    alice, bob, root = await team.api("alice"), await team.api("bob"), await team.api("root")
    # alice's job runs until her kill has handed it to bob (it waits at the gate).
    body = {"name": "shared-root", "actions": [shell_action(1, "shared-root", configurationParameters=gate.conf)]}
    theirs = await alice.submit(body)
    a_id = theirs["id"]
    deadline = time.time() + 30
    while (await alice.workflow(a_id))["actions"][0]["state"] != "RUNNING":
        assert time.time() < deadline, await alice.workflow(a_id)
        await asyncio.sleep(0.05)
    # bob's identical action follows alice's computation: he learns that it is shared,
    # not which workflow or action computes it, in the dry run, the plan and the workflow.
    status, dry = await bob.request("POST", "/api/v1/workflows?dryRun=true", json=body)
    assert status == 200 and dry["actions"][0]["decision"] == "follow", dry
    assert dry["actions"][0]["shared"] is True and dry["actions"][0]["follows"] is None
    plan = await bob.submit(body)
    b_id = plan["id"]
    following = (await bob.workflow(b_id))["actions"][0]
    assert following["state"] == "FOLLOWING" and following["shared"] is True and following["follows"] is None
    assert a_id not in json.dumps([dry, plan, following])
    # alice does not learn bob's ids either; an admin sees both.
    producer = (await alice.workflow(a_id))["actions"][0]
    assert producer["shared"] is True and producer["followers"] == [] and b_id not in json.dumps(producer)
    assert (await root.workflow(b_id))["actions"][0]["follows"] == f"{a_id}.1"
    # alice kills her workflow: bob's action adopts her running job and finishes it.
    status, _ = await alice.request("POST", f"/api/v1/workflows/{a_id}/kill")
    assert status == 202
    await alice.wait(a_id)  # killed, its job handed over as it runs
    gate.open()
    done = await bob.wait(b_id)
    assert done["state"] == "SUCCEEDED", done["actions"]
    adopted = done["actions"][0]
    assert adopted["reason"] == "takeover" and adopted["shared"] is True and adopted["takeoverOf"] is None
    status, timeline = await bob.request("GET", f"/api/v1/workflows/{b_id}/timeline")
    assert status == 200, timeline
    assert a_id not in json.dumps([done, timeline]), [done, timeline]
    assert "another user's workflow" in json.dumps(timeline)
    # The job that ran is alice's: its output is not bob's to read; an admin may.
    status, refused = await bob.request("GET", f"/api/v1/actions/{b_id}.1/logs")
    assert status == 403 and refused["type"].endswith("/shared-computation"), refused
    assert a_id not in json.dumps(refused)
    assert root.http is not None
    async with root.http.get(f"{root.base}/api/v1/actions/{b_id}.1/logs") as r:
        assert r.status == 200
    await alice.wait(a_id)
