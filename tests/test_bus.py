"""The RabbitMQ adapter against the real broker, and the in-process bus's matching."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid

import aio_pika
import pytest

from shared.bus.base import topic_matches
from shared.bus.memory import MemoryBus
from shared.bus.rabbitmq import RabbitBus
from shared.events import Event, EventType, Subject


def event(i: int, type_: EventType = EventType.ACTION_READY) -> Event:
    return Event(type=type_, producer="test", subject=Subject(action_id=f"a{i}"), payload={"i": i})


async def collect(received: list, n: int, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while len(received) < n:
            await asyncio.sleep(0.05)


@pytest.fixture
async def buses(amqp_url: str):
    exchange = f"pingo.test.bus.{uuid.uuid4().hex[:8]}"
    made: list[RabbitBus] = []

    async def make() -> RabbitBus:
        bus = RabbitBus(amqp_url, exchange, max_redeliveries=3)
        await bus.start()
        made.append(bus)
        return bus

    yield make, exchange
    for bus in made:
        await bus.close()


async def test_events_round_trip_by_topic(buses) -> None:
    make, exchange = buses
    pub, sub = await make(), await make()
    got: list[Event] = []

    async def handler(e: Event) -> None:
        got.append(e)

    await sub.subscribe(f"{exchange}.q", ["action.*"], handler)
    sent = [event(1), event(2, EventType.DATASET_STORED), event(3, EventType.ACTION_FINISHED)]
    for e in sent:
        await pub.publish(e)
    await collect(got, 2)
    await asyncio.sleep(0.3)
    assert [g.model_dump() for g in got] == [sent[0].model_dump(), sent[2].model_dump()]


async def test_replicas_share_one_queue(buses) -> None:
    make, exchange = buses
    pub = await make()
    a, b = await make(), await make()
    got_a: list[Event] = []
    got_b: list[Event] = []

    async def ha(e: Event) -> None:
        got_a.append(e)
        await asyncio.sleep(0.01)

    async def hb(e: Event) -> None:
        got_b.append(e)
        await asyncio.sleep(0.01)

    await a.subscribe(f"{exchange}.shared", ["#"], ha)
    await b.subscribe(f"{exchange}.shared", ["#"], hb)
    for i in range(40):
        await pub.publish(event(i))
    both: list[Event] = []
    async with asyncio.timeout(20):
        while len(got_a) + len(got_b) < 40:
            await asyncio.sleep(0.05)
    both = got_a + got_b
    assert sorted(e.payload["i"] for e in both) == list(range(40))
    assert got_a and got_b


async def test_failing_handler_is_retried_then_dead_lettered(buses, amqp_url: str) -> None:
    make, exchange = buses
    bus = await make()
    calls: list[str] = []

    async def broken(e: Event) -> None:
        calls.append(e.id)
        raise RuntimeError("handler bug")

    await bus.subscribe(f"{exchange}.broken", ["action.ready"], broken)
    e = event(7)
    await bus.publish(e)
    await collect(calls, 3)
    conn = await aio_pika.connect(amqp_url)
    try:
        ch = await conn.channel()
        dead = await ch.declare_queue(f"{exchange}.dead", durable=True)
        msg = None
        async with asyncio.timeout(10):
            while msg is None:
                msg = await dead.get(fail=False)
                await asyncio.sleep(0.1)
        assert Event.model_validate_json(msg.body).id == e.id
        await msg.ack()
    finally:
        await conn.close()
    assert calls == [e.id] * 3


@pytest.mark.skipif(shutil.which("rabbitmqctl") is None, reason="needs rabbitmqctl to restart the broker")
async def test_reconnects_after_broker_restart(buses) -> None:
    make, exchange = buses
    pub, sub = await make(), await make()
    got: list[Event] = []

    async def handler(e: Event) -> None:
        got.append(e)

    await sub.subscribe(f"{exchange}.restart", ["#"], handler)
    await pub.publish(event(1))
    await collect(got, 1)
    subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True, timeout=60)
    subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True, timeout=120)
    await asyncio.sleep(3)
    await pub.publish(event(2))
    await collect(got, 2, timeout=60)
    assert [g.payload["i"] for g in got] == [1, 2]


async def test_memory_bus_matches_topics_and_shares_queues() -> None:
    assert topic_matches("action.*", "action.ready") and not topic_matches("action.*", "dataset.stored")
    assert topic_matches("#", "workflow.finished") and topic_matches("dataset.#", "dataset.marked")
    bus = MemoryBus()
    got: list[str] = []

    async def h1(e: Event) -> None:
        got.append("h1")

    async def h2(e: Event) -> None:
        got.append("h2")

    await bus.subscribe("q", ["action.ready"], h1)
    await bus.subscribe("q", ["action.ready"], h2)
    for i in range(4):
        await bus.publish(event(i))
    await bus.publish(event(9, EventType.DATASET_STORED))
    await asyncio.sleep(0.05)
    assert sorted(got) == ["h1", "h1", "h2", "h2"]
