"""The event bus port, with a RabbitMQ adapter and an in-process one."""

from shared.bus.base import Bus, Handler, Poke, bind_type
from shared.bus.memory import topic_matches
from shared.config import Settings


def make_bus(settings: Settings) -> Bus:
    if settings.amqp_url:
        from shared.bus.rabbitmq import RabbitBus

        return RabbitBus(settings.amqp_url, settings.exchange)
    from shared.bus.memory import MemoryBus

    return MemoryBus()


__all__ = ["Bus", "Handler", "Poke", "bind_type", "make_bus", "topic_matches"]
