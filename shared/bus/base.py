from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from shared.errors import PingoError
from shared.events import Event

Handler = Callable[[Event], Awaitable[None]]
# What a wake-only subscription calls for each event: nothing read, nothing awaited.
Poke = Callable[[], None]


# What a bus raises on purpose (shared/errors.py). Only ``start`` raises: events are hints.
class BusError(PingoError):
    """The base of the bus port's errors."""


class BrokerUnreachable(BusError):
    """The broker cannot be reached yet (down, booting): worth waiting for."""


class Bus(Protocol):
    # Events that could not be published (broker unreachable, no confirm): for metrics.
    dropped: int

    async def start(self) -> None:
        """Connect; raises ``BrokerUnreachable`` if the broker cannot be reached (the caller
        waits and retries)."""

    async def close(self) -> None: ...

    async def publish(self, event: Event) -> None:
        """Publish; returns once the broker has confirmed it (or the in-process queues have it).

        Never raises for broker trouble: events are hints, and the write that caused one
        has already happened. An event that cannot be published is dropped and counted
        in ``dropped``; the services' timers catch up with it.
        """

    async def publish_many(self, events: Sequence[Event]) -> None:
        """Publish several events in their order, as ``publish`` does each, with one wait
        for the broker's confirms of them all (a group's ends, a submission's READY events)."""

    async def subscribe(self, queue: str, keys: list[str], handler: Handler) -> None:
        """Deliver events whose type matches one of ``keys`` (AMQP topic patterns) to ``handler``,
        whatever their owner and workflow: each is bound as ``bind_type(key)``.

        Replicas subscribing with the same ``queue`` name share its messages.
        """

    async def wake(self, queue: str, keys: list[str], poke: Poke) -> None:
        """Call ``poke`` for each event whose type matches one of ``keys``, for a step that
        only needs waking (its work does not depend on the event, and its timer catches up
        with a wake lost): the event is neither decoded nor acknowledged, so a burst of
        them costs the subscriber next to nothing. Replicas share ``queue`` as above.
        """


def bind_type(pattern: str) -> str:
    """The binding of an event type pattern: events are routed as ``<type>.<owner>.<workflow>``
    (``Event.routing_key``), so ``action.ready`` binds ``action.ready.#``. An event routed by
    its type alone (published before schema 2) matches it too."""
    return f"{pattern}.#"
