"""Text from the server made safe to print in a terminal.

Names, errors, notes and paths are whatever a user (perhaps a hostile one) submitted or a
job wrote. Printed as they are, a control character is obeyed by the terminal (``ESC [2J``
clears the screen, ``ESC ]`` sets the title or a link, a carriage return overwrites what a
line showed) and a format character such as U+202E (right-to-left override) reorders what
follows. Each is shown instead as its Python escape (``\\x1b``, ``\\u202e``), so that the
reader sees that it is there. Rich markup (``[bold]``) is never interpreted in server text:
the console is made with markup off (pingo/display.py).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

# Cc: C0 and C1 controls and DEL; Cf: format characters (bidirectional overrides and
# isolates, zero-width characters); Zl, Zp: the line and paragraph separators; Cs: a lone
# surrogate (JSON may carry one), which no terminal encoding can print.
UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
F = TypeVar("F", bound=Callable[..., Any])


def _escape_char(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every control or format character (but those in ``keep``) shown as an escape."""
    if text.isprintable():
        return text  # the common case, at C speed
    return "".join(c if c in keep or unicodedata.category(c) not in UNSAFE else _escape_char(c) for c in text)


# An error may be several lines long (a job's last lines of output): its line breaks are kept.
MULTILINE = {"error": "\n\t", "note": "\n\t"}


def escaped(value: Any, key: str | None = None) -> Any:
    """A copy of a JSON value (an API answer) with every string in it escaped."""
    if isinstance(value, str):
        return escape_controls(value, MULTILINE.get(key or "", ""))
    if isinstance(value, dict):
        return {escaped(k): escaped(v, k if isinstance(k, str) else None) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(v, key) for v in value]
    return value


def escaping(render: F) -> F:
    """A view drawn from escaped copies of its arguments (API answers)."""

    @wraps(render)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return render(*(escaped(a) for a in args), **{k: escaped(v) for k, v in kwargs.items()})

    return wrapper  # type: ignore[return-value]
