from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from shared.events import Event

Handler = Callable[[Event], Awaitable[None]]


class Bus(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def publish(self, event: Event) -> None:
        """Publish; returns once the broker has confirmed it (or the in-process queues have it)."""

    async def subscribe(self, queue: str, keys: list[str], handler: Handler) -> None:
        """Deliver events whose type matches one of ``keys`` (AMQP topic patterns) to ``handler``.

        Replicas subscribing with the same ``queue`` name share its messages.
        """


def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: ``*`` is one word, ``#`` zero or more."""

    def match(p: list[str], k: list[str]) -> bool:
        if not p:
            return not k
        if p[0] == "#":
            return any(match(p[1:], k[i:]) for i in range(len(k) + 1))
        return bool(k) and (p[0] == "*" or p[0] == k[0]) and match(p[1:], k[1:])

    return match(pattern.split("."), key.split("."))
