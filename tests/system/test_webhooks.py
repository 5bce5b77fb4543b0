"""Webhooks through the real services and a real HTTP receiver (docs/webhooks.md): a
workflow's end is POSTed, as the bus's workflow.finished event, to its own webhook and
the installation's, signed so that the Standard Webhooks library verifies it; a failing
receiver is tried again until it answers; deliveries live in the store, so they outlast
a restart of the services; and a workflow's webhook on a host the operator did not list
is a 422 naming the field."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from pingo.dev import all_services
from shared.config import Settings
from shared.events import Event
from shared.metrics import WEBHOOK_ATTEMPTS
from shared.runtime import Context, running
from shared.store import webhooks as hooks
from shared.store.client import Store, connect
from tests.support.system import Api, Processes, make_settings

SECRET = "whsec_" + base64.b64encode(b"a shared secret of 32 bytes!!!!!").decode()


@dataclass
class Receiver:
    """A real HTTP endpoint; each path answers 503 its first ``failures[path]`` times."""

    url: str = ""
    failures: dict[str, int] = field(default_factory=dict)
    got: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.got.append((request.path_qs, dict(request.headers), body))
        if request.path == "/moved":  # towards a host no webhook may call
            raise web.HTTPFound("http://169.254.169.254/latest/meta-data")
        if self.failures.get(request.path, 0) > 0:
            self.failures[request.path] -= 1
            return web.Response(status=503)
        return web.Response(status=204)

    def of(self, path_qs: str) -> list[tuple[dict[str, str], bytes]]:
        return [(h, b) for p, h, b in self.got if p == path_qs]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got = Receiver()
    app = web.Application()
    app.router.add_post("/{tail:.*}", got.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    got.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield got
    await runner.cleanup()


def hooked_settings(tmp_path: Path, mongo_url: str, receiver: Receiver) -> Settings:
    return make_settings(
        tmp_path, mongo_url, webhooks=[f"{receiver.url}/all?token=s3cret"], webhook_hosts=["127.0.0.1"],
        webhook_secret=SECRET, webhook_retry_seconds=0.2,
    )  # fmt: skip


async def started(settings: Settings) -> tuple[Context, Any, Api]:
    ctx = await Context.open(settings)
    services = running(ctx, all_services)
    await services.__aenter__()
    api = Api(settings)
    await api.open()
    return ctx, services, api


async def stopped(services: Any, api: Api) -> None:
    await api.close()
    await services.__aexit__(None, None, None)


def workflow(name: str, webhooks: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "actions": [
        {"id": 1, "name": f"{name} step", "type": "shell", "actionFolder": "examples/jobs",
         "command": ["python3", "synth.py"], "additionalInput": [name, "0", "1"]}]}  # fmt: skip
    if webhooks is not None:
        body["webhooks"] = webhooks
    return body


async def delivered(store: Store, wf_id: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        docs = await hooks.of_workflow(store, wf_id)
        if len(docs) == count and all(d["state"] == "DELIVERED" for d in docs):
            return docs
        await asyncio.sleep(0.1)
    raise AssertionError(f"not delivered: {await hooks.of_workflow(store, wf_id)}")


async def test_a_workflow_end_is_posted_signed_and_a_failing_receiver_is_retried(
    tmp_path: Path, mongo_url: str, receiver: Receiver
) -> None:
    counted = {o: WEBHOOK_ATTEMPTS.labels(o)._value.get() for o in ("delivered", "retrying")}
    ctx, services, api = await started(hooked_settings(tmp_path, mongo_url, receiver))
    try:
        receiver.failures["/mine"] = 2
        wf = await api.run(workflow("told", [f"{receiver.url}/mine"]))
        assert wf["state"] == "SUCCEEDED"
        docs = await delivered(ctx.store, wf["id"], 2)
    finally:
        await stopped(services, api)
    by_origin = {d["origin"]: d for d in docs}
    assert by_origin["workflow"]["attempts"] == 3 and by_origin["workflow"]["last_status"] == 204
    assert by_origin["installation"]["attempts"] == 1
    attempts = {o: WEBHOOK_ATTEMPTS.labels(o)._value.get() - n for o, n in counted.items()}
    assert attempts == {"delivered": 2, "retrying": 2}
    mine, everyone = receiver.of("/mine"), receiver.of("/all?token=s3cret")
    assert len(mine) == 3 and len(everyone) == 1
    # Every attempt sends the same bytes under the same id, each signed: the Standard
    # Webhooks library, as a receiver would use it, verifies them with the shared secret.
    bodies = {b for _, b in mine + everyone}
    assert len(bodies) == 1 and len({h["webhook-id"] for h, _ in mine + everyone}) == 1
    for headers, body in mine + everyone:
        assert Webhook(SECRET).verify(body, headers) == json.loads(body)
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + base64.b64encode(b"another secret of 32 bytes!!!!!!").decode()).verify(body, headers)
    # The body is the bus's workflow.finished event: its schema, subject and payload.
    event = Event.model_validate_json(bodies.pop())
    published = [e for e in ctx.bus.published if e.type == "workflow.finished" and e.subject.workflow_id == wf["id"]]
    assert len(published) == 1
    assert event.type == published[0].type and event.subject == published[0].subject
    assert event.payload == published[0].payload
    assert event.payload["state"] == "SUCCEEDED" and event.payload["name"] == "told"


async def test_a_redirect_is_never_followed_and_a_delivery_is_given_up_after_its_last_attempt(
    tmp_path: Path, mongo_url: str, receiver: Receiver
) -> None:
    settings = hooked_settings(tmp_path, mongo_url, receiver).model_copy(update={"webhook_attempts": 2})
    ctx, services, api = await started(settings)
    try:
        wf = await api.run(workflow("moved", [f"{receiver.url}/moved"]))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            docs = {d["origin"]: d for d in await hooks.of_workflow(ctx.store, wf["id"])}
            if docs.get("workflow", {}).get("state") == "GAVE_UP":
                break
            await asyncio.sleep(0.1)
    finally:
        await stopped(services, api)
    assert docs["workflow"]["attempts"] == 2 and docs["workflow"]["last_status"] == 302
    assert docs["workflow"]["last_error"] == "answered 302"
    assert len(receiver.of("/moved")) == 2  # and nothing else was asked for it


async def test_deliveries_outlast_a_restart_of_the_services(tmp_path: Path, mongo_url: str, receiver: Receiver) -> None:
    settings = hooked_settings(tmp_path, mongo_url, receiver)
    receiver.failures["/all"] = 10**6  # down until the services are restarted
    ctx, services, api = await started(settings)
    try:
        wf = await api.run(workflow("restart"))
        deadline = time.monotonic() + 30
        while not receiver.of("/all?token=s3cret") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert receiver.of("/all?token=s3cret"), "never tried"
    finally:
        await stopped(services, api)
    receiver.failures["/all"] = 0
    ctx, services, api = await started(settings)
    try:
        [doc] = await delivered(ctx.store, wf["id"], 1)
    finally:
        await stopped(services, api)
    assert doc["attempts"] >= 2 and doc["last_status"] == 204 and doc["last_error"] is None


async def test_a_webhook_on_a_host_the_operator_did_not_list_is_a_422(
    tmp_path: Path, mongo_url: str, receiver: Receiver
) -> None:
    _, services, api = await started(hooked_settings(tmp_path, mongo_url, receiver))
    try:
        hooks_given = ["http://169.254.169.254/latest/meta-data?token=x", "ftp://127.0.0.1/x", f"{receiver.url}/ok"]
        status, answer = await api.request("POST", "/api/v1/workflows", json=workflow("ssrf", hooks_given))
    finally:
        await stopped(services, api)
    assert status == 422, answer
    assert answer["violations"] == [
        {"loc": "webhooks[1]", "field": "webhooks",
         "message": "ftp://127.0.0.1/…: a webhook is an http:// or https:// URL with a host"},
        {"loc": "webhooks[0]", "field": "webhooks",
         "message": "http://169.254.169.254/…: a workflow's webhooks may call only the hosts the operator listed "
                    "(PINGO_WEBHOOK_HOSTS: 127.0.0.1)"},
    ]  # fmt: skip
    assert receiver.got == []


async def test_deliveries_go_out_with_the_broker_down_and_outlast_a_killed_callback_service(
    tmp_path: Path, mongo_url: str, receiver: Receiver, rabbit_node: Any
) -> None:
    """The five services as processes over RabbitMQ. With the broker stopped, a workflow's
    end is delivered after a failed attempt; another's, pending when the callback service
    is killed, is delivered by the one started after it (a service waits for the broker
    to start: shared/runtime.py)."""
    settings = hooked_settings(tmp_path, mongo_url, receiver).model_copy(update={"amqp_url": rabbit_node.url})
    (tmp_path / "logs").mkdir()
    system = Processes(settings, tmp_path / "logs")
    await system.start_all()
    store = await connect(mongo_url, settings.mongo_db)
    try:
        rabbit_node.stop()
        receiver.failures["/all"] = 1
        first = await system.run(workflow("no broker"), timeout=60)
        [doc] = await delivered(store, first["id"], 1)
        assert doc["attempts"] == 2 and not rabbit_node.running

        receiver.failures["/all"] = 10**6
        second = await system.run(workflow("killed callback"), timeout=60)
        deadline = time.monotonic() + 30
        while len(receiver.of("/all?token=s3cret")) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        system.stop("callback", signal.SIGKILL)
        [doc] = await hooks.of_workflow(store, second["id"])
        assert doc["state"] == "PENDING" and doc["last_status"] == 503
        receiver.failures["/all"] = 0
        rabbit_node.start()
        system.start("callback")
        [doc] = await delivered(store, second["id"], 1, timeout=60)
    finally:
        await store.close()
        await system.stop_all()
    headers, body = receiver.of("/all?token=s3cret")[-1]
    assert Webhook(SECRET).verify(body, headers)["payload"]["name"] == "killed callback"
