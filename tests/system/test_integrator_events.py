"""The event stream as an integrator sees it: a private queue on the real RabbitMQ bound to
Pingo's exchange, the five services in process publishing over it (docs/architecture.md,
"Events")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from jsonschema import Draft202012Validator

from pingo.dev import all_services
from shared.config import Settings
from shared.events import SCHEMA_VERSION
from shared.runtime import Context, running
from tests.support.gates import Gate
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action

OUTCOMES = {"action.finished", "action.reused", "action.skipped", "action.failed", "action.killed"}


@dataclass
class Received:
    routing_key: str
    body: dict[str, Any]

    @property
    def type(self) -> str:
        return self.body["type"]

    @property
    def workflow(self) -> str | None:
        return self.body["subject"]["workflow_id"]

    @property
    def action(self) -> str | None:
        return self.body["subject"]["action_id"]


class Capture:
    """A private, exclusive queue bound with the integrator's own patterns."""

    def __init__(self, channel: aio_pika.abc.AbstractChannel, exchange: aio_pika.abc.AbstractExchange) -> None:
        self.channel, self.exchange = channel, exchange
        self.got: list[Received] = []
        self.queue: aio_pika.abc.AbstractQueue | None = None

    async def bind(self, *patterns: str) -> Capture:
        self.queue = await self.channel.declare_queue(exclusive=True, auto_delete=True)
        for p in patterns:
            await self.queue.bind(self.exchange, routing_key=p)

        async def on_message(m: aio_pika.abc.AbstractIncomingMessage) -> None:
            async with m.process():
                self.got.append(Received(m.routing_key or "", json.loads(m.body)))

        await self.queue.consume(on_message)
        return self

    def of(self, wf_id: str) -> list[Received]:
        return [e for e in self.got if e.workflow == wf_id]

    async def until(self, cond, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while not cond():
                await asyncio.sleep(0.05)


@pytest.fixture
async def pingo(tmp_path: Path, mongo_url: str, amqp_url: str) -> AsyncIterator[tuple[Api, Settings]]:
    """All five services in this process, publishing on the real broker."""
    settings = make_settings(tmp_path, mongo_url, amqp_url=amqp_url)
    ctx = await Context.open(settings)
    async with running(ctx, all_services):
        api = Api(settings)
        await api.open()
        yield api, settings
        await api.close()


@pytest.fixture
async def broker(pingo: tuple[Api, Settings], amqp_url: str):
    """The integrator's connection, and a way to bind a private queue on Pingo's exchange."""
    _, settings = pingo
    conn = await aio_pika.connect(amqp_url)
    channel = await conn.channel()
    exchange = await channel.declare_exchange(settings.exchange, aio_pika.ExchangeType.TOPIC, durable=True)

    async def capture(*patterns: str) -> Capture:
        return await Capture(channel, exchange).bind(*patterns)

    yield capture
    await conn.close()


def pipeline(gate: Gate) -> dict[str, Any]:
    """Three steps; the first waits at ``gate``, so a queue bound to the workflow right after
    its submission is in place before the first action ends."""
    return {
        "name": "integration",
        "actions": [
            shell_action(1, "ie-extract", name="extract", configurationParameters=gate.conf),
            shell_action(2, "ie-clean", [1], name="clean"),
            shell_action(3, "ie-report", [2], name="report"),
        ],
    }


def check_envelopes(events: list[Received], wf_id: str) -> None:
    for e in events:
        assert e.routing_key == f"{e.type}._.{wf_id}", e.routing_key
        assert e.body["schema_version"] == SCHEMA_VERSION and e.body["producer"]


async def test_an_integrators_capture_of_a_computed_and_a_fully_reused_run(pingo, broker, gate: Gate) -> None:
    api, _ = pingo
    stream = await broker("#")  # everything: what the per-workflow queues are compared with
    computed = await api.submit(pipeline(gate))
    wf1 = computed["id"]
    mine = await broker(f"#.{wf1}")  # one workflow only, as documented
    other = await broker("*.*.*.wf-someone-else")
    gate.open()
    done = await api.wait(wf1, timeout=60)
    assert done["state"] == "SUCCEEDED"
    await stream.until(lambda: any(e.type == "workflow.finished" for e in stream.of(wf1)))
    await mine.until(lambda: any(e.type == "workflow.finished" for e in mine.got))

    # -- the computed run, from the whole stream ---------------------------------------
    run1 = stream.of(wf1)
    check_envelopes(run1, wf1)
    types = [e.type for e in run1]
    assert types[0] == "workflow.submitted" and types[-1] == "workflow.finished"
    submitted = run1[0].body["payload"]
    assert submitted["name"] == "integration" and submitted["state"] == "RUNNING"
    assert (submitted["actions"], submitted["compute"], submitted["reuse"]) == (3, 3, 0)
    outputs = {a["id"]: a["outputPath"] for a in done["actions"]}
    names = {f"{wf1}.1": "extract", f"{wf1}.2": "clean", f"{wf1}.3": "report"}
    for action_id, name in names.items():
        own = [e for e in run1 if e.action == action_id and e.type.startswith("action.")]
        # Each computed action: ready first, submitted and running (which two services
        # publish, so in either order), then its one outcome, last.
        assert sorted(e.type for e in own) == ["action.finished", "action.ready", "action.running", "action.submitted"]
        assert own[0].type == "action.ready" and own[-1].type == "action.finished"
        for e in own:
            assert e.body["payload"]["name"] == name
            assert e.body["payload"]["output_path"] == outputs[action_id]
        finished = own[-1].body["payload"]
        assert finished["state"] == "FINISHED" and finished["size"] > 0 and finished["seconds"] >= 0
        (running,) = [e for e in own if e.type == "action.running"]
        assert running.body["payload"]["started_at"] is not None
        (stored,) = [e for e in run1 if e.type == "dataset.stored" and e.action == action_id]
        assert stored.body["payload"]["path"] == outputs[action_id]
        assert stored.body["payload"]["size"] == finished["size"]
    end = run1[-1].body["payload"]
    assert end["state"] == "SUCCEEDED" and end["name"] == "integration" and end["seconds"] > 0
    assert (end["finished"], end["reused"], end["skipped"], end["failed"], end["killed"]) == (3, 0, 0, 0, 0)

    # -- the queue bound to this workflow alone ------------------------------------------
    # It was bound after the submission answered: it has the stream's events of this
    # workflow from some point on, every outcome among them, and nothing else.
    got = [e.body["id"] for e in mine.got]
    expected = [e.body["id"] for e in run1]
    assert got and got == expected[len(expected) - len(got) :]
    assert {e.action for e in mine.got if e.type == "action.finished"} == set(names)

    # -- the same workflow again: every action reused or skipped ------------------------
    reused = await api.submit(pipeline(gate))
    wf2 = reused["id"]
    assert reused["state"] == "SUCCEEDED"
    await stream.until(lambda: any(e.type == "workflow.finished" for e in stream.of(wf2)))
    run2 = stream.of(wf2)
    check_envelopes(run2, wf2)
    assert run2[0].type == "workflow.submitted" and run2[-1].type == "workflow.finished"
    assert run2[0].body["payload"]["state"] == "SUCCEEDED" and run2[0].body["payload"]["compute"] == 0
    outcomes = {e.action: e.body["payload"] for e in run2 if e.type in OUTCOMES}
    assert set(outcomes) == {f"{wf2}.1", f"{wf2}.2", f"{wf2}.3"}
    # The last step's output is reused as stored; what only fed it is skipped.
    assert outcomes[f"{wf2}.3"]["state"] == "REUSED" and outcomes[f"{wf2}.3"]["reason"] == "stored"
    assert outcomes[f"{wf2}.3"]["output_path"] == outputs[f"{wf1}.3"]
    assert outcomes[f"{wf2}.3"]["size"] == next(
        e.body["payload"]["size"] for e in run1 if e.type == "action.finished" and e.action == f"{wf1}.3"
    )
    for local in (1, 2):
        assert outcomes[f"{wf2}.{local}"]["state"] == "SKIPPED"
        assert outcomes[f"{wf2}.{local}"]["reason"] == "feeds_only_reused"
    for aid, payload in outcomes.items():
        assert payload["name"] == names[aid.replace(wf2, wf1)]
    end = run2[-1].body["payload"]
    assert (end["state"], end["finished"], end["reused"], end["skipped"]) == ("SUCCEEDED", 0, 1, 2)
    # Nothing was computed: no action was readied, submitted or run.
    assert not [e for e in run2 if e.type in ("action.ready", "action.submitted", "action.running")]

    # -- what was sent is what the served schema says, payload by type ------------------
    status, schema = await api.request("GET", "/api/v1/events/schema")
    assert status == 200
    validator = Draft202012Validator(schema)
    for e in run1 + run2:
        assert not [err.message for err in validator.iter_errors(e.body)], e.body

    # -- bindings to other workflows received none of it --------------------------------
    await asyncio.sleep(0.3)  # anything misrouted would have arrived by now
    assert {e.workflow for e in mine.got} == {wf1}
    assert other.got == []


async def test_a_dataset_withdrawn_by_hand_is_announced_marked_with_its_reason(pingo, broker) -> None:
    api, _ = pingo
    capture = await broker("dataset.marked.#", "dataset.deleted.#")
    wf = await api.run({"name": "by-hand", "actions": [shell_action(1, "ie-by-hand")]})
    h = wf["actions"][0]["hash"]
    status, _ = await api.request("DELETE", f"/api/v1/datasets/{h}")
    assert status == 202

    def seen(kind: str) -> list[Received]:
        return [e for e in capture.got if e.type == kind and e.body["subject"]["dataset_hash"] == h]

    await capture.until(lambda: seen("dataset.marked") and seen("dataset.deleted"))
    (marked,) = seen("dataset.marked")
    assert marked.body["payload"]["reason"] == "deleted" and marked.body["payload"]["algorithm"] is None
    schema = (await api.request("GET", "/api/v1/events/schema"))[1]
    Draft202012Validator(schema).validate(marked.body)
