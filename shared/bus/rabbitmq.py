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
from collections.abc import Awaitable
from typing import Any

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from shared import logs
from shared.bus.base import BrokerUnreachable, Handler, bind_type
from shared.events import Event

log = logging.getLogger(__name__)


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
        assert self._exchange is not None, "bus not started"
        message = aio_pika.Message(
            event.model_dump_json().encode(),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=event.id,
            type=event.type.value,
        )
        try:
            if not await self._ready():
                self._drop(event, ConnectionError("not connected"))
                return
            # The whole publish is bounded: a robust channel may otherwise wait for a
            # reconnection that takes as long as the outage.
            async with asyncio.timeout(self.confirm_timeout):
                await self._exchange.publish(message, routing_key=event.routing_key)
        except asyncio.CancelledError as exc:
            if _cancelled_here():
                raise
            self._drop(event, exc)  # a pending confirm failed because the connection went away
            return
        except Exception as exc:
            # ChannelInvalidStateError, ConnectionError, AMQPError, DeliveryError (nack), TimeoutError...
            self._drop(event, exc)
            return
        self._recovered()

    async def subscribe(self, queue: str, keys: list[str], handler: Handler) -> None:
        assert self._channel is not None, "bus not started"
        q = await self._channel.declare_queue(
            queue, durable=True, arguments={"x-dead-letter-exchange": self.dead_letter_exchange}
        )
        for key in keys:
            await q.bind(self._exchange, routing_key=bind_type(key))

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

        await q.consume(on_message)


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
