"""Submitting a workflow: check it against this installation, plan reuse, write it.

Order of writes: the workflow document (PLANNING) first, then dataset claims and
producers, then the actions, then RUNNING. If anything fails half-way, what was written
is undone before the error is returned; if the process dies half-way, the planning sweep
undoes it later. A workflow rejected by validation writes nothing at all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import posixpath
import time
import uuid
from typing import Any

from shared import logs
from shared.config import Settings
from shared.executors.base import Executor
from shared.hashing import workflow_hashes
from shared.lifecycle.lost import check_whole
from shared.lifecycle.moves import outcome
from shared.metrics import REUSE_HITS, SAVED_SECONDS
from shared.path_limits import path_problem
from shared.planning import PlannedAction, plan
from shared.runtime import Context
from shared.states import ACTION_LIVE, DATASET_IN_FLIGHT, DATASET_REUSABLE, ActionState, DatasetState, WorkflowState
from shared.storage import Storage
from shared.storage.base import FolderTooLarge
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.ticker import cancel_all
from shared.workflow_spec import ActionId, ActionSpec, Violation, WorkflowSpec, masked_body

log = logging.getLogger(__name__)
# Actions whose claims are asked of the store at once while planning: a resubmission whose
# every action is reused, or follows another workflow's, costs a round trip per action
# (docs/performance.md, "Submitting").
PLANNING_CONCURRENCY = 16
A, D, W = ActionState, DatasetState, WorkflowState
BY = "workflow_manager"
# Distinct last-use instants of the datasets one workflow computes, in plan order. Wider
# than 10 us: nx-27017 keeps a float set by an update to 15 significant digits (10 us at
# today's epoch), and the order must survive that.
USE_SPACING = 1e-4


async def resolve_paths(
    actions: list[tuple[int, ActionSpec]],
    settings: Settings,
    storage: Storage,
    executor: Executor,
    owner: str | None = None,
) -> tuple[dict, list[Violation]]:
    """Where each action's folder and unmanaged output are in the storage's namespace
    (local filesystem or HDFS); every path from a request must stay inside the roots the
    operator allowed (output roots for ``owner``: docs/users.md). ``actions`` are
    (position in the submitted list, action)."""
    out: dict[ActionId, dict[str, str]] = {}
    violations: list[Violation] = []
    action_roots, output_roots = settings.action_root_list(), settings.output_root_list(owner)
    checked: dict[str, tuple[str, str | None]] = {}  # folder as given -> (normalized, problem)
    for i, a in actions:

        def bad(field: str, message: str, i: int = i, a: ActionSpec = a) -> None:
            violations.append(Violation(loc=f"actions[{i}].{field}", actionId=a.id, field=field, message=message))

        paths: dict[str, str] = {}
        if a.type not in executor.supports:
            bad("type", f"{a.type.value} actions are not supported by the {executor.name} executor")
        else:
            for field, why in executor.refusals(a):
                bad(field, why)
        if a.actionFolder:
            if a.actionFolder not in checked:  # thousands of actions usually share a few folders
                folder, problem = storage.normalize(action_roots[0], a.actionFolder), None
                if not storage.inside(folder, action_roots):
                    problem = f"actionFolder must be inside {', '.join(action_roots)}"
                elif too_long := path_problem("actionFolder", folder, output=False):
                    problem = too_long
                elif not await storage.is_dir(folder):
                    problem = f"actionFolder {a.actionFolder!r} is not a directory"
                checked[a.actionFolder] = (folder, problem)
            folder, problem = checked[a.actionFolder]
            if problem:
                bad("actionFolder", problem)
            paths["action_folder_path"] = folder
        if a.outputPath and not output_roots:
            bad("outputPath", "no output root is open to this user (PINGO_OUTPUT_ROOTS): only managed outputs")
        elif a.outputPath:
            target = storage.normalize(output_roots[0], a.outputPath)
            if not storage.inside(target, output_roots) or target in output_roots:
                bad("outputPath", f"outputPath must be inside {', '.join(output_roots)}")
            elif too_long := path_problem("outputPath", target, output=True):
                bad("outputPath", f"{too_long} once inside {output_roots[0]}")  # its attempts could not be written
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
        doc = self.known[h]
        if doc["state"] not in DATASET_REUSABLE:
            # Not reusable as the batch read found it, but it may have been stored since:
            # read once more (what ``follow`` then claims from, rather than reading again).
            return await self.reuse_now(h, lineage, claimants, leaf)
        return await self._claim(h, doc, lineage, claimants, leaf)

    async def reuse_now(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        """Reuse ``h`` if it is stored now, whatever the batch read found."""
        fresh = await ds.get(self.ctx.store, h)
        if fresh is None:
            return False
        self.known[h] = fresh
        if fresh["state"] not in DATASET_REUSABLE or not await self.present(fresh):
            return False
        return await self._claim(h, self.known[h], lineage, claimants, leaf)

    async def _claim(self, h: str, doc: dict[str, Any], lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        # Claimed from the document in hand: the claim is guarded by the state it shows.
        ids = [self.action_id(c) for c in claimants]
        ok = await ds.try_reuse(self.ctx.store, h, lineage, ids, leaf, BY, seen=doc)
        if ok:
            self.claimed.append(h)
        return ok

    async def try_follow(
        self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool
    ) -> str | None:
        """Follow a live computation of ``h`` by another workflow: claim the dataset for
        the children, then register as a follower of a producer that has not ended."""
        known = self.known.get(h)
        if known is None or known["state"] not in DATASET_IN_FLIGHT or not known.get("producers"):
            return None
        return await self.follow(aid, h, lineage, claimants, leaf)

    async def follow(self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> str | None:
        doc = await ds.claim_in_flight(
            self.ctx.store, h, [self.action_id(c) for c in claimants], leaf, BY, seen=self.known.get(h)
        )
        if doc is None or not ds._lineage_matches(doc, lineage):
            return None
        me = self.action_id(aid)
        for producer in doc.get("producers", []):
            if await acts.add_follower(self.ctx.store, producer, me):
                return producer
            if await acts.being_planned(self.ctx.store, producer):
                # A concurrent planner's action, not written yet: its end finds this
                # follower by ``follows`` (and the repair sweep, if it never is written).
                return producer
            # Or its planner wrote it (and left PLANNING) since it refused us: asked again,
            # it is refused only if it has ended. Before, this computed the dataset a second time.
            if await acts.add_follower(self.ctx.store, producer, me):
                return producer
        return None

    async def present(self, doc: dict[str, Any]) -> bool:
        """A missing dataset is a miss: before a stored dataset is promised to a plan, its
        files are checked against what was recorded at commit, as far as
        ``PINGO_VERIFY_REUSE`` says (``shared.storage.verification``). One found missing
        or changed is marked LOST and computed again.

        A changed leftover under the managed root would win the first commit of that
        recomputation, so it is removed: here when this check finds it, and when a LOST
        dataset (the reconcile sweep removes nothing) is planned again."""
        storage, path = self.ctx.storage, doc["path"]
        managed = storage.inside(path, [storage.root])
        if doc["state"] == D.LOST:
            if managed and await storage.exists(path):
                fresh = await ds.get(self.ctx.store, doc["_id"])
                if fresh is not None and fresh["state"] == D.LOST and not fresh.get("producers"):
                    log.info("dataset %s: removing the leftover of its lost files at %s", doc["_id"], path)
                    await storage.delete(path)
            return True  # a miss anyway: LOST is not reusable
        if doc["state"] not in DATASET_REUSABLE or doc["state"] == D.PROCESSING:
            return True  # nothing to verify: not reusable, or already being deleted (a miss anyway)
        verdict, lost = await check_whole(storage, self.ctx.mover(BY), doc, self.ctx.settings.verify_reuse)
        if verdict.ok:
            return True
        log.warning("dataset %s: %s; marked lost", doc["_id"], verdict.describe(doc))
        if lost is not None:
            self.known[doc["_id"]] = lost
            if verdict.found is not None and managed:
                await storage.delete(path)  # changed, not to be read again
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
    late_claims: dict[str, tuple[list[str], bool]] = {}  # hash -> readers, followed by a leaf
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
    # An action following an identical one of this workflow: its children read what that
    # one computes, claimed with the rest.
    local_followers: dict[ActionId, list[ActionId]] = {}
    for q, p in planned.items():
        if p.follows_local is not None:
            local_followers.setdefault(p.follows_local, []).append(q)
            readers, leaf = late_claims.get(p.hash, ([], False))
            late_claims[p.hash] = (
                readers + [gate.action_id(c) for c in p.children if planned[c].computed],
                leaf or p.leaf,
            )
    existed = await ds.create_many(ctx.store, list(new.values()))
    one_by_one += [aid for aid in used_at if planned[aid].hash in existed and new[planned[aid].hash]["producers"] ==
                   [gate.action_id(aid)]]  # fmt: skip
    converted: list[ActionId] = []
    for aid in one_by_one:
        p = planned[aid]
        computed_children = [c for c in p.children if planned[c].computed]
        if not (p.leaf or computed_children or aid in local_followers or p.spec.forceComputation):
            continue  # what it fed follows or reuses now: drop_unneeded skips it
        # A concurrent planner got there first (its dataset is in flight now): follow it.
        if not p.spec.forceComputation and (producer := await gate.follow(aid, p.hash, p.lineage,
                                                                          computed_children, p.leaf)):  # fmt: skip
            planned[aid] = dataclasses.replace(p, decision="reuse", reason="in_flight", follows=producer)
            converted.append(aid)
            continue
        # Or that computation has ended since this one was planned, and stored the dataset:
        # reuse it, with the identical actions of this workflow that were to follow this one.
        if not p.spec.forceComputation and await reuse_instead(gate, planned, aid, local_followers.get(aid, [])):
            converted.append(aid)
            continue
        readers = [gate.action_id(c) for c in computed_children]
        await ds.prepare_compute(
            ctx.store, p.hash, p.lineage, output_of[aid], gate.action_id(aid), p.leaf, BY, readers, used_at[aid]
        )
    for h, (readers, leaf) in late_claims.items():
        if not await ds.claim_in_flight(ctx.store, h, readers, leaf, BY):
            await ds.add_claims(ctx.store, h, readers)
    if converted:
        await drop_unneeded(ctx, gate, planned, converted)


async def reuse_instead(
    gate: StoreGate, planned: dict[ActionId, PlannedAction], aid: ActionId, local: list[ActionId]
) -> bool:
    """Reuse what a concurrent computation stored since ``aid`` was planned to compute it:
    ``aid`` and ``local``, the identical actions of this workflow that were to follow it,
    become REUSED, their computed children's claims taken in one write. False: not stored."""
    p = planned[aid]
    readers = [c for a in (aid, *local) for c in planned[a].children if planned[c].computed]
    if not await gate.reuse_now(p.hash, p.lineage, readers, any(planned[a].leaf for a in (aid, *local))):
        return False
    for a in (aid, *local):
        planned[a] = dataclasses.replace(planned[a], decision="reuse", reason="stored", follows_local=None)
    return True


