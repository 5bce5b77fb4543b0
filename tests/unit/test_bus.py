"""The in-process bus's matching (the RabbitMQ adapter: tests/system/test_bus.py)."""

from __future__ import annotations

import asyncio

from shared.bus.base import topic_matches
from shared.bus.memory import MemoryBus
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
