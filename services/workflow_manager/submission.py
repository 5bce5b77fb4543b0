"""Submitting a workflow: check it against this installation, plan reuse, write it.

Order of writes: the workflow document (PLANNING) first, then dataset claims and
producers, then the actions, then RUNNING. If anything fails half-way, what was written
is undone before the error is returned; if the process dies half-way, the planning sweep
undoes it later. A workflow rejected by validation writes nothing at all.
"""

from __future__ import annotations

import logging
import posixpath
import secrets
import time
import uuid
from typing import Any

from shared.config import Settings
from shared.events import Event, EventType, Subject
from shared.hashing import workflow_hashes
from shared.planning import PlannedAction, plan
from shared.runtime import Context
from shared.states import WORKFLOW_TRANSITIONS, ActionState, WorkflowState
from shared.storage import Storage
from shared.store import datasets as ds
from shared.store import history
from shared.store.transitions import history_entry, transition
from shared.workflow_spec import ActionId, ActionSpec, Violation, WorkflowSpec, id_order

log = logging.getLogger(__name__)
A, W = ActionState, WorkflowState
BY = "workflow_manager"


async def resolve_paths(
    actions: list[tuple[int, ActionSpec]], settings: Settings, storage: Storage, supported: frozenset
) -> tuple[dict, list[Violation]]:
    """Where each action's folder and unmanaged output are in the storage's namespace
    (local filesystem or HDFS); every path from a request must stay inside the roots the
    operator allowed. ``actions`` are (position in the submitted list, action)."""
    out: dict[ActionId, dict[str, str]] = {}
    violations: list[Violation] = []
    action_roots, output_roots = settings.action_root_list(), settings.output_root_list()
    for i, a in actions:

        def bad(field: str, message: str, i: int = i, a: ActionSpec = a) -> None:
            violations.append(Violation(loc=f"actions[{i}].{field}", actionId=a.id, field=field, message=message))

        paths: dict[str, str] = {}
        if a.type not in supported:
            bad("type", f"{a.type.value} actions are not supported by this executor")
        if a.actionFolder:
            folder = storage.normalize(action_roots[0], a.actionFolder)
            if not storage.inside(folder, action_roots):
                bad("actionFolder", f"actionFolder must be inside {', '.join(action_roots)}")
            elif not await storage.is_dir(folder):
                bad("actionFolder", f"actionFolder {a.actionFolder!r} is not a directory")
            paths["action_folder_path"] = folder
        if a.outputPath:
            target = storage.normalize(output_roots[0], a.outputPath)
            if not storage.inside(target, output_roots) or target in output_roots:
                bad("outputPath", f"outputPath must be inside {', '.join(output_roots)}")
            paths["output_path"] = target
        out[a.id] = paths
    return out, violations


async def fingerprints(spec: WorkflowSpec, paths: dict, storage: Storage) -> dict[ActionId, str]:
    """The fingerprint of each action folder's files, computed once per folder."""
    by_folder: dict[str, str] = {}
    out: dict[ActionId, str] = {}
    for a in spec.actions:
        folder = paths.get(a.id, {}).get("action_folder_path")
        if folder:
            if folder not in by_folder:
                by_folder[folder] = await storage.fingerprint(folder)
            out[a.id] = by_folder[folder]
    return out


class StoreGate:
    """The planner's view of datasets: claims are taken in MongoDB, atomically."""

    def __init__(self, ctx: Context, workflow_id: str) -> None:
        self.ctx = ctx
        self.workflow_id = workflow_id
        self.claimed: list[str] = []

    def action_id(self, local: ActionId) -> str:
        return f"{self.workflow_id}.{local}"

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        ok = await ds.try_reuse(self.ctx.store, h, lineage, [self.action_id(c) for c in claimants], leaf, BY)
        if ok:
            self.claimed.append(h)
        return ok


def action_doc(
    wf_id: str,
    p: PlannedAction,
    planned: dict[ActionId, PlannedAction],
    paths: dict,
    output_of: dict[ActionId, str],
    now: float,
    saved: dict[str, float],
) -> dict[str, Any]:
    a: ActionSpec = p.spec
    aid = f"{wf_id}.{a.id}"
    parents = sorted(a.parents, key=id_order)
    computed = p.computed
    pending = [f"{wf_id}.{q}" for q in parents if planned[q].computed] if computed else []
    state = (A.WAITING if pending else A.READY) if computed else (A.REUSED if p.reason == "stored" else A.SKIPPED)
    doc: dict[str, Any] = {
        "_id": aid,
        "workflow_id": wf_id,
        "local_id": a.id,
        "name": a.name,
        "type": a.type.value,
        "definition": a.definition(),
        "hash": p.hash,
        "managed": a.isManaged,
        "force": a.forceComputation,
        "leaf": p.leaf,
        "decision": p.decision,
        "reason": p.reason,
        "output_path": output_of[a.id],
        "parents": [f"{wf_id}.{q}" for q in parents],
        "parent_local_ids": parents,
        "input_paths": [output_of[q] for q in parents],
        "children": [f"{wf_id}.{c}" for c in p.children if planned[c].computed] if computed else [],
        "pending_parents": pending,
        # Every managed parent's dataset, reused or computed here: released when this action ends.
        "claims": [planned[q].hash for q in parents if planned[q].spec.isManaged] if computed else [],
        "state": str(state),
        "history": [history_entry(state, BY, p.reason)],
        "created_at": now,
        "updated_at": now,
        "attempt": 0,
        "submit_errors": 0,
        "secret": secrets.token_urlsafe(18) if computed else None,
        # What not computing it saved: the mean time its dataset took to compute, if known.
        "saved_seconds": 0.0 if computed else saved.get(p.hash, 0.0),
        **paths.get(a.id, {}),
    }
    return doc


