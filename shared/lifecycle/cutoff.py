"""Early cutoff (docs/planning.md, "Early cutoff"): a parent computed under a new key whose
output is byte-identical to an earlier lineage's lets its children reuse what that
lineage's children made.

At a commit, ``twin_of`` names the earlier lineage of the same action (the one its miss
was explained against) when its recorded full checksum equals the new output's. At a
child's claim, ``find`` swaps each parent's hash for its twin's in the child's lineage and
looks the result up (``reusable``): a stored dataset of that lineage whose bytes verify at the checksum
level is what the child reuses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shared.hashing import lineage_hash
from shared.lifecycle.claims import Claim, meaning
from shared.lifecycle.cutoff_candidates import may_stand_in, stable, stand_in
from shared.states import DatasetState
from shared.storage import Storage
from shared.storage.verification import verify
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.workflow_spec import ORDER_INSENSITIVE

TWINNABLE = (DatasetState.STORED, DatasetState.LEAF)


async def twin_of(store: Store, action: dict[str, Any], checksum: str | None) -> dict[str, Any] | None:
    """The earlier lineage of ``action`` whose output's full checksum is ``checksum``, or None."""
    miss = action.get("miss") or {}
    against = miss.get("against") or {}
    h = against.get("hash")
    if checksum is None or not h or h == action["hash"]:
        return None
    # Whatever gave it a new key (an input's fingerprint, its folder, its definition, a
    # cacheVersion, a parent): the same bytes mean the same inputs for its children, whose
    # own definitions the swap at their claim keeps (so a child whose own key changed too,
    # a workflow's cacheVersion, finds no twin lineage and computes).
    doc = await ds.get(store, h)
    if doc is None or doc["state"] not in TWINNABLE or doc.get("checksum") != checksum or not stable(doc):
        return None
    return {"hash": h, "workflow": against.get("workflow")}


@dataclass(frozen=True)
class Cutoff:
    """What a child reuses instead of computing: the dataset ``hash`` at ``path``."""

    hash: str
    path: str
    reason: str
    saved_seconds: float  # the mean compute time of the output reused (the history statistics')


async def reusable(store: Store, storage: Storage, action: dict[str, Any]) -> Cutoff | None:
    """The stored dataset ``action`` may reuse because a parent's output has a twin."""
    if not action.get("managed") or action.get("force") or not action.get("cutoff_candidate"):
        return None
    own = await ds.get(store, action["hash"])
    lineage = (own or {}).get("lineage")
    if not lineage or not lineage.get("parents"):
        return None
    # A parent's twin is on its dataset (computed, or reused in a later workflow) or, for a
    # parent cut off in this workflow (whose own dataset was never made), on its action.
    ids = [f"{action['workflow_id']}.{p}" for p in action.get("parent_local_ids", [])]
    docs = await acts.get_many(store, ids, {"hash": 1, "local_id": 1, "twin": 1, "miss": 1})
    named = {d["hash"]: d["local_id"] for d in docs}
    twins = {d["hash"]: {**d["twin"], "workflow": _against(d)} for d in docs if d.get("twin")}
    stored = await ds.get_many(store, set(lineage["parents"]) - set(twins), {"twin": 1})
    twins.update({h: d["twin"] for h, d in stored.items() if d.get("twin")})
    if not twins:
        return None
    swapped = [twins[h]["hash"] if h in twins else h for h in lineage["parents"]]
    if json.loads(lineage["definition"]).get("type") in ORDER_INSENSITIVE:
        swapped.sort()
    alt = {"definition": lineage["definition"], "parents": swapped}
    h = lineage_hash(alt)
    doc = await ds.get(store, h)
    if (twin := stand_in(doc)) is not None:
        # That lineage's action was itself cut off (its dataset never made): its twin stands in.
        h, doc = twin, await ds.get(store, twin)
        alt = (doc or {}).get("lineage") or alt
    if meaning(doc, alt).claim is not Claim.REUSE or not may_stand_in(doc):
        return None
    assert doc is not None
    if not (await verify(storage, doc, "checksum")).ok:
        return None
    which = next(h for h in lineage["parents"] if h in twins)
    parent, workflow = named.get(which, which[:12]), twins[which].get("workflow") or "an earlier workflow"
    reason = f"early cutoff: parent {parent}'s output is identical to {workflow}'s"
    return Cutoff(h, doc["path"], reason, ds.mean_seconds(doc) or 0.0)


def _against(action: dict[str, Any]) -> str | None:
    """The earlier workflow an action's miss was explained against."""
    return ((action.get("miss") or {}).get("against") or {}).get("workflow")
