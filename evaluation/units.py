"""Reading sizes and dates given on the command line (sizes: ``shared.sizes``, as settings read them)."""

from __future__ import annotations

from datetime import datetime

from shared.sizes import parse_size

__all__ = ["parse_date", "parse_size"]


def parse_date(text: str) -> float:
    """An ISO date or date-time (``2024-05-01``, ``2024-05-01T12:30``, with an optional
    UTC offset) -> Unix seconds. Without an offset it is local time."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a date (use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][+HH:MM])") from None
    return when.timestamp()
