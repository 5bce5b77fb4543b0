"""RabbitMQ adapter (aio-pika).

One durable topic exchange; a durable queue per service, shared by its replicas;
persistent messages with publisher confirms; manual ack; a handler that keeps failing
sends the message to the dead-letter queue after ``max_redeliveries``. The robust
connection reconnects and re-declares everything after a broker restart.
"""

from __future__ import annotations

import asyncio
import logging

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from shared.bus.base import Handler
from shared.events import Event

log = logging.getLogger(__name__)


class RabbitBus:
    def __init__(self, url: str, exchange: str, max_redeliveries: int = 5) -> None:
        self.url = url
        self.exchange_name = exchange
        self.max_redeliveries = max_redeliveries
        self._conn: AbstractRobustConnection | None = None
        self._channel: aio_pika.abc.AbstractRobustChannel | None = None
        self._exchange: aio_pika.abc.AbstractExchange | None = None
        self._publish_lock = asyncio.Lock()

    @property
    def dead_letter_exchange(self) -> str:
        return f"{self.exchange_name}.dead"

    async def start(self) -> None:
        self._conn = await aio_pika.connect_robust(self.url, reconnect_interval=1.0)
        self._channel = await self._conn.channel(publisher_confirms=True)
        await self._channel.set_qos(prefetch_count=32)
        self._exchange = await self._channel.declare_exchange(
            self.exchange_name, aio_pika.ExchangeType.TOPIC, durable=True
        )
        dlx = await self._channel.declare_exchange(
            self.dead_letter_exchange, aio_pika.ExchangeType.FANOUT, durable=True
        )
        dead = await self._channel.declare_queue(f"{self.exchange_name}.dead", durable=True)
        await dead.bind(dlx)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def publish(self, event: Event) -> None:
        assert self._exchange is not None, "bus not started"
        message = aio_pika.Message(
            event.model_dump_json().encode(),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=event.id,
            type=event.type.value,
        )
        for attempt in range(5):
            try:
                async with self._publish_lock:
                    await self._exchange.publish(message, routing_key=event.type.value, timeout=10)
                return
            except (TimeoutError, aio_pika.exceptions.AMQPError, ConnectionError) as exc:
                # The broker may be restarting: the robust connection is reconnecting.
                log.warning("publish of %s failed (%s); retrying", event.type, exc)
                await asyncio.sleep(0.5 * (attempt + 1))
        log.error("event %s %s lost after retries; the timers will catch up", event.type, event.id)

    async def subscribe(self, queue: str, keys: list[str], handler: Handler) -> None:
        assert self._channel is not None, "bus not started"
        q = await self._channel.declare_queue(
            queue, durable=True, arguments={"x-dead-letter-exchange": self.dead_letter_exchange}
        )
        for key in keys:
            await q.bind(self._exchange, routing_key=key)

        async def on_message(message: AbstractIncomingMessage) -> None:
            try:
                event = Event.model_validate_json(message.body)
            except ValueError:
                log.error("undecodable message on %s: dead-lettered", queue)
                await message.reject(requeue=False)
                return
            try:
                await handler(event)
            except Exception:
                retries = int((message.headers or {}).get("x-pingo-retries", 0))
                log.exception("handler failed on %s (retry %d)", event.type, retries)
                if retries + 1 >= self.max_redeliveries:
                    await message.reject(requeue=False)
                    return
                # Straight back to this queue only (the default exchange routes by queue name).
                await self._channel.default_exchange.publish(
                    aio_pika.Message(
                        message.body,
                        headers={"x-pingo-retries": retries + 1},
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        message_id=message.message_id,
                    ),
                    routing_key=queue,
                )
                await message.ack()
                return
            await message.ack()

        await q.consume(on_message)
