"""JSON text read as Pingo reads a workflow: a key given twice in one object is recorded,
not silently resolved.

``json.loads`` keeps the last value of a repeated key, other parsers the first or refuse
the document; a workflow that means different things to different readers is refused
(``shared.workflow_spec.repeated_keys`` reports each, with where it is).
"""

from __future__ import annotations

import json
from typing import Any


class RepeatedKeys(dict):
    """A JSON object in which some keys appeared more than once (``repeated``, in order):
    it holds the last value of each, as ``json.loads`` would."""

    repeated: list[str]


def object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    repeated: list[str] = []
    for key, value in pairs:
        if key in out and key not in repeated:
            repeated.append(key)
        out[key] = value
    if not repeated:
        return out
    found = RepeatedKeys(out)
    found.repeated = repeated
    return found


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads``, with every object that repeats a key a ``RepeatedKeys``."""
    return json.loads(text, object_pairs_hook=object_from_pairs, **options)