async def mean_compute_times(ctx: Context, hashes: list[str]) -> dict[str, float]:
    out = {}
    async for d in ctx.store.datasets.find({"_id": {"$in": hashes}}, {"compute_seconds_total": 1, "compute_count": 1}):
        if d.get("compute_count"):
            out[d["_id"]] = float(d["compute_seconds_total"]) / int(d["compute_count"])
    return out


async def submit(ctx: Context, body: dict[str, Any], spec: WorkflowSpec, paths: dict) -> dict[str, Any]:
    store = ctx.store
    now = time.time()
    wf_id = f"wf-{uuid.uuid4().hex[:12]}"
    await store.workflows.insert_one(
        {
            "_id": wf_id,
            "name": spec.name,
            "state": str(W.PLANNING),
            "definition": body,
            "created_at": now,
            "updated_at": now,
            "history": [history_entry(W.PLANNING, BY)],
            "kill_requested": False,
            "action_ids": [f"{wf_id}.{a.id}" for a in spec.actions],
        }
    )
    gate = StoreGate(ctx, wf_id)
    prepared: list[tuple[str, str]] = []
    try:
        prints = await fingerprints(spec, paths, ctx.storage)
        hashes = workflow_hashes(spec, prints)
        planned = await plan(spec, hashes, gate, prints)
        output_of = {
            aid: paths.get(aid, {}).get("output_path") or posixpath.join(ctx.storage.root, p.hash)
            for aid, p in planned.items()
        }
        for aid, p in planned.items():
            if p.computed and p.spec.isManaged:
                producer = gate.action_id(aid)
                readers = [gate.action_id(c) for c in p.children if planned[c].computed]
                await ds.prepare_compute(store, p.hash, p.lineage, output_of[aid], producer, p.leaf, BY, readers)
                prepared.append((p.hash, producer))
        saved = await mean_compute_times(ctx, [p.hash for p in planned.values() if not p.computed])
        docs = [action_doc(wf_id, planned[s.id], planned, paths, output_of, now, saved) for s in spec.actions]
        await store.actions.insert_many(docs)
    except Exception:
        log.exception("planning %s failed; undoing it", wf_id)
        await undo(ctx, wf_id, "planning failed")
        raise
    counts = {
        "compute": sum(p.computed for p in planned.values()),
        "reuse": sum(not p.computed for p in planned.values()),
    }
    final = W.RUNNING if counts["compute"] else W.SUCCEEDED
    extra: dict[str, Any] = {"counts": counts}
    if final == W.SUCCEEDED:
        extra["finished_at"] = time.time()
    wf = await transition(store.workflows, WORKFLOW_TRANSITIONS, wf_id, final, by=BY, sources=[W.PLANNING], set=extra)
    await history.record(
        store, now, workflows_submitted=1,
        actions_reused=sum(d["state"] == A.REUSED for d in docs),
        actions_skipped=sum(d["state"] == A.SKIPPED for d in docs),
        saved_seconds=sum(d["saved_seconds"] for d in docs),
    )  # fmt: skip
    await ctx.bus.publish(
        Event(type=EventType.WORKFLOW_SUBMITTED, producer=BY, subject=Subject(workflow_id=wf_id), payload=counts)
    )
    for d in docs:
        if d["state"] == A.READY:
            await ctx.bus.publish(
                Event(
                    type=EventType.ACTION_READY,
                    producer=BY,
                    subject=Subject(workflow_id=wf_id, action_id=d["_id"], dataset_hash=d["hash"]),
                )
            )
    if final == W.SUCCEEDED:
        await ctx.bus.publish(
            Event(
                type=EventType.WORKFLOW_FINISHED,
                producer=BY,
                subject=Subject(workflow_id=wf_id),
                payload={"state": str(final)},
            )
        )
    return {"workflow": wf, "actions": docs}


async def undo(ctx: Context, wf_id: str, reason: str) -> None:
    """Release every claim and producer mark a workflow's planning took; end it FAILED."""
    store = ctx.store
    wf = await store.workflows.find_one({"_id": wf_id}, {"action_ids": 1})
    mine = (wf or {}).get("action_ids", [])
    async for d in store.datasets.find({"$or": [{"claims": {"$in": mine}}, {"producers": {"$in": mine}}]}):
        await store.datasets.update_one({"_id": d["_id"]}, {"$pull": {"claims": {"$in": mine}}})
        for producer in set(d.get("producers", [])) & set(mine):
            await ds.abandon(store, d["_id"], producer, BY, reason)
    await store.actions.delete_many({"workflow_id": wf_id})
    await transition(
        store.workflows,
        WORKFLOW_TRANSITIONS,
        wf_id,
        W.FAILED,
        by=BY,
        sources=[W.PLANNING],
        set={"error": reason, "finished_at": time.time()},
        note=reason,
    )