async def drop_unneeded(
    ctx: Context, gate: StoreGate, planned: dict[ActionId, PlannedAction], converted: list[ActionId]
) -> None:
    """After actions turned into followers of a concurrent planner's computation: their
    identical actions here follow that one too, what they would have read is no longer
    claimed by them, and a parent computed only for them is skipped (and no longer
    produces its dataset), up the graph."""
    held: dict[str, set[str]] = {}
    produced: set[str] = set()
    for aid in converted:
        for q, p in planned.items():
            if p.follows_local == aid:  # an identical action of this workflow followed it
                planned[q] = dataclasses.replace(p, follows=planned[aid].follows, follows_local=None)
                await acts.add_follower(ctx.store, planned[aid].follows or "", gate.action_id(q))
    queue = list(converted)
    while queue:
        aid = queue.pop()
        for parent in planned[aid].spec.parents:
            q = planned[parent]
            if q.spec.isManaged:
                held.setdefault(q.hash, set()).add(gate.action_id(aid))  # it no longer reads it
            followed_here = any(o.follows_local == parent for o in planned.values())
            needed = q.leaf or followed_here or any(planned[c].computed for c in q.children)
            if q.computed and not needed and q.spec.isManaged and not q.spec.forceComputation:
                planned[parent] = dataclasses.replace(q, decision="reuse", reason="feeds_only_reused")
                held.setdefault(q.hash, set()).add(gate.action_id(parent))
                produced.add(q.hash)
                queue.append(parent)
    await ds.release(ctx.store, held, produced, BY, "followed a concurrent computation instead")


