"""Submitting a workflow: check it against this installation, plan reuse, write it.

Order of writes: the workflow document (PLANNING) first, then dataset claims and
producers, then the actions, then RUNNING. If anything fails half-way, what was written
is undone before the error is returned; if the process dies half-way, the planning sweep
undoes it later. A workflow rejected by validation writes nothing at all.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
import uuid
from typing import Any

from shared.config import Settings
from shared.hashing import workflow_hashes
from shared.planning import PlannedAction, plan
from shared.runtime import Context
from shared.states import DATASET_REUSABLE, ActionState, DatasetState, WorkflowState
from shared.storage import Storage
from shared.storage.base import FolderTooLarge
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.ticker import cancel_all
from shared.workflow_spec import ActionId, ActionSpec, Violation, WorkflowSpec

log = logging.getLogger(__name__)
A, D, W = ActionState, DatasetState, WorkflowState
BY = "workflow_manager"
# Distinct last-use instants of the datasets one workflow computes, in plan order. Wider
# than 10 us: nx-27017 keeps a float set by an update to 15 significant digits (10 us at
# today's epoch), and the order must survive that.
USE_SPACING = 1e-4


async def resolve_paths(
    actions: list[tuple[int, ActionSpec]], settings: Settings, storage: Storage, supported: frozenset
) -> tuple[dict, list[Violation]]:
    """Where each action's folder and unmanaged output are in the storage's namespace
    (local filesystem or HDFS); every path from a request must stay inside the roots the
    operator allowed. ``actions`` are (position in the submitted list, action)."""
    out: dict[ActionId, dict[str, str]] = {}
    violations: list[Violation] = []
    action_roots, output_roots = settings.action_root_list(), settings.output_root_list()
    checked: dict[str, tuple[str, str | None]] = {}  # folder as given -> (normalized, problem)
    for i, a in actions:

        def bad(field: str, message: str, i: int = i, a: ActionSpec = a) -> None:
            violations.append(Violation(loc=f"actions[{i}].{field}", actionId=a.id, field=field, message=message))

        paths: dict[str, str] = {}
        if a.type not in supported:
            bad("type", f"{a.type.value} actions are not supported by this executor")
        if a.actionFolder:
            if a.actionFolder not in checked:  # thousands of actions usually share a few folders
                folder, problem = storage.normalize(action_roots[0], a.actionFolder), None
                if not storage.inside(folder, action_roots):
                    problem = f"actionFolder must be inside {', '.join(action_roots)}"
                elif not await storage.is_dir(folder):
                    problem = f"actionFolder {a.actionFolder!r} is not a directory"
                checked[a.actionFolder] = (folder, problem)
            folder, problem = checked[a.actionFolder]
            if problem:
                bad("actionFolder", problem)
            paths["action_folder_path"] = folder
        if a.outputPath:
            target = storage.normalize(output_roots[0], a.outputPath)
            if not storage.inside(target, output_roots) or target in output_roots:
                bad("outputPath", f"outputPath must be inside {', '.join(output_roots)}")
            paths["output_path"] = target
        out[a.id] = paths
    return out, violations


async def fingerprints(
    actions: list[tuple[int, ActionSpec]], paths: dict, storage: Storage
) -> tuple[dict[ActionId, str], list[Violation]]:
    """The fingerprint of each action folder's files (part of the lineage hash), computed
    once per folder; a folder too large to fingerprint is a violation of every action
    that names it."""
    by_folder: dict[str, str | FolderTooLarge] = {}
    out: dict[ActionId, str] = {}
    violations: list[Violation] = []
    for i, a in actions:
        folder = paths.get(a.id, {}).get("action_folder_path")
        if not folder:
            continue
        if folder not in by_folder:
            try:
                by_folder[folder] = await storage.fingerprint(folder)
            except FolderTooLarge as exc:
                by_folder[folder] = exc
        found = by_folder[folder]
        if isinstance(found, FolderTooLarge):
            violations.append(
                Violation(loc=f"actions[{i}].actionFolder", actionId=a.id, field="actionFolder", message=str(found))
            )
        else:
            out[a.id] = found
    return out, violations


class StoreGate:
    """The planner's view of datasets: claims are taken in MongoDB, atomically.

    The documents of every hash the workflow may need are read in one batch first
    (``known``); a hash absent from it is computed without another read, and only a
    stored one costs the atomic claim."""

    def __init__(self, ctx: Context, workflow_id: str, known: dict[str, dict[str, Any]]) -> None:
        self.ctx = ctx
        self.workflow_id = workflow_id
        self.known = known
        self.claimed: list[str] = []

    def action_id(self, local: ActionId) -> str:
        return f"{self.workflow_id}.{local}"

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        if h not in self.known or not await self.present(self.known[h]):
            return False
        ok = await ds.try_reuse(self.ctx.store, h, lineage, [self.action_id(c) for c in claimants], leaf, BY)
        if ok:
            self.claimed.append(h)
        return ok

    async def present(self, doc: dict[str, Any]) -> bool:
        """A missing dataset is a miss: before a stored dataset is promised to a plan, its
        files must be there with the size recorded when it was committed. One found
        missing or changed is marked LOST (and its leftover removed) and computed again."""
        if doc["state"] not in DATASET_REUSABLE or doc["state"] == D.PROCESSING:
            return True  # nothing to verify: not reusable, or already being deleted (a miss anyway)
        storage = self.ctx.storage
        found = await storage.size(doc["path"])  # one stat (local) or two requests (WebHDFS)
        if found is not None and (doc.get("size") is None or found == doc["size"]):
            return True
        log.warning("dataset %s: %s at %s (recorded %s B); marking it lost", doc["_id"],
                    "missing" if found is None else f"{found} B", doc["path"], doc.get("size"))  # fmt: skip
        if found is not None and storage.inside(doc["path"], [storage.root]):
            await storage.delete(doc["path"])  # changed under the managed root: not to be read again
        lost = await self.ctx.mover(BY).dataset(
            doc["_id"], D.LOST, sources=[doc["state"]], set={"found_size": found, "lost_at": time.time()}, note="lost"
        )
        if lost is not None:
            self.known[doc["_id"]] = lost
        return False


class PlanningLost(Exception):
    """The planning sweep judged this planner dead and undid its workflow: nothing was kept."""


class PlanningLease:
    """A planner's heartbeat on its PLANNING workflow: the sweep undoes a workflow only
    once its lease has not been renewed for ``stale_after`` seconds (its planner died)."""

    def __init__(self, ctx: Context, wf_id: str, token: str) -> None:
        self.ctx, self.wf_id, self.token = ctx, wf_id, token
        self.every = max(0.2, ctx.settings.stale_after / 4)
        self.task: asyncio.Task | None = None

    async def renew(self) -> bool:
        return await wfs.renew_planning_lease(self.ctx.store, self.wf_id, self.token, time.time())

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                if not await self.renew():
                    return
            except Exception:
                log.warning("could not renew the planning lease of %s; retrying", self.wf_id, exc_info=True)

    async def __aenter__(self) -> PlanningLease:
        self.task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.task is not None:
            await cancel_all([self.task])


async def prepare_datasets(
    ctx: Context, gate: StoreGate, planned: dict[ActionId, PlannedAction], output_of: dict[ActionId, str]
) -> None:
    """Record every computed managed action as its dataset's producer: datasets seen for
    the first time in one batch, the others (and any a concurrent planner created in the
    meantime) one guarded write each. Each is used at its own instant, in plan order,
    as the decision algorithms (and the simulator) order last uses."""
    now = time.time()
    used_at: dict[ActionId, float] = {}
    new: dict[str, dict[str, Any]] = {}
    one_by_one: list[ActionId] = []
    for aid, p in planned.items():
        if not (p.computed and p.spec.isManaged):
            continue
        used_at[aid] = now + len(used_at) * USE_SPACING
        if p.hash in gate.known or p.hash in new:
            one_by_one.append(aid)  # it exists, or this workflow computes it twice (identical branches)
        else:
            readers = [gate.action_id(c) for c in p.children if planned[c].computed]
            new[p.hash] = ds.new_document(
                p.hash, p.lineage, output_of[aid], gate.action_id(aid), p.leaf, BY, readers, used_at[aid]
            )
    existed = await ds.create_many(ctx.store, list(new.values()))
    one_by_one += [aid for aid in used_at if planned[aid].hash in existed and new[planned[aid].hash]["producers"] ==
                   [gate.action_id(aid)]]  # fmt: skip
    for aid in one_by_one:
        p = planned[aid]
        readers = [gate.action_id(c) for c in p.children if planned[c].computed]
        await ds.prepare_compute(
            ctx.store, p.hash, p.lineage, output_of[aid], gate.action_id(aid), p.leaf, BY, readers, used_at[aid]
        )


async def submit(ctx: Context, body: dict[str, Any], spec: WorkflowSpec, paths: dict, prints: dict) -> dict[str, Any]:
    """Plan and write a validated workflow. Raises ``PlanningLost`` if the planning sweep
    took the workflow away (this planner stalled past ``stale_after``): nothing is kept."""
    store = ctx.store
    now = time.time()
    wf_id = f"wf-{uuid.uuid4().hex[:12]}"
    token = uuid.uuid4().hex
    hashes = workflow_hashes(spec, prints)
    definition = {
        "_id": wf_id,
        "body": body,
        "action_ids": [f"{wf_id}.{a.id}" for a in spec.actions],
        # What its planning may claim or produce: what an undo releases, read by _id.
        "dataset_hashes": sorted(set(hashes.values())),
        "created_at": now,
    }
    await wfs.insert(store, wfs.new_document(wf_id, spec.name, len(spec.actions), token, now, BY), definition)
    async with PlanningLease(ctx, wf_id, token) as lease:
        try:
            gate = StoreGate(ctx, wf_id, await ds.get_many(store, list(hashes.values())))
            planned = await plan(spec, hashes, gate, prints)
            output_of = {
                aid: paths.get(aid, {}).get("output_path") or posixpath.join(ctx.storage.root, p.hash)
                for aid, p in planned.items()
            }
            await prepare_datasets(ctx, gate, planned, output_of)
            docs = [
                acts.new_document(
                    wf_id, planned[s.id], planned, paths.get(s.id, {}), output_of, now,
                    ds.mean_seconds(gate.known.get(planned[s.id].hash)) or 0.0, BY,
                )
                for s in spec.actions
            ]  # fmt: skip
            # Actions become claimable by the action managers once inserted: insert them only
            # while this planner provably holds the workflow, so the sweep cannot undo it under them.
            if not await lease.renew():
                raise PlanningLost(wf_id)
            await acts.insert_many(store, docs)
        except Exception as exc:
            if not isinstance(exc, PlanningLost):
                log.exception("planning %s failed; undoing it", wf_id)
            await undo(ctx, wf_id, "planning failed", where={"planner": token})
            await release(ctx, wf_id, "planning failed")
            raise
        counts = {
            "compute": sum(p.computed for p in planned.values()),
            "reuse": sum(not p.computed for p in planned.values()),
        }
        final = W.RUNNING if counts["compute"] else W.SUCCEEDED
        extra: dict[str, Any] = {
            "counts": counts,
            # What the submission statistics count (an effect of this move).
            "planned": {
                "actions_reused": sum(d["state"] == A.REUSED for d in docs),
                "actions_skipped": sum(d["state"] == A.SKIPPED for d in docs),
                "saved_seconds": sum(d["saved_seconds"] for d in docs),
            },
        }
        if final == W.SUCCEEDED:
            extra["finished_at"] = time.time()
        # Its effects: WORKFLOW_SUBMITTED (and WORKFLOW_FINISHED when nothing is computed),
        # and the submission statistics.
        wf = await ctx.mover(BY).workflow(wf_id, final, sources=[W.PLANNING], where={"planner": token}, set=extra)
    if wf is None:
        # The sweep undid it between our last renewal and now: take back what we wrote.
        await release(ctx, wf_id, "planning interrupted")
        raise PlanningLost(wf_id)
    await ctx.mover(BY).arrived("action", docs)  # the READY ones wake the action managers
    return {"workflow": wf, "actions": docs}


async def undo(ctx: Context, wf_id: str, reason: str, where: dict[str, Any]) -> bool:
    """End a PLANNING workflow FAILED, then release what its planning took. The guarded
    transition comes first: only its winner releases, so a planner that finished in the
    meantime (PLANNING -> RUNNING) keeps everything. ``where`` narrows the guard (the
    planner's token, or the stale lease value the sweep saw)."""
    won = await ctx.mover(BY).workflow(
        wf_id,
        W.FAILED,
        sources=[W.PLANNING],
        where=where,
        set={"error": reason, "finished_at": time.time()},
        note=reason,
    )
    if won is None:
        return False
    await release(ctx, wf_id, reason)
    return True


async def release(ctx: Context, wf_id: str, reason: str) -> None:
    """Release every claim and producer mark of a FAILED workflow's planning and delete its
    actions; idempotent, so the sweep and a late planner may both run it."""
    store = ctx.store
    wf = await wfs.get(store, wf_id, {"state": 1})
    planned = await wfs.definitions(store).find_one({"_id": wf_id}, {"action_ids": 1, "dataset_hashes": 1})
    if wf is None or wf["state"] != W.FAILED or planned is None:
        return
    mine = set(planned["action_ids"])
    held: dict[str, set[str]] = {}
    produced: set[str] = set()
    for h, d in (await ds.get_many(store, planned["dataset_hashes"])).items():
        if ids := mine & (set(d.get("claims", [])) | set(d.get("producers", []))):
            held[h] = ids
        if mine & set(d.get("producers", [])):
            produced.add(h)
    await ds.release(store, held, produced, BY, reason)
    await acts.delete_workflow(store, wf_id)
