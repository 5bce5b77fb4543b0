"""The RabbitMQ adapter against the real broker (the in-process bus: tests/unit/test_bus.py)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import aio_pika
import pytest

from shared.bus.rabbitmq import RabbitBus
from shared.events import Event, EventType, Subject
from tests.support.brokers import SHARED_DECLARED, RabbitNode


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
    SHARED_DECLARED.bus(exchange, [f"{exchange}.{queue}" for queue in ("q", "shared", "broken", "wake")])


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


async def test_a_group_published_at_once_arrives_in_order_and_a_wake_pokes_per_event(buses) -> None:
    """``publish_many`` (a group's events, one wait for their confirms) keeps their order; a
    wake-only subscriber is poked once per event of its types, whatever the body."""
    make, exchange = buses
    pub, sub, waker = await make(), await make(), await make()
    got: list[Event] = []
    pokes: list[int] = []

    async def handler(e: Event) -> None:
        got.append(e)

    await sub.subscribe(f"{exchange}.q", ["action.*"], handler)
    await waker.wake(f"{exchange}.wake", ["action.finished", "dataset.stored"], lambda: pokes.append(1))
    sent = [event(i, EventType.ACTION_FINISHED if i % 3 else EventType.DATASET_STORED) for i in range(150)]
    await pub.publish_many(sent)
    await collect(got, 100)
    await collect(pokes, 150)
    assert [g.payload["i"] for g in got] == [i for i in range(150) if i % 3]
    # A body no Event decodes from still wakes it (nothing is decoded), and is not dead-lettered.
    assert pub._exchange is not None
    await pub._exchange.publish(aio_pika.Message(b"not json"), routing_key="dataset.stored._._")
    await collect(pokes, 151)
    # Not for an event of another type (action.ready), nor an unrouted one (action.submitted).
    await pub.publish_many([event(1), event(2, EventType.ACTION_SUBMITTED)])
    await collect(got, 101)
    await asyncio.sleep(0.3)
    assert len(pokes) == 151 and pub.dropped == 0


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


async def until(what: str, cond, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.05)


@pytest.fixture
async def node_buses(rabbit_node: RabbitNode):
    """Buses on a private node the test may stop (the shared broker is never touched)."""
    exchange = f"pingo.test.bus.{uuid.uuid4().hex[:8]}"
    made: list[RabbitBus] = []

    async def make(**options: float) -> RabbitBus:
        bus = RabbitBus(rabbit_node.url, exchange, max_redeliveries=3, **options)
        await bus.start()
        made.append(bus)
        return bus

    yield make, exchange, rabbit_node
    for bus in made:
        await bus.close()


@pytest.mark.parametrize("how", ["stopped", "killed", "replaced"])
async def test_subscriber_keeps_consuming_after_broker_restart(node_buses, how: str) -> None:
    make, exchange, node = node_buses
    pub, sub = await make(), await make()
    got: list[Event] = []

    async def handler(e: Event) -> None:
        got.append(e)

    await sub.subscribe(f"{exchange}.restart", ["#"], handler)
    await pub.publish(event(1))
    await collect(got, 1)
    await asyncio.to_thread(node.stop, kill=how != "stopped")
    if how == "replaced":
        node.wipe()  # a new, empty broker: the clients declare everything again
    await asyncio.to_thread(node.start)
    # Both clients reconnect by themselves and re-declare their channel, queue and consumer.
    await until("reconnected", lambda: all(b.outages == 1 and not b.down and b.available for b in (pub, sub)))
    await pub.publish(event(2))
    async with asyncio.timeout(30):
        while 2 not in [g.payload["i"] for g in got]:
            await asyncio.sleep(0.05)
    # A crash may lose the ack of message 1, which then comes again: delivery is at least once.
    assert {g.payload["i"] for g in got} == {1, 2}
    assert [g.payload["i"] for g in got][-1] == 2 and pub.dropped == 0


async def test_a_subscription_asked_while_the_broker_is_down_is_made_once_it_is_back(node_buses) -> None:
    """A service subscribing as its broker goes away (its queue's declaration under way, the
    connection reset under it) waits for the broker and then consumes, rather than die
    half subscribed."""
    make, exchange, node = node_buses
    pub, sub = await make(), await make()
    got: list[Event] = []

    async def handler(e: Event) -> None:
        got.append(e)

    node.freeze()  # the declaration is sent and never answered ...
    subscribing = asyncio.ensure_future(sub.subscribe(f"{exchange}.late", ["#"], handler))
    await asyncio.sleep(0.5)
    await asyncio.to_thread(node.stop, kill=True)  # ... and its connection is reset under it
    await asyncio.sleep(1.0)
    assert not subscribing.done()  # waiting for the broker, not failed
    await asyncio.to_thread(node.start)
    async with asyncio.timeout(30):
        await subscribing
    await until("reconnected", lambda: not pub.down and pub.available)
    await pub.publish(event(1))
    await collect(got, 1)
    assert [g.payload["i"] for g in got] == [1]


async def test_publish_during_outage_returns_at_once_and_never_raises(node_buses, caplog) -> None:
    make, exchange, node = node_buses
    pub, sub = await make(), await make()
    got: list[Event] = []

    async def handler(e: Event) -> None:
        got.append(e)

    await sub.subscribe(f"{exchange}.outage", ["#"], handler)
    caplog.set_level(logging.INFO, logger="shared.bus.rabbitmq")
    await asyncio.to_thread(node.stop, kill=True)
    # Every publish during the outage returns (no exception), the first after a short
    # bounded wait for a reconnection, the others at once; each event is counted dropped.
    t0 = time.monotonic()
    for i in range(200):
        await pub.publish(event(100 + i))
    took = time.monotonic() - t0
    assert pub.dropped == 200
    assert took < pub.reconnect_wait + pub.confirm_timeout, took
    # Concurrent publishers (the outcome sequences of many requests) do not block either.
    t0 = time.monotonic()
    await asyncio.gather(*(pub.publish(event(300 + i)) for i in range(50)))
    assert time.monotonic() - t0 < pub.reconnect_wait + pub.confirm_timeout
    assert pub.dropped == 250
    records = [r for r in caplog.records if r.name == "shared.bus.rabbitmq"]
    # One line per bus for the whole outage (the subscriber's bus saw it too), not one per event.
    assert len([r for r in records if "broker unavailable" in r.getMessage()]) == 2, records
    assert not [r for r in records if r.exc_info or r.levelno >= logging.ERROR]

    await asyncio.to_thread(node.start)
    await until("reconnected", lambda: all(b.outages == 1 and not b.down and b.available for b in (pub, sub)))
    await pub.publish(event(1))
    await collect(got, 1, timeout=30)
    # Nothing dropped is replayed: only what was published once the broker was back arrives.
    assert [g.payload["i"] for g in got] == [1]
    assert pub.dropped == 250 and pub.outages == 1
    ours = [r.getMessage() for r in caplog.records if r.name == "shared.bus.rabbitmq"]
    back = [m for m in ours if "available again" in m]
    assert len(back) == 2 and any("250 event(s) were dropped" in m for m in back), back


async def test_publish_to_a_hung_broker_holds_up_one_caller_once(node_buses) -> None:
    """A broker that keeps the connection open but answers nothing (SIGSTOP): one publish
    waits for its confirm until ``confirm_timeout``, the next ones do not wait for it."""
    make, exchange, node = node_buses
    # Shorter than the default 5 s: the test waits for it once, whatever its length.
    pub, sub = await make(confirm_timeout=1.0), await make()
    got: list[Event] = []

    async def handler(e: Event) -> None:
        got.append(e)

    await sub.subscribe(f"{exchange}.hung", ["#"], handler)
    node.freeze()
    try:
        t0 = time.monotonic()
        for i in range(20):
            await pub.publish(event(100 + i))
        took = time.monotonic() - t0
    finally:
        node.thaw()
    assert pub.dropped == 20 and pub.down
    # One wait, not twenty: were each publish to wait for its confirm, 20 s would pass. The
    # bound leaves a loaded machine room (a tight one failed under load) and still fails
    # if even half of them waited.
    assert took < 10 * pub.confirm_timeout, took
    # Once it answers again the bus finds out by itself, and events flow again.
    await until("recovered", lambda: not pub.down)
    await pub.publish(event(1))
    async with asyncio.timeout(30):
        while 1 not in [g.payload["i"] for g in got]:
            await asyncio.sleep(0.05)
    assert pub.dropped == 20 and pub.outages == 1
