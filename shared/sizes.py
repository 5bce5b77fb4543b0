"""Sizes in bytes, read and written the one way everywhere (settings, the command line,
the CLI's tables): pydantic's ``ByteSize``. A plain integer is bytes; ``KB``, ``MB``,
``GB``, ``TB`` are powers of 1000 and ``KiB``, ``MiB``, ``GiB``, ``TiB`` powers of 1024
(``10GiB`` = 10737418240, ``10GB`` = 10000000000); case and a space before the unit do
not matter. Sizes are shown in binary units with their IEC names (``1.5 GiB``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, ByteSize, TypeAdapter, ValidationError

EXAMPLES = "examples: 500MiB, 2GB, 1.5 GiB, 1073741824"
_BYTES: TypeAdapter[ByteSize] = TypeAdapter(ByteSize)


def parse_size(text: str | int) -> int:
    """``500MiB``, ``2GB``, ``1.5 GiB``, ``4096`` -> bytes (at least one)."""
    try:
        value = int(_BYTES.validate_python(text.strip() if isinstance(text, str) else text))
    except ValidationError:
        raise ValueError(f"cannot read {text!r} as a size ({EXAMPLES})") from None
    if value < 1:
        raise ValueError(f"a size must be at least 1 byte, got {text!r}")
    return value


# A settings field in bytes that also takes a unit: ``PINGO_CAPACITY_BYTES=10GiB``. A plain int
# once read (not a ByteSize): it is stored in MongoDB and sent as JSON as it is.
Bytes = Annotated[int, BeforeValidator(parse_size)]


def human(n: float | None) -> str:
    """A size in bytes as a person reads it (``512 B``, ``1.5 KiB``), ``-`` for unknown."""
    if n is None:
        return "-"
    text = ByteSize(round(abs(n))).human_readable(separator=" ")
    return f"-{text}" if n < 0 else text
