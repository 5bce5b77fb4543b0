"""What a log line says beyond its message: which service wrote it and which workflow and
action it is about, as text for a person or one JSON object per line for a log pipeline
(``PINGO_LOG_FORMAT``; docs/operations.md, "Logs").

The ids are context variables, bound where a service takes up a workflow or an action (an
event's delivery, the guarded writer, a submission, a callback, a poll), so no log call
passes them: a filter on the handler copies them onto every record. A task started while
they are bound inherits them, as asyncio tasks inherit their context.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter

SERVICE: ContextVar[str | None] = ContextVar("pingo_service", default=None)
WORKFLOW_ID: ContextVar[str | None] = ContextVar("pingo_workflow_id", default=None)
ACTION_ID: ContextVar[str | None] = ContextVar("pingo_action_id", default=None)


@contextmanager
def _bound(values: list[tuple[ContextVar[str | None], str | None]]) -> Iterator[None]:
    tokens = [(var, var.set(value)) for var, value in values]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def about(workflow_id: Any = None, action_id: Any = None) -> AbstractContextManager[None]:
    """Log lines written inside are about this workflow and action. An id not given keeps
    the one bound outside (an action's lines stay under its workflow)."""
    given = [(WORKFLOW_ID, workflow_id), (ACTION_ID, action_id)]
    return _bound([(var, str(value)) for var, value in given if value is not None])


def delivery(service: str | None, workflow_id: str | None, action_id: str | None) -> AbstractContextManager[None]:
    """Around an event's handler: lines from the subscribing ``service`` about the event's
    workflow and action, and none other (an in-process delivery runs in a task started by
    the publisher, whose ids it would otherwise carry)."""
    values = [(WORKFLOW_ID, workflow_id), (ACTION_ID, action_id)]
    return _bound([*values, *([(SERVICE, service)] if service is not None else [])])


@contextmanager
def serving(name: str) -> Iterator[None]:
    """Log lines written inside, and by the tasks started inside, come from service ``name``
    (``pingo dev`` runs the five in one process)."""
    token = SERVICE.set(name)
    try:
        yield
    finally:
        SERVICE.reset(token)


class Ids(logging.Filter):
    """Puts the service, workflow and action bound where the record was made onto it; ids
    given with ``extra=`` win."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "service", None) is None:
            record.service = SERVICE.get() or self.service
        for name, var in (("workflow_id", WORKFLOW_ID), ("action_id", ACTION_ID)):
            if getattr(record, name, None) is None:
                setattr(record, name, var.get())
        return True


class TextFormatter(logging.Formatter):
    """The human format, unchanged, with ``[workflow=… action=…]`` after the message of a
    line about one."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ids = [
            f"{label}={value}"
            for label, value in (("workflow", getattr(record, "workflow_id", None)),
                                 ("action", getattr(record, "action_id", None)))
            if value is not None
        ]  # fmt: skip
        return f"{line} [{' '.join(ids)}]" if ids else line


class JsonLines(JsonFormatter):
    """One JSON object per line: ``timestamp`` (ISO 8601, UTC), ``level``, ``service``,
    ``logger``, ``message``, ``workflow_id`` and ``action_id`` (null when the line is about
    none), ``exception`` (the traceback) when there is one, then any ``extra=`` fields."""

    def __init__(self) -> None:
        super().__init__(
            ["levelname", "service", "name", "message", "workflow_id", "action_id"],
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
        )

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        # The time first, as a reader scanning lines expects it.
        log_data["timestamp"] = datetime.fromtimestamp(record.created, UTC).isoformat()
        super().add_fields(log_data, record, message_dict)


def formatter(fmt: str) -> logging.Formatter:
    return JsonLines() if fmt == "json" else TextFormatter()


THROTTLE_KEYS = 1000  # message templates a throttle remembers


class Throttle(logging.Filter):
    """One record per message template (and exception type) per ``period`` seconds; the
    next one let through says how many were held back. The AMQP client logs each failed
    reconnection attempt (every second, per connection) during a broker outage; a flood of
    malformed requests or of connections over the gateway's cap would log one line each."""

    def __init__(self, period: float = 30.0) -> None:
        super().__init__()
        self.period = period
        self._seen: dict[tuple[str, str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        key = (record.name, str(record.msg), type(exc).__name__ if exc is not None else "")
        now = time.monotonic()
        last, suppressed = self._seen.get(key, (-self.period, 0))
        if len(self._seen) >= THROTTLE_KEYS and key not in self._seen:
            self._seen.clear()  # many distinct messages: none of them repeats much
        if now - last < self.period:
            self._seen[key] = (last, suppressed + 1)
            return False
        self._seen[key] = (now, 0)
        if suppressed:
            record.msg = f"{record.msg} [and {suppressed} more like it in {self.period:.0f} s]"
        return True


def configure_logging(level: str = "INFO", fmt: str = "text", service: str = "pingo") -> None:
    """The one log set-up of every Pingo process: services, ``pingo dev``, the job runner.
    ``fmt`` is ``text`` or ``json``; ``service`` names the process's lines
    where no service is bound (docs/operations.md, "Logs")."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(fmt))
    handler.addFilter(Ids(service))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # The driver's DEBUG lines quote whole documents (secrets among them) and outnumber
    # Pingo's own many times over: DEBUG is Pingo's.
    logging.getLogger("pymongo").setLevel(max(logging.INFO, logging.getLevelName(level)))
    logging.getLogger("aio_pika").setLevel(logging.WARNING)
    logging.getLogger("aiormq").setLevel(logging.WARNING)
    throttle = Throttle()
    # asyncio: "socket.accept() out of system resource" once a second while files run out;
    # aiohttp.server: a traceback for each malformed request.
    for name in ("aiormq.connection", "aio_pika.robust_connection", "aio_pika.tools", "asyncio", "aiohttp.server"):
        logging.getLogger(name).addFilter(throttle)
