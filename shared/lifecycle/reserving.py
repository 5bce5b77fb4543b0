"""An attempt's room in the storage budget (docs/operations.md, "Storage budget").

Before an attempt of a managed action starts, the bytes its output is expected to take
are reserved (``shared.store.budget``): what it declares (``expectedBytes``), else the
size its lineage's dataset had when it was last computed, else the size of the last
output of an action of the same name, else the size of the largest dataset it reads (its
inputs: an output is taken to weigh what its largest input weighs); nothing is known (a
root never run under its name): nothing is reserved. No room:
the action stays READY, ``held`` says why, and the decision service frees for it. The
reservation is dropped when the attempt ends, whichever way (``settle``, applied by the
Mover to every move out of PROCESSING/SUBMITTED/RUNNING): at commit the dataset's real
size was recorded just before (docs/state-machines.md, "Action").

The expectation is worked out when the workflow is planned (``planned``: the planner has
read every dataset of the workflow already, and the remembered sizes of its actions' names
take one more read) and written into the action document (``reserve_bytes``), so a start
reads nothing for it; the READY event carries it, so the claim on that event reads nothing
either. ``named_bytes`` (what its name remembered then) spares the commit the write of a
size its name remembers already (or of 0 where it remembered nothing: the same
reservation). A document without ``reserve_bytes`` (made computed after its planning: a
follower taking over), or whose planning knew nothing (``reserve_bytes`` None: a first
run), is worked out at its start, as the rule says: by then its name may have learned a
size (an earlier workflow's action of that name committed), and its inputs are committed.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from shared.states import ACTION_IN_FLIGHT, ActionState
from shared.store import Store, budget
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store.actions import ActionDoc

log = logging.getLogger(__name__)
A = ActionState
# What the reservation reads of an action.
FIELDS = {"managed": 1, "expected_bytes": 1, "reserve_bytes": 1, "hash": 1, "name": 1, "claims": 1, "input_bytes": 1}
HELD_REASON = "storage_budget"


def expectation(declared: int | None, lineage: int | None, named: int | None) -> int | None:
    """The rule: what it declares, else its lineage's last size, else its name's; None: unknown."""
    return next((int(n) for n in (declared, lineage, named) if n is not None), None)


async def planned(store: Store, docs: list[ActionDoc], known: dict[str, dict[str, Any]]) -> None:
    """Write into each computed managed action of a plan what its start will reserve
    (``reserve_bytes``) and what its name remembers now (``named_bytes``): one read for
    the whole workflow. ``known``: its datasets, as the planner read them."""
    mine = [d for d in docs if d.get("managed") and d.get("decision") == "compute"]
    named = await budget.expected_by_names(store, {d["name"] for d in mine if d.get("name")}) if mine else {}
    for d in mine:
        d["named_bytes"] = named.get(d["name"])
        lineage = (known.get(d["hash"]) or {}).get("size")
        d["reserve_bytes"] = expectation(d.get("expected_bytes"), lineage, d["named_bytes"])
        # Its largest input so far: what its reused parents weigh. Each computed parent raises it
        # in the very write that strikes it off (Outcomes.ready_children), so a first run's
        # start knows it without a read (``start_bytes``).
        d["input_bytes"] = max((int((known.get(h) or {}).get("size") or 0) for h in d.get("claims") or []), default=0)


def start_bytes(action: ActionDoc) -> int | None:
    """What the start of a READY ``action`` reserves, known without a read: the planning's
    expectation, else (a first run) the size of the largest dataset it reads, every
    computed parent committed by now; None: to be worked out at its start (an action
    planned before its inputs were tracked, one re-planned or taking over)."""
    if action.get("reserve_bytes") is not None:
        return int(action["reserve_bytes"])
    if action.get("input_bytes") is not None:
        return int(action["input_bytes"])
    return None


async def expected_bytes(store: Store, action: ActionDoc) -> int:
    """What ``action``'s output is expected to take; 0 if unknown or unmanaged."""
    if not action.get("managed"):
        return 0  # an unmanaged output lies outside the managed root and its budget
    if action.get("reserve_bytes") is not None:  # worked out at its planning
        return int(action["reserve_bytes"])
    declared = action.get("expected_bytes")
    if declared is not None:
        return int(declared)
    doc = await ds.get(store, action["hash"]) if action.get("hash") else None
    if doc is not None and doc.get("size") is not None:
        return int(doc["size"])
    named = await budget.expected_by_name(store, action.get("name") or "")
    if named is not None:
        return named
    if action.get("input_bytes") is not None:  # raised by each computed parent's end
        return int(action["input_bytes"])
    return await largest_input(store, action)


