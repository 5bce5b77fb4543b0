"""Counting the commands a client sends the store, as PyMongo's own command monitoring
sees them: a test that a step's cost does not grow with what it works on."""

from __future__ import annotations

from pymongo import monitoring


class Commands(monitoring.CommandListener):
    """The commands a client sent the store."""

    def __init__(self) -> None:
        self.sent = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass
