"""Why an action is computed: what changed against the nearest stored lineage of the same
action (docs/planning.md, "Why an action is computed").

The same action is the one of the same name and id in an earlier workflow of the same
name (and owner, when users are on); the nearest is the newest of the last
``EARLIER_WORKFLOWS`` such workflows that has it. Its lineage is the one stored with its
dataset, compared field by field with the new one (``shared.lineage_diff``). The cost is
bounded: one read of the earlier workflows (an equality on the indexed ``name``), then,
per earlier workflow until every computed action has its match (usually one), one read
of the computed actions and their parents there by ``_id`` (a thousand ids a read), and
one batched read of their datasets by ``_id``. Submitting stores the answer on each
computed action (``miss``); the dry run answers it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from shared.lineage_diff import PARENT, Change, changes
from shared.planning import PlannedAction
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.workflow_spec import ActionId

EARLIER_WORKFLOWS = 3
NEVER = "never computed before"
# An explanation names this many changes in words; the list has them all.
NAMED = 4


@dataclass(frozen=True)
class Against:
    """The earlier action compared with, and what its dataset is now."""

    workflow: str
    action: str
    hash: str
    state: str | None  # its dataset's state now (None: no dataset, an unmanaged output)


@dataclass(frozen=True)
class Miss:
    summary: str
    changes: list[Change] = field(default_factory=list)
    against: Against | None = None

    def may_be_cut_off(self, h: str) -> bool:
        """Whether early cutoff looks at the start of the action computed for this miss
        (``h``: its lineage hash; docs/planning.md, "Early cutoff"): one computed because a
        parent changed, or computed again in its own lineage, an output gone since (one cut
        off before: it never made its own). Never computed before: no earlier lineage to
        cut it off. Asked once, at planning: the action records the answer
        (``cutoff_candidate``), which the READY event's payload and the claims read, so the
        other starts pay no read for it."""
        if any(c.field == PARENT for c in self.changes):
            return True
        return not self.changes and self.against is not None and self.against.hash == h

    def stored(self) -> dict[str, Any] | None:
        """As kept on the action: None for "never computed before", the commonest, since
        on nx-27017 a sub-document on each of thousands of actions slows their insert by a
        tenth, a null does not (``Miss.of``)."""
        return None if self.against is None and self.summary == NEVER else self.document()

    @classmethod
    def of(cls, stored: dict[str, Any] | None) -> Miss:
        if stored is None:
            return cls(NEVER)
        against = stored.get("against")
        return cls(
            stored["summary"], [Change(**c) for c in stored.get("changes", [])], Against(**against) if against else None
        )

    def document(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "changes": [asdict(c) for c in self.changes],
            "against": asdict(self.against) if self.against else None,
        }


def _same_lineage(p: PlannedAction, against: Against) -> str:
    where = f"same lineage as in {against.workflow}"
    if p.reason == "forced":
        return f"{where}: forceComputation"
    if p.reason == "unmanaged":
        return f"{where}: unmanaged, always computed"
    return f"{where}: its output is {against.state or 'gone'} now"


def miss_of(
    p: PlannedAction,
    hashes: dict[ActionId, str],
    earlier: dict[str, Any] | None,
    earlier_hashes: dict[ActionId, str],
    dataset: dict[str, Any] | None,
) -> Miss:
    """Why ``p`` is computed, against ``earlier`` (the same action's document in an earlier
    workflow, whose actions' hashes are ``earlier_hashes``; None: there is none) and its
    dataset as read now."""
    if earlier is None:
        return Miss(NEVER)
    against = Against(earlier["workflow_id"], earlier["_id"], earlier["hash"], dataset["state"] if dataset else None)
    old = (dataset or {}).get("lineage")
    if old is None:
        if earlier["hash"] == p.hash:
            return Miss(_same_lineage(p, against), against=against)
        return Miss(f"computed before in {against.workflow}, but no lineage of it is stored", against=against)
    old_parents = {str(q): earlier_hashes[q] for q in earlier.get("parent_local_ids", []) if q in earlier_hashes}
    new_parents = {str(q): hashes[q] for q in p.spec.parents}
    found = changes(old, p.lineage, old_parents, new_parents)
    if not found:
        if earlier["hash"] == p.hash:
            return Miss(_same_lineage(p, against), against=against)
        return Miss(f"its hash differs from {against.workflow}'s for no field (the hash's version)", against=against)
    named = "; ".join(c.describe() for c in found[:NAMED])
    more = f" and {len(found) - NAMED} more" if len(found) > NAMED else ""
    return Miss(f"{named}{more} (since {against.workflow})", found, against)


CHUNK = 1000  # ids per read ($in on _id is index-served)


async def _actions(store: Store, ids: list[str], fields: dict[str, int]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), CHUNK):
        out.update({d["_id"]: d for d in await acts.get_many(store, ids[i : i + CHUNK], fields)})
    return out


async def explain(
    store: Store,
    name: str,
    owner: str | None,
    planned: dict[ActionId, PlannedAction],
    hashes: dict[ActionId, str],
    *,
    before: float,
    exclude: str | None = None,
) -> dict[ActionId, Miss]:
    """Why each computed action of ``planned`` (a workflow named ``name`` of ``owner``,
    created at ``before``; ``exclude``: its own id) is computed. An earlier workflow's
    actions are read by id (``<workflow id>.<local id>``): only the computed ones and
    their parents, so the cost follows what is computed, not the workflow's size."""
    todo = {aid: p for aid, p in planned.items() if p.computed}
    if not todo:
        return {}
    nearest: dict[ActionId, tuple[dict[str, Any], dict[ActionId, str]]] = {}
    fields = {"workflow_id": 1, "local_id": 1, "name": 1, "hash": 1, "parent_local_ids": 1}
    for wf_id in await wfs.earlier(store, name, owner, before, EARLIER_WORKFLOWS + 1):
        if wf_id == exclude:
            continue
        left = [aid for aid in todo if aid not in nearest]
        wanted = {*left, *(q for aid in left for q in todo[aid].spec.parents)}
        found = await _actions(store, [f"{wf_id}.{aid}" for aid in wanted], fields)
        # Parents it had then that it has no more: their hashes too, to name them.
        gone = {f"{wf_id}.{q}" for d in found.values() for q in d.get("parent_local_ids", [])} - set(found)
        found.update(await _actions(store, sorted(gone), fields) if gone else {})
        their_hashes = {d["local_id"]: d["hash"] for d in found.values()}
        for d in found.values():
            aid = d["local_id"]
            if aid in left and d.get("name") == todo[aid].spec.name:
                nearest[aid] = (d, their_hashes)
        if len(nearest) == len(todo):
            break
    datasets = await ds.get_many(store, {d["hash"] for d, _ in nearest.values()}, {"lineage": 1, "state": 1})
    out: dict[ActionId, Miss] = {}
    for aid, p in todo.items():
        earlier, their_hashes = nearest.get(aid, (None, {}))
        out[aid] = miss_of(p, hashes, earlier, their_hashes, datasets.get(earlier["hash"]) if earlier else None)
    return out
