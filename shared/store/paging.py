"""Keyset paging over a sorted cursor (docs/api.md, "Cursors").

Lists are sorted by a time field then ``_id``, both descending, and a page starts after
the (time, id) of the previous page's last document. The query asks ``$lte`` on the time
field alone, which an index serves; the ties with the last document that were already
shown are dropped here, where an ``$or`` on both fields would not be index-served.
"""

from __future__ import annotations

from typing import Any


async def page_after(cursor: Any, key: str, after: tuple[Any, str] | None, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` documents of ``cursor`` (sorted by ``key`` then _id, both
    descending) that come after ``after``."""
    out: list[dict[str, Any]] = []
    async for d in cursor:
        if after is not None and d.get(key) == after[0] and d["_id"] >= after[1]:
            continue
        out.append(d)
        if len(out) >= limit:
            break
    await cursor.close()
    return out