def new_workflow_id() -> str:
    return f"wf-{uuid.uuid4().hex[:12]}"


async def submit(
    ctx: Context, body: dict[str, Any], spec: WorkflowSpec, paths: dict, prints: dict, owner: str | None = None,
    wf_id: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Plan and write ``owner``'s validated workflow (as ``wf_id``: one an Idempotency-Key
    recorded before). Raises ``PlanningLost`` if the planning sweep took the workflow away
    (this planner stalled past ``stale_after``): nothing is kept."""
    wf_id = wf_id or new_workflow_id()
    with logs.about(wf_id):  # its planning's log lines are about it
        return await plan_and_write(ctx, wf_id, body, spec, paths, prints, owner)


async def plan_and_write(
    ctx: Context, wf_id: str, body: dict[str, Any], spec: WorkflowSpec, paths: dict, prints: dict, owner: str | None
) -> dict[str, Any]:
    store = ctx.store
    now = time.time()
    token = uuid.uuid4().hex
    hashes = workflow_hashes(spec, prints)
    definition = {
        "_id": wf_id,
        "body": masked_body(body),  # as submitted, but no secret value is kept here (docs/planning.md)
        "action_ids": [f"{wf_id}.{a.id}" for a in spec.actions],
        # What its planning may claim or produce: what an undo releases, read by _id.
        "dataset_hashes": sorted(set(hashes.values())),
        "created_at": now,
    }
    await wfs.insert(store, wfs.new_document(wf_id, spec.name, len(spec.actions), token, now, BY, owner), definition)
    async with PlanningLease(ctx, wf_id, token) as lease:
        try:
            gate = StoreGate(ctx, wf_id, await ds.get_many(store, list(hashes.values())))
            planned = await plan(spec, hashes, gate, prints, concurrency=PLANNING_CONCURRENCY)
            output_of = {
                aid: paths.get(aid, {}).get("output_path") or posixpath.join(ctx.storage.root, p.hash)
                for aid, p in planned.items()
            }
            await prepare_datasets(ctx, gate, planned, output_of)
            docs = [
                acts.new_document(
                    wf_id, planned[s.id], planned, paths.get(s.id, {}), output_of, now,
                    ds.mean_seconds(gate.known.get(planned[s.id].hash)) or 0.0, BY, owner,
                )
                for s in spec.actions
            ]  # fmt: skip
            by_id = {d["_id"]: d for d in docs}
            for d in docs:  # followers of an identical action of this workflow
                if d.get("follows") in by_id:
                    by_id[d["follows"]]["followers"].append(d["_id"])
                if d["state"] == A.REUSED:  # the size of what it reuses (its event), and whose it is
                    d["size"] = (gate.known.get(d["hash"]) or {}).get("size")
                    d["reused_from"] = (gate.known.get(d["hash"]) or {}).get("owner")
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
        following = sum(p.reason == "in_flight" for p in planned.values())
        counts["follow"] = following
        final = W.RUNNING if counts["compute"] or following else W.SUCCEEDED
        extra: dict[str, Any] = {
            "counts": counts,
            # What the submission statistics count (an effect of this move).
            "planned": {
                "actions_reused": sum(d["state"] == A.REUSED for d in docs),
                "actions_skipped": sum(d["state"] == A.SKIPPED for d in docs),
                "saved_seconds": sum(d["saved_seconds"] for d in docs),
                # Reused from another user's workflow: what sharing across the team saved.
                "saved_others_seconds": sum(
                    d["saved_seconds"] for d in docs if d.get("reused_from") not in (None, owner)
                ),
            },
        }
        if final == W.SUCCEEDED:
            extra["finished_at"] = time.time()
            extra["outcome"] = outcome(docs)
        # Its effects: WORKFLOW_SUBMITTED, its actions' arrivals (READY ones wake the action
        # managers; REUSED, SKIPPED, FOLLOWING announce their outcome), WORKFLOW_FINISHED
        # when nothing is computed, and the submission statistics.
        # Its live actions, added to whatever their moves counted already (a fast action may
        # end before this move): settling reads the count (docs/state-machines.md, "Workflow").
        live = sum(d["state"] in ACTION_LIVE for d in docs)
        wf = await ctx.mover(BY).workflow(
            wf_id, final, sources=[W.PLANNING], where={"planner": token}, set=extra, inc={"open_actions": live},
            arrivals=docs,
        )  # fmt: skip
    if wf is None:
        # The sweep undid it between our last renewal and now: take back what we wrote.
        await release(ctx, wf_id, "planning interrupted")
        raise PlanningLost(wf_id)
    # Counted once the plan is written: a plan undone by the sweep reused nothing.
    REUSE_HITS.inc(extra["planned"]["actions_reused"])
    SAVED_SECONDS.inc(extra["planned"]["saved_seconds"])
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
