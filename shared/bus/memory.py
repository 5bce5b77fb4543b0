"""In-process bus for ``pingo dev`` and unit tests: same interface, no broker. It routes
as RabbitMQ's topic exchange does (``topic_matches``): the bindings are worked out once,
when a queue subscribes, so a publish only matches keys."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence

from shared import logs
from shared.bus.base import Handler, Poke, bind_type
from shared.events import Event

log = logging.getLogger(__name__)


def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: ``*`` is one word, ``#`` zero or more."""
    return _matches(pattern.split("."), key.split("."))


def _matches(p: list[str], k: list[str]) -> bool:
    if not p:
        return not k
    if p[0] == "#":
        return any(_matches(p[1:], k[i:]) for i in range(len(k) + 1))
    return bool(k) and (p[0] == "*" or p[0] == k[0]) and _matches(p[1:], k[1:])


class MemoryBus:
    def __init__(self) -> None:
        self._queues: dict[str, list[str]] = {}
        # Per queue, its keys bound (``bind_type``) and split into words: what a publish matches.
        self._bindings: dict[str, list[list[str]]] = {}
        self._handlers: dict[str, list[tuple[str | None, Handler]]] = defaultdict(list)
        # Wake-only queues (``wake``): their pokes are called in the publish, no task made.
        self._pokes: dict[str, list[Poke]] = defaultdict(list)
        self._next: dict[str, int] = defaultdict(int)
        self._tasks: set[asyncio.Task] = set()
        self.published: list[Event] = []
        self.dropped = 0  # nothing is ever dropped in process

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        self._tasks.clear()

    async def publish(self, event: Event) -> None:
        self.published.append(event)
        words = event.routing_key.split(".")
        for queue, bindings in self._bindings.items():
            if any(_matches(b, words) for b in bindings):
                # Replicas on one queue share its messages, round robin, as on RabbitMQ.
                n = self._next[queue]
                self._next[queue] += 1
                if pokes := self._pokes.get(queue):
                    try:
                        pokes[n % len(pokes)]()
                    except Exception:
                        log.exception("waking on %s failed (the timers will catch up)", queue)
                    continue
                handlers = self._handlers[queue]
                i = n % len(handlers)
                task = asyncio.create_task(self._deliver(handlers[i], event))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def publish_many(self, events: Sequence[Event]) -> None:
        for event in events:
            await self.publish(event)

    async def _deliver(self, handler: tuple[str | None, Handler], event: Event) -> None:
        service, handle = handler
        with logs.delivery(service, event.subject.workflow_id, event.subject.action_id):
            try:
                await handle(event)
            except Exception:
                log.exception("handler failed on %s (the timers will catch up)", event.type)

    async def subscribe(self, queue: str, keys: list[str], handler: Handler) -> None:
        self._bind(queue, keys)
        # With the subscriber's name: its handler's log lines are its own, not the publisher's.
        self._handlers[queue].append((logs.SERVICE.get(), handler))

    async def wake(self, queue: str, keys: list[str], poke: Poke) -> None:
        self._bind(queue, keys)
        self._pokes[queue].append(poke)

    def _bind(self, queue: str, keys: list[str]) -> None:
        self._queues[queue] = sorted(set(self._queues.get(queue, [])) | set(keys))
        self._bindings[queue] = [bind_type(k).split(".") for k in self._queues[queue]]