async def largest_input(store: Store, action: ActionDoc) -> int:
    """The size of the largest managed dataset ``action`` reads (committed by its start):
    what a first run of its name is taken to write. Without it, the first runs of a new
    chain's actions reserved nothing and wrote past the budget before the decision service
    could free room (docs/operations.md, "Storage budget"). 0 for a root."""
    claims = action.get("claims") or []
    if not claims:
        return 0
    found = await ds.get_many(store, claims, {"size": 1})
    return max((int(d.get("size") or 0) for d in found.values()), default=0)


async def reserve(store: Store, action: ActionDoc, capacity: int) -> dict[str, Any] | None:
    """What the claim of ``action``'s attempt records of its reservation (``reservation``,
    and ``held`` cleared), or None: no room, the action is marked held and must not start."""
    n = await expected_bytes(store, action)
    if n <= 0:
        return {"reservation": None, "held": None}
    got = await budget.reserve(store, action["_id"], n, capacity)
    if isinstance(got, budget.Refused) and not await room_may_come(store):
        # No attempt in flight will give room back (its claims, its reservation), nothing can
        # be evicted and nothing is being deleted: held, it would wait forever. It starts past
        # the budget, said in the log (docs/operations.md, "Storage budget").
        log.warning("%s: starts past the storage budget: %s; nothing can free room", action["_id"], got.message())
        got = await budget.reserve(store, action["_id"], n, got.held + n)
    if isinstance(got, budget.Refused):
        log.info("%s: held READY: %s", action["_id"], got.message())
        held = {"reason": HELD_REASON, "message": got.message(), "bytes": n, "at": time.time()}
        await acts.hold(store, action["_id"], held)
        return None
    return {"reservation": {"key": got, "bytes": n}, "held": None}


async def room_may_come(store: Store) -> bool:
    """Whether waiting can give an action room: an attempt in flight (its end releases its
    reservation and its claims), a dataset the decision service may evict, or one whose
    deletion is under way (its bytes still count as held until it is gone)."""
    return await acts.any_in_flight(store) or await ds.any_deletable(store) or await ds.any_being_freed(store)


async def undo(store: Store, fields: dict[str, Any]) -> None:
    """A reservation made for a claim that lost its race."""
    if fields.get("reservation"):
        await budget.release(store, fields["reservation"]["key"])


async def committed(store: Store, action: ActionDoc) -> None:
    """Its output is in the catalogue with its real size: the reservation is settled now,
    before its children are readied (else they would find its bytes counted twice)."""
    if action.get("reservation"):
        await budget.release(store, action["reservation"]["key"])


async def settle(store: Store, docs: list[dict[str, Any]], source: str | None, target: str) -> None:
    """Actions moved from ``source`` to ``target``: an attempt that ended drops its
    reservation; a managed output committed teaches the next one of its name its size."""
    if source not in ACTION_IN_FLIGHT or target in ACTION_IN_FLIGHT:
        return
    for d in docs:
        if d.get("reservation"):
            await budget.release(store, d["reservation"]["key"])
        if target == A.FINISHED and d.get("managed") and d.get("size") is not None and d.get("name"):
            # A name that remembered this size when the action was planned keeps it unwritten;
            # so does one that remembered nothing when the size is 0 (either way nothing is
            # reserved: a no-op's empty output costs no write).
            if "named_bytes" not in d or int(d["named_bytes"] or 0) != int(d["size"]):
                await budget.remember_size(store, d["name"], int(d["size"]))


async def sweep(store: Store, older_than: float) -> int:
    """Drop reservations older than ``older_than`` whose action is no longer in flight with
    them (an action manager died between reserving and claiming, or a move's settle was
    lost): how many."""
    dropped = 0
    for key, hold in (await budget.holds(store)).items():
        if float(hold.get("at") or 0) > older_than:
            continue
        action = await acts.get(store, str(hold.get("action")), {"state": 1, "reservation": 1})
        mine = action and action["state"] in ACTION_IN_FLIGHT and (action.get("reservation") or {}).get("key") == key
        if not mine and await budget.release(store, key):
            dropped += 1
    return dropped
