"""Pingo's errors: one family (docs/architecture.md, "Errors").

Every error Pingo raises on purpose is a ``PingoError``; anything else that escapes is a
library's or a bug. The errors a port's adapters may raise are declared in the port
(``shared/executors/base.py``, ``shared/storage/base.py``, ``shared/bus/base.py``), each
under the port's own base, and the meanings that cross ports are here: ``Refused``, final
whoever asks again, and ``CannotStart``, a process that will not start so configured. A
word means one thing: a refusal is always the first, never a configuration.
"""

from __future__ import annotations


class PingoError(Exception):
    """The base of every error Pingo raises on purpose."""


class Refused(PingoError):
    """An executor or a storage refused who acts (a permission denied, a proxy user not
    trusted): asking again, or with another attempt, is refused the same way, so it is
    final (an action ends FAILED at once: submit_failed, commit_refused)."""


class CannotStart(PingoError):
    """A service will not start so configured; the message says why and what to set."""
