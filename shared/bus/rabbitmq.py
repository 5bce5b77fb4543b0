"""RabbitMQ adapter (aio-pika).

One durable topic exchange, events routed as ``<type>.<owner>.<workflow>`` (``Event.routing_key``;
a service binds the types it wants as ``<type>.#``); a durable queue per service, shared by its replicas;
persistent messages with publisher confirms; manual ack; a handler that keeps failing
sends the message to the dead-letter queue after ``max_redeliveries``. The robust
connection reconnects and re-declares everything (exchanges, queues, bindings,
consumers) after a broker restart.

Events are hints, MongoDB is the truth: ``publish`` never fails the write that caused
it. While the broker is unreachable events are dropped (counted in ``dropped``, one log
line per outage), after a short bounded wait at the start of an outage; the timers of
every service catch up with what the dropped events would have woken them for.

There is deliberately no in-memory outbox replaying dropped events after reconnection:
during an outage the services keep working on their timers (the store is up), so by the
time the broker is back the transitions those events announced have already been acted
upon and a replay would only be stale wakeups, out of order and possibly duplicated (a
publish whose confirm was lost may have been routed). An outbox would also promise a
durability it cannot keep (it dies with the process); whoever needs every transition
reads the store (``/workflows/{id}/timeline``), not the bus.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from shared import logs
from shared.bus.base import BrokerUnreachable, Handler, Poke, bind_type
from shared.events import Event

log = logging.getLogger(__name__)

# Events published before their confirms are awaited (``publish_many``): a submission
# readies hundreds, and one confirm wait apart each they took a round trip each.
PUBLISH_AT_ONCE = 64


def message(event: Event) -> aio_pika.Message:
    return aio_pika.Message(
        event.model_dump_json().encode(),
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=event.id,
        type=event.type.value,
    )


def _cancelled_here() -> bool:
    """True when the current task itself is being cancelled (not a CancelledError that the
    AMQP client used to fail a pending confirm when its connection went away)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class RabbitBus:
    # What the AMQP client raises while the broker cannot be reached or is still booting:
    # ``start`` raises it as the port's ``BrokerUnreachable``.
    unreachable: tuple[type[BaseException], ...] = (
        aio_pika.exceptions.AMQPError,
        aio_pika.exceptions.ChannelInvalidStateError,
        ConnectionError,
        OSError,
        TimeoutError,
    )

    def __init__(
        self,
        url: str,
        exchange: str,
        max_redeliveries: int = 5,
        *,
        confirm_timeout: float = 5.0,
        reconnect_wait: float = 1.0,
        reconnect_interval: float = 1.0,
    ) -> None:
        self.url = url
        self.exchange_name = exchange
        self.max_redeliveries = max_redeliveries
        # The longest a publish waits for the broker's confirm.
        self.confirm_timeout = confirm_timeout
        # In the first seconds of an outage a publish waits (this long at most) for the
        # connection to come back, which covers a blip; after that events are dropped at once.
        self.reconnect_wait = reconnect_wait
        self.reconnect_interval = reconnect_interval
        self._conn: AbstractRobustConnection | None = None
        self._channel: aio_pika.abc.AbstractRobustChannel | None = None
        self._exchange: aio_pika.abc.AbstractExchange | None = None
        self._closing = False
        # Events not published (no broker, no confirm) since start, and outages seen: for metrics.
        self.dropped = 0
        self.outages = 0
        # The current outage: since when, events dropped in it, set when it is over, and the
        # task that checks in the background whether the broker answers again.
        self._down_since: float | None = None
        self._dropped_in_outage = 0
        self._up = asyncio.Event()
        self._up.set()
        self._watch: asyncio.Task | None = None

    @property
    def dead_letter_exchange(self) -> str:
        return f"{self.exchange_name}.dead"

    @property
    def down(self) -> bool:
        """In a known outage: events are being dropped."""
        return self._down_since is not None

    @property
    def available(self) -> bool:
        """Connected, with the publishing channel open (as far as the client knows)."""
        return (
            self._conn is not None
            and self._conn.connected.is_set()
            and self._channel is not None
            and not self._channel.is_closed
        )

    async def start(self) -> None:
        """Connect and declare. Raises ``BrokerUnreachable`` if the broker cannot be
        reached: the caller waits and retries. Once started, it reconnects by itself."""
        self._closing = False
        try:
            await self._start()
        except self.unreachable as exc:
            raise BrokerUnreachable(f"{type(exc).__name__}: {exc}") from exc

    async def _start(self) -> None:
        conn = await aio_pika.connect_robust(self.url, reconnect_interval=self.reconnect_interval, timeout=10)
        try:
            channel = await conn.channel(publisher_confirms=True)
            await channel.set_qos(prefetch_count=32)
            exchange = await channel.declare_exchange(self.exchange_name, aio_pika.ExchangeType.TOPIC, durable=True)
            dlx = await channel.declare_exchange(self.dead_letter_exchange, aio_pika.ExchangeType.FANOUT, durable=True)
            dead = await channel.declare_queue(f"{self.exchange_name}.dead", durable=True)
            await dead.bind(dlx)
        except BaseException:
            await asyncio.shield(conn.close())
            raise
        conn.close_callbacks.add(self._on_connection_lost)
        conn.reconnect_callbacks.add(self._on_reconnected)
        self._conn, self._channel, self._exchange = conn, channel, exchange

    async def close(self) -> None:
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def _on_connection_lost(self, _conn: Any, exc: BaseException | None) -> None:
        if not self._closing:
            self._outage(exc)

    def _on_reconnected(self, _conn: Any) -> None:
        log.info("reconnected to the broker; exchanges, queues and consumers declared again")
        self._recovered()

    def _outage(self, exc: BaseException | None) -> None:
        if self._down_since is not None or self._closing:
            return
        self._down_since = time.monotonic()
        self._up.clear()
        self.outages += 1
        log.warning(
            "broker unavailable (%s: %s): events are dropped until it is back; the services' timers catch up",
            type(exc).__name__,
            exc,
        )
        self._watch = asyncio.get_running_loop().create_task(self._watch_recovery())

    def _recovered(self) -> None:
        if self._down_since is None:
            return
        log.warning(
            "broker available again after %.1f s; %d event(s) were dropped meanwhile",
            time.monotonic() - self._down_since,
            self._dropped_in_outage,
        )
        self._down_since = None
        self._dropped_in_outage = 0
        self._up.set()

    async def _watch_recovery(self) -> None:
        """While down, check every ``reconnect_interval`` whether the broker answers again.
        A lost connection is reported back by the reconnection itself; this covers a
        publish that failed on a connection the client still holds (no confirm, a nack)."""
        while self._down_since is not None and not self._closing:
            await asyncio.sleep(self.reconnect_interval)
            if not self.available:
                continue
            assert self._channel is not None
            try:
                async with asyncio.timeout(self.confirm_timeout):
                    # A round trip that changes nothing: the exchange exists with these arguments.
                    await self._channel.declare_exchange(
                        self.exchange_name, aio_pika.ExchangeType.TOPIC, durable=True, robust=False
                    )
            except asyncio.CancelledError:
                if _cancelled_here():
                    raise
                continue
            except Exception:
                continue
            self._recovered()

    def _drop(self, event: Event, exc: BaseException | None) -> None:
        self._outage(exc)
        self.dropped += 1
        self._dropped_in_outage += 1
        log.debug("dropped %s %s (%s)", event.type, event.id, exc)

    async def _ready(self) -> bool:
        """Whether to publish now. Waits only at the start of an outage (``reconnect_wait``
        in all); in an outage that lasts, callers are never held up."""
        if self._down_since is None:
            if self.available:
                return True
            assert self._channel is not None
            try:
                async with asyncio.timeout(self.reconnect_wait):
                    await self._channel.ready()
            except TimeoutError:
                return False
            return self.available
        grace = self.reconnect_wait - (time.monotonic() - self._down_since)
        if grace <= 0:
            return False
        try:
            async with asyncio.timeout(grace):
                await self._up.wait()
        except TimeoutError:
            return False
        return self.available

    async def publish(self, event: Event) -> None:
        """Publish with a broker confirm. Never raises for broker trouble: the event is
        dropped and counted instead (events are hints; the timers catch up)."""
        await self.publish_many([event])

    async def publish_many(self, events: Sequence[Event]) -> None:
        """Publish in order, then wait for the confirms of them all (``PUBLISH_AT_ONCE`` at a
        time), so a group's events cost one wait, not one each. Never raises for broker
        trouble: an event not confirmed is dropped and counted."""
        assert self._exchange is not None, "bus not started"
        for i in range(0, len(events), PUBLISH_AT_ONCE):
            await self._publish_group(self._exchange, events[i : i + PUBLISH_AT_ONCE])

    async def _publish_group(self, exchange: aio_pika.abc.AbstractExchange, events: Sequence[Event]) -> None:
        if not events:
            return
        try:
            if not await self._ready():
                for event in events:
                    self._drop(event, ConnectionError("not connected"))
                return
            # The whole publish is bounded: a robust channel may otherwise wait for a
            # reconnection that takes as long as the outage. Not ``mandatory``: an event no
            # queue is bound to (``action.submitted`` with no integrator) is dropped by the
            # broker, rather than sent back to be ignored here.
            async with asyncio.timeout(self.confirm_timeout):
                if len(events) == 1:  # the common case, without a task
                    outcomes: list[Any] = [
                        await exchange.publish(message(events[0]), routing_key=events[0].routing_key, mandatory=False)
                    ]
                else:
                    outcomes = await asyncio.gather(
                        *(exchange.publish(message(e), routing_key=e.routing_key, mandatory=False) for e in events),
                        return_exceptions=True,
                    )
        except asyncio.CancelledError as exc:
            if _cancelled_here():
                raise
            outcomes = [exc] * len(events)  # a pending confirm failed because the connection went away
        except Exception as exc:
            outcomes = [exc] * len(events)
        failed = False
        for event, outcome in zip(events, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, asyncio.CancelledError) and _cancelled_here():
                    raise outcome
                # ChannelInvalidStateError, ConnectionError, AMQPError, DeliveryError (nack), TimeoutError...
                self._drop(event, outcome)
                failed = True
        if not failed:
            self._recovered()

    async def _consume(self, queue: str, keys: list[str], on_message: Any, no_ack: bool = False) -> None:
        """Declare ``queue``, bind it to ``keys`` and consume it with ``on_message``; tried
        again once the broker is back if it goes away meanwhile. The robust channel restores
        after a reconnection only what was declared before it, so a service whose broker
        stopped while it subscribed would otherwise die half subscribed; it waits for the
        broker instead, as ``start`` does (docs/architecture.md, "Events")."""
        while True:
            try:
                q = await self._queue(queue, keys)
                await q.consume(on_message, no_ack=no_ack)
                return
            except self.unreachable as exc:
                if self._closing:
                    raise
                log.warning(
                    "subscribing to %s failed (%s: %s); trying again once the broker is back",
                    queue, type(exc).__name__, exc,
                )  # fmt: skip
                await asyncio.sleep(self.reconnect_interval)

    async def _queue(self, queue: str, keys: list[str]) -> aio_pika.abc.AbstractQueue:
        assert self._channel is not None, "bus not started"
        q = await self._channel.declare_queue(
            queue, durable=True, arguments={"x-dead-letter-exchange": self.dead_letter_exchange}
        )
        for key in keys:
            await q.bind(self._exchange, routing_key=bind_type(key))
        return q

    async def wake(self, queue: str, keys: list[str], poke: Poke) -> None:
        """Consumed without acknowledgements (the broker forgets a message once sent) and
        never decoded: a lost wake is the timer's to catch up with."""

        async def on_message(_message: AbstractIncomingMessage) -> None:
            try:
                poke()
            except Exception:
                log.exception("waking on %s failed (the timers will catch up)", queue)

        await self._consume(queue, keys, on_message, no_ack=True)

    async def subscribe(self, queue: str, keys: list[str], handler: Handler) -> None:
        service = logs.SERVICE.get()  # the subscriber's, for its handler's log lines

        async def on_message(message: AbstractIncomingMessage) -> None:
            try:
                event = Event.model_validate_json(message.body)
            except ValueError:
                log.error("undecodable message on %s: dead-lettered", queue)
                await settle(message.reject(requeue=False))
                return
            with logs.delivery(service, event.subject.workflow_id, event.subject.action_id):
                await handle(message, event)

        async def handle(message: AbstractIncomingMessage, event: Event) -> None:
            assert self._channel is not None
            try:
                await handler(event)
            except Exception:
                retries = int((message.headers or {}).get("x-pingo-retries", 0))
                log.exception("handler failed on %s (retry %d)", event.type, retries)
                if retries + 1 >= self.max_redeliveries:
                    await settle(message.reject(requeue=False))
                    return
                # Straight back to this queue only (the default exchange routes by queue name).
                # If the broker is gone, the unacked message comes back by itself.
                republished = await settle(
                    self._channel.default_exchange.publish(
                        aio_pika.Message(
                            message.body,
                            headers={"x-pingo-retries": retries + 1},
                            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                            message_id=message.message_id,
                        ),
                        routing_key=queue,
                        timeout=self.confirm_timeout,
                    )
                )
                if republished:
                    await settle(message.ack())
                return
            await settle(message.ack())

        await self._consume(queue, keys, on_message)


async def settle(op: Awaitable[Any]) -> bool:
    """Ack, reject or re-publish on a consumer's channel. If the connection went away
    meanwhile, the broker redelivers the unacked message after the reconnection (handlers
    are idempotent: events are hints), so the failure is only noted."""
    try:
        await op
        return True
    except asyncio.CancelledError:
        if _cancelled_here():
            raise
    except Exception as exc:
        log.info("could not settle a message (%s: %s); the broker will redeliver it", type(exc).__name__, exc)
    return False
