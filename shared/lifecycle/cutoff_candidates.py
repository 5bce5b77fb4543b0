"""Which actions early cutoff looks at (docs/planning.md, "Early cutoff"): a pure rule
on an action's document, apart from ``cutoff`` so that the READY event's payload
(``effects``) can ask it without importing the engine above it."""

from __future__ import annotations

from typing import Any


def may_be_cut_off(action: dict[str, Any]) -> bool:
    """Only an action computed because a parent changed, or computed again in the lineage
    of an output gone since (one cut off before: it never made its own), is looked at:
    the other starts pay no read for it."""
    miss = action.get("miss") or {}
    if any(c.get("field") == "parent" for c in miss.get("changes") or []):
        return True
    return not miss.get("changes") and (miss.get("against") or {}).get("hash") == action.get("hash")
