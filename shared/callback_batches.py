"""A batch of job notifications: the one request a job runner sends a callback service
for the ends (and RUNNING notices) that came together, instead of a GET each
(docs/architecture.md, "callback" and "The local job runner").

The body is a JSON list; each entry is the path and query its GET would have asked
(``/callback/<action id>?secret=...&jobId=...&status=...``), so the service checks each
exactly as it checks that GET. Both sides take their limits and their entries' form from
here: ``entry`` writes one, ``parse`` reads a body.
"""

from __future__ import annotations

import json
import urllib.parse

CALLBACK_PATH = "/callback/"  # where a notification's GET goes: /callback/<action id>
BATCH_PATH = "/callback-batch"  # where a batch is posted, beside it
BATCH_MAX = 1000  # entries in one batch
BATCH_MAX_BYTES = 1 << 20  # a batch's body


def entry(target: str, cut: int) -> str:
    """A batch's entry for the notification URL ``target``: its path from ``cut`` (where
    ``/callback/`` starts) and its query."""
    parts = urllib.parse.urlsplit(target)
    return parts.path[cut:] + (f"?{parts.query}" if parts.query else "")


def parse(body: bytes) -> list[tuple[str, dict[str, str]]] | str:
    """A batch's entries as (action id, query: each parameter's first value), or what is
    wrong with it."""
    try:
        entries = json.loads(body)
    except ValueError:
        return "the body is not JSON"
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return f"the body must be a JSON list of notification paths ({CALLBACK_PATH}<action id>?<query>)"
    if len(entries) > BATCH_MAX:
        return f"a batch takes at most {BATCH_MAX} notifications"
    parsed: list[tuple[str, dict[str, str]]] = []
    for item in entries:
        parts = urllib.parse.urlsplit(item)
        action_id = urllib.parse.unquote(parts.path.removeprefix(CALLBACK_PATH))
        if (
            parts.scheme
            or parts.netloc
            or not parts.path.startswith(CALLBACK_PATH)
            or not action_id
            or "/" in action_id
        ):
            return f"each notification is a path {CALLBACK_PATH}<action id>?<query>"
        query: dict[str, str] = {}
        for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            query.setdefault(name, value)
        parsed.append((action_id, query))
    return parsed
