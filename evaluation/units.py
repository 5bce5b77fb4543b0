"""Reading sizes and dates given on the command line."""

from __future__ import annotations

import re
from datetime import datetime

UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``500MB``, ``2GB``, ``1.5 GiB``, ``4096`` (bytes) -> bytes. Units are binary
    (1 KB = 1024 B), as ``PINGO_CAPACITY_BYTES`` and ``pingo datasets`` count."""
    m = SIZE.match(text)
    if not m or (m.group(3) and m.group(3).lower() == "ib" and not m.group(2)):
        raise ValueError(f"cannot read {text!r} as a size (examples: 500MB, 2GB, 1.5GiB, 1073741824)")
    value = float(m.group(1)) * UNITS[m.group(2).lower()]
    if value < 1:
        raise ValueError(f"a size must be at least 1 byte, got {text!r}")
    return int(value)


def parse_date(text: str) -> float:
    """An ISO date or date-time (``2024-05-01``, ``2024-05-01T12:30``, with an optional
    UTC offset) -> Unix seconds. Without an offset it is local time."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a date (use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][+HH:MM])") from None
    return when.timestamp()
