"""Computations shared across users, as one of them sees them (docs/users.md, "Shared
computations").

An action may follow, take over or adopt the running job of an identical action of
another user's workflow, and be followed by one. Its owner sees that the computation is
shared (``shared: true``), never the other workflow's or action's ids: the id fields that
would name them are emptied, and any text naming them (an error, a timeline note, a local
job's id, which is made from its action's id) says "another user's workflow" instead.
An admin, and anyone while users are off, sees everything.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel

from services.workflow_manager.auth import Identity
from shared.store import actions as acts
from shared.store import workflows as wfs
from shared.store.client import Store

WORKFLOW_ID = re.compile(r"wf-[0-9a-f]{12}")
# An action (or a job named from it) of a workflow: the workflow id and what follows it
# up to a space or punctuation that ends a word in a note.
REFERENCE = re.compile(r"wf-[0-9a-f]{12}(?:\.[^\s,;:()'\"]*)?")
OTHERS = "another user's workflow"
# Fields naming one other action, and the list of them.
ACTION_FIELDS = ("follows", "takeoverOf", "successor")
ACTION_LISTS = ("followers",)
ID_FIELDS = ("jobId",)  # a job id that names another user's action is dropped, not reworded

M = TypeVar("M", bound=BaseModel)


async def hidden_workflows(store: Store, text: str, caller: Identity) -> set[str]:
    """The workflow ids in ``text`` that the caller may not see (one not found counts as hidden)."""
    ids = set(WORKFLOW_ID.findall(text))
    if not ids or caller.admin:  # an admin, or anyone while users are off: nothing is hidden
        return set()
    found = await wfs.briefs(store, ids)
    return {i for i in ids if i not in found or not caller.sees(found[i].owner)}


def _names_hidden(value: str, hidden: set[str]) -> bool:
    return any(w in hidden for w in WORKFLOW_ID.findall(value))


def scrub_text(value: str, hidden: set[str]) -> str:
    return REFERENCE.sub(lambda m: OTHERS if m.group(0)[:15] in hidden else m.group(0), value)


def _scrub(value: Any, hidden: set[str]) -> tuple[Any, bool]:
    """``value`` without the hidden workflows, and whether it named one of them."""
    if isinstance(value, str):
        return (scrub_text(value, hidden), True) if _names_hidden(value, hidden) else (value, False)
    if isinstance(value, list):
        items = [_scrub(v, hidden) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    if not isinstance(value, dict):
        return value, False
    out: dict[str, Any] = {}
    shared = False
    for key, v in value.items():
        if key in (*ACTION_FIELDS, *ID_FIELDS) and isinstance(v, str) and _names_hidden(v, hidden):
            out[key], shared = None, True
        elif key in ACTION_LISTS and isinstance(v, list):
            kept = [x for x in v if not (isinstance(x, str) and _names_hidden(x, hidden))]
            out[key], shared = kept, shared or len(kept) < len(v)
        else:
            out[key], named = _scrub(v, hidden)
            shared = shared or named
    if shared and "shared" in out:
        out["shared"] = True  # an action: it says that its computation is shared
    return out, shared


async def for_caller(store: Store, view: M, caller: Identity) -> M:
    """``view`` as the caller may see it: nothing of workflows they may not see."""
    if caller.admin:  # also anyone while users are off: nothing to hide, nothing to serialize twice
        return view
    hidden = await hidden_workflows(store, view.model_dump_json(), caller)
    if not hidden:
        return view
    data, _ = _scrub(json.loads(view.model_dump_json(by_alias=True)), hidden)
    return type(view).model_validate(data)


async def adopted_from_hidden(store: Store, action: dict[str, Any], job_id: str, caller: Identity) -> bool:
    """Whether ``job_id``, a job of ``action``, was started by an action of a workflow the
    caller may not see and adopted by a takeover (docs/state-machines.md, "Following"):
    its logs are that workflow's. The takeover chain is walked back while the job is the
    earlier action's."""
    current = action
    for _ in range(32):  # a takeover chain longer than this is not one job's
        earlier_id = current.get("takeover_of")
        if not earlier_id:
            return False
        earlier = await acts.get(
            store, earlier_id, {"workflow_id": 1, "job_id": 1, "attempt_log": 1, "takeover_of": 1, "state": 1}
        )
        if earlier is None:
            return False
        jobs = {r.get("job_id") for r in earlier.get("attempt_log") or []} | {earlier.get("job_id")}
        if job_id not in jobs:
            return False
        wf = await wfs.brief(store, earlier["workflow_id"])
        if wf is None or not caller.sees(wf.owner):
            return True
        current = earlier
    return False
