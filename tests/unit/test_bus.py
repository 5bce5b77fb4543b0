"""The in-process bus's matching (the RabbitMQ adapter: tests/system/test_bus.py)."""

from __future__ import annotations

import asyncio

from shared.bus.memory import MemoryBus, topic_matches
from shared.events import Event, EventType, Subject


def event(i: int, type_: EventType = EventType.ACTION_READY) -> Event:
    return Event(type=type_, producer="test", subject=Subject(action_id=f"a{i}"), payload={"i": i})


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


async def test_a_subscription_by_type_gets_that_type_of_every_workflow() -> None:
    bus = MemoryBus()
    got: list[str | None] = []

    async def handler(e: Event) -> None:
        got.append(e.subject.workflow_id)

    await bus.subscribe("q", ["action.finished", "dataset.*"], handler)
    for wf in ("wf-a", "wf-b", None):
        await bus.publish(Event(type=EventType.ACTION_FINISHED, producer="t", subject=Subject(workflow_id=wf)))
    await bus.publish(Event(type=EventType.ACTION_READY, producer="t", subject=Subject(workflow_id="wf-a")))
    await bus.publish(Event(type=EventType.DATASET_MARKED, producer="t", subject=Subject(dataset_hash="h")))
    await asyncio.sleep(0.05)
    assert sorted(got, key=str) == sorted(["wf-a", "wf-b", None, None], key=str)
    # An event routed by its type alone (an older publisher) still matches a type binding.
    assert topic_matches("action.finished.#", "action.finished")


async def test_memory_bus_wakes_per_matching_event_and_keeps_a_group_in_order() -> None:
    bus = MemoryBus()
    got: list[int] = []
    pokes: list[str] = []

    async def handler(e: Event) -> None:
        got.append(e.payload["i"])

    await bus.subscribe("q", ["action.ready"], handler)
    await bus.wake("w", ["action.finished"], lambda: pokes.append("a"))
    await bus.wake("w", ["action.finished"], lambda: pokes.append("b"))  # a replica: they share it
    await bus.publish_many([event(i, EventType.ACTION_FINISHED if i % 2 else EventType.ACTION_READY) for i in range(8)])
    await asyncio.sleep(0.05)
    assert got == [0, 2, 4, 6]
    assert sorted(pokes) == ["a", "a", "b", "b"]
