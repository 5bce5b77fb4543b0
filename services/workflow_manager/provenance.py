"""A dataset's provenance for ``GET /api/v1/datasets/{hash}``: its lineage, the action
and workflow that produced it, the actions that reused, followed or read it, and its
history.

All of it is read from what planning and ending already record: the dataset document
(lineage, history, ``produced_by`` set at commit, the live ``producers``), and the
actions whose output it is (``hash``, an indexed equality). Readers are found in the
workflows of those actions, as the actions whose parents include one of them.
"""

from __future__ import annotations

from collections.abc import Callable

from services.workflow_manager.views import (
    Consumer,
    DatasetDetail,
    action_link,
    dataset_view,
    history_of,
    lineage_view,
    redacted,
    workflow_of,
)
from shared.store import actions as acts
from shared.store import workflows as wfs
from shared.store.client import Store
from shared.store.records import ActionRecord, DatasetRecord

# The newest actions whose output is the dataset that are looked at, and the workflows
# searched for readers: a dataset reused ten thousand times is shown by its latest uses.
ACTIONS_SHOWN = 100
READER_WORKFLOWS = 20
FIELDS = {"_id": 1, "name": 1, "state": 1, "decision": 1, "reason": 1, "workflow_id": 1, "created_at": 1,
          "follows": 1}  # fmt: skip


async def detail(store: Store, d: DatasetRecord, sees: Callable[[str | None], bool]) -> DatasetDetail:
    """``sees``: whether the caller may see a workflow of this owner (docs/users.md). The
    dataset is shared; the actions and workflows of users the caller may not see are left
    out, so that it tells nothing of them."""
    h = d.id
    same = await acts.with_hash(store, h, FIELDS, ACTIONS_SHOWN)
    computations = [a for a in same if a.decision == "compute"]
    by_id = {a.id: a for a in same}
    producer_id = d.maker
    if producer_id is None:
        producer_id = next((a.id for a in computations if a.state == "FINISHED"), None)
    if producer_id is not None and producer_id not in by_id:
        for a in await acts.records(store, [producer_id], FIELDS):
            by_id[a.id] = a
    related: list[tuple[ActionRecord, str]] = []
    for a in same:
        if a.follows:
            related.append((a, "followed"))
        elif a.decision != "compute" and a.reason == "stored":
            related.append((a, "reused"))
    # Readers: the computed children of the actions that are this dataset, in their workflows.
    searched: set[str] = set()
    for a in same:
        wf_id = a.workflow_id or ""
        if wf_id in searched or len(searched) >= READER_WORKFLOWS:
            continue
        searched.add(wf_id)
        holders = [b.id for b in same if b.workflow_id == wf_id]
        for holder in holders:
            for child in await acts.children_of(store, wf_id, holder, FIELDS):
                if child.decision == "compute":
                    related.append((child, "read"))
    named = {workflow_of(a) for a in d.named_actions}
    found = await wfs.briefs(store, {a.workflow_id or "" for a in [*by_id.values(), *(c for c, _ in related)]} | named)
    workflows = {wf_id: w for wf_id, w in found.items() if sees(w.owner)}
    hidden = len(workflows) < len(found)
    same = [a for a in same if a.workflow_id in workflows]
    # The definition (command, configuration: maybe another user's credentials) is theirs:
    # shown to whom sees the owner of the workflow that committed it, and to whom submitted
    # the identical action themselves (one of their actions has this hash).
    shows_definition = (d.owner is not None and sees(d.owner)) or bool(same) or sees(None)
    computations = [a for a in computations if a.workflow_id in workflows]
    related = [(a, rel) for a, rel in related if a.workflow_id in workflows]
    producer = by_id.get(producer_id) if producer_id else None
    if producer is not None and producer.workflow_id not in workflows:
        producer = None
    # An action of a workflow with two identical actions (one following the other) is found twice.
    unique = {(a.id, rel): a for a, rel in related}
    consumers = [Consumer(**action_link(a, workflows).model_dump(), relation=rel) for (_, rel), a in unique.items()]
    consumers.sort(key=lambda c: -(c.createdAt or 0))
    lineage = d.lineage
    base = redacted(dataset_view(d), set(workflows))
    if producer is not None:
        base.workflow = action_link(producer, workflows).workflow
        base.producedByName = producer.name
    return DatasetDetail(
        **base.model_dump(),
        lineage=lineage_view(lineage) if lineage and shows_definition else None,
        othersActions=hidden or (producer_id is not None and producer is None),
        parents=list((lineage or {}).get("parents", [])),
        producer=action_link(producer, workflows) if producer else None,
        computations=[action_link(a, workflows) for a in computations],
        consumers=consumers,
        history=history_of(d),
    )
