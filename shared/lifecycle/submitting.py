"""Submitting a workflow: plan reuse, write it (docs/planning.md, "The planner").

The first phase of a workflow's life. The gateway hands over a validated workflow
(``services/workflow_manager/submission.py`` resolved its paths and fingerprints);
``Submitter.submit`` plans it and writes it. Order of writes: the workflow document
(PLANNING) first, then dataset claims and producers, then the actions, then RUNNING.
If anything fails half-way, what was written is undone before the error is returned;
if the process dies half-way, the planning sweep (``shared.lifecycle.repairing``)
undoes it later. What a dataset means for an action is the claim policy's word
(``shared.lifecycle.claims``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import posixpath
import secrets
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from shared import logs
from shared.collector import paused, run_paused
from shared.config import Settings
from shared.errors import PingoError
from shared.hashing import workflow_hashes
from shared.lifecycle import reserving
from shared.lifecycle.claims import Claim, meaning, whole
from shared.lifecycle.cutoff_candidates import may_stand_in, stand_in, stand_ins
from shared.lifecycle.misses import Miss, explain
from shared.lifecycle.moves import Mover, outcome
from shared.metrics import REUSE_HITS, SAVED_SECONDS
from shared.planning import PlannedAction, plan
from shared.states import ACTION_LIVE, ActionState, DatasetState, WorkflowState
from shared.storage import Storage
from shared.storage.verification import Level
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import inputs as seen_inputs
from shared.store import workflows as wfs
from shared.store.actions import ActionDoc
from shared.store.records import DEFAULT_RETRIES, ActionRecord, WorkflowRecord
from shared.store.transitions import history_entry
from shared.ticker import Heartbeat
from shared.workflow_spec import ActionId, WorkflowSpec, id_order, masked_body

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


@dataclass(frozen=True)
class Submitted:
    """A workflow as its submission wrote it, and its actions in their workflow's order."""

    workflow: WorkflowRecord
    actions: list[ActionRecord]


class StoreGate:
    """The planner's view of datasets: claims are taken in MongoDB, atomically.

    The documents of every hash the workflow may need are read in one batch first
    (``known``); a hash absent from it is computed without another read, and only a
    stored one costs the atomic claim."""

    def __init__(
        self, store: Store, storage: Storage, mover: Mover, level: Level, workflow_id: str,
        known: dict[str, dict[str, Any]],
    ) -> None:  # fmt: skip
        self.store, self.storage, self.mover, self.level = store, storage, mover, level
        self.workflow_id = workflow_id
        self.known = known
        self.claimed: list[str] = []
        self.twins: dict[str, str] = {}  # a cut-off hash -> the twin reused in its place

    def action_id(self, local: ActionId) -> str:
        return f"{self.workflow_id}.{local}"

    async def try_reuse(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        doc = self.known.get(h)
        if doc is None:
            return False
        found = meaning(doc, lineage)
        if found.claim is Claim.LOST:
            await self.remove_leftover(doc)
        if (twin := stand_in(doc)) is not None:  # docs/planning.md, "Early cutoff", step 3
            return await self.reuse_twin(h, twin, claimants, leaf)
        if found.collision:
            return False
        if not found.stored:
            # Not reusable as the batch read found it, but it may have been stored since:
            # read once more (what ``follow`` then claims from, rather than reading again).
            return await self.reuse_now(h, lineage, claimants, leaf)
        if not await self.present(doc):
            return False
        return await self._claim(h, doc, lineage, claimants, leaf)

    async def reuse_twin(self, h: str, twin: str, claimants: list[ActionId], leaf: bool) -> bool:
        """``h``'s action was cut off early (its dataset never made): reuse the twin it reused."""
        doc = self.known.get(twin)
        if not may_stand_in(doc) or not await self.present(doc):
            return False
        assert doc is not None
        if ok := await self._claim(twin, doc, doc["lineage"], claimants, leaf):
            self.twins[h] = twin
        return ok

    async def reuse_now(self, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        """Reuse ``h`` if it is stored now, whatever the batch read found."""
        fresh = await ds.get(self.store, h)
        if fresh is None:
            return False
        self.known[h] = fresh
        if not meaning(fresh, lineage).stored or not await self.present(fresh):
            return False
        return await self._claim(h, self.known[h], lineage, claimants, leaf)

    async def _claim(self, h: str, doc: dict[str, Any], lineage: dict, claimants: list[ActionId], leaf: bool) -> bool:
        # Claimed from the document in hand: the claim is guarded by the state it shows.
        ids = [self.action_id(c) for c in claimants]
        ok = await ds.try_reuse(self.store, h, lineage, ids, leaf, BY, seen=doc)
        if ok:
            self.claimed.append(h)
        return ok

    async def try_follow(
        self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool
    ) -> str | None:
        """Follow a live computation of ``h`` by another workflow: claim the dataset for
        the children, then register as a follower of a producer that has not ended."""
        if meaning(self.known.get(h), lineage).claim is not Claim.FOLLOW:
            return None
        return await self.follow(aid, h, lineage, claimants, leaf)

    async def follow(self, aid: ActionId, h: str, lineage: dict, claimants: list[ActionId], leaf: bool) -> str | None:
        doc = await ds.claim_in_flight(
            self.store, h, [self.action_id(c) for c in claimants], leaf, BY, seen=self.known.get(h)
        )
        if doc is None or meaning(doc, lineage).claim is not Claim.FOLLOW:
            return None
        me = self.action_id(aid)
        for producer in doc.get("producers", []):
            if await acts.add_follower(self.store, producer, me):
                return producer
            # Noted before the look below: a producer written after it finds this follower
            # by query when it succeeds, though its ``followers`` does not list it.
            await ds.note_unlisted_follower(self.store, h)
            if await acts.being_planned(self.store, producer):
                # A concurrent planner's action, not written yet: its end finds this
                # follower by ``follows`` (and the repair sweep, if it never is written).
                return producer
            # Or its planner wrote it (and left PLANNING) since it refused us: asked again,
            # it is refused only if it has ended. Before, this computed the dataset a second time.
            if await acts.add_follower(self.store, producer, me):
                return producer
        return None

    async def present(self, doc: dict[str, Any]) -> bool:
        """A missing dataset is a miss: before a stored dataset is promised to a plan, its
        files are checked against what was recorded at commit, as far as
        ``PINGO_VERIFY_REUSE`` says (``shared.storage.verification``). One found missing
        or changed is marked LOST and computed again; a changed one under the managed
        root is removed, not to be read again (it would win the first commit of that
        recomputation)."""
        verdict, lost = await whole(self.storage, doc, self.level, self.mover)
        if verdict.ok:
            return True
        log.warning("dataset %s: %s; marked lost", doc["_id"], verdict.describe(doc))
        if lost is not None:
            self.known[doc["_id"]] = lost
            if verdict.found is not None and self.storage.inside(doc["path"], [self.storage.root]):
                await self.storage.delete(doc["path"])  # changed, not to be read again
        return False

    async def remove_leftover(self, doc: dict[str, Any]) -> None:
        """A LOST dataset planned again (the reconcile sweep removes nothing): a leftover of
        its files under the managed root would win the first commit of its recomputation."""
        storage, path = self.storage, doc["path"]
        if storage.inside(path, [storage.root]) and await storage.exists(path):
            fresh = await ds.get(self.store, doc["_id"])
            if fresh is not None and fresh["state"] == D.LOST and not fresh.get("producers"):
                log.info("dataset %s: removing the leftover of its lost files at %s", doc["_id"], path)
                await storage.delete(path)


class PlanningLost(PingoError):
    """The planning sweep judged this planner dead and undid its workflow: nothing was kept."""


class PlanningLease(Heartbeat):
    """A planner's heartbeat on its PLANNING workflow: the sweep undoes a workflow only
    once its lease has not been renewed for ``stale_after`` seconds (its planner died)."""

    def __init__(self, store: Store, stale_after: float, wf_id: str, token: str) -> None:
        self.store, self.wf_id, self.token = store, wf_id, token
        super().__init__(self.renew, max(0.2, stale_after / 4), f"the planning of {wf_id}")

    async def renew(self) -> bool:
        return await wfs.renew_planning_lease(self.store, self.wf_id, self.token, time.time())


async def prepare_datasets(
    gate: StoreGate, planned: dict[ActionId, PlannedAction], output_of: dict[ActionId, str]
) -> None:
    """Record every computed managed action as its dataset's producer: datasets seen for
    the first time in one batch, the others (and any a concurrent planner created in the
    meantime) one guarded write each. Each is used at its own instant, in plan order,
    as the decision algorithms (and the simulator) order last uses."""
    store = gate.store
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
    existed = await ds.create_many(store, list(new.values()))
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
            store, p.hash, p.lineage, output_of[aid], gate.action_id(aid), p.leaf, BY, readers, used_at[aid]
        )
    for h, (readers, leaf) in late_claims.items():
        if not await ds.claim_in_flight(store, h, readers, leaf, BY):
            await ds.add_claims(store, h, readers)
    if converted:
        await drop_unneeded(gate, planned, converted)


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


async def drop_unneeded(gate: StoreGate, planned: dict[ActionId, PlannedAction], converted: list[ActionId]) -> None:
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
                if not await acts.add_follower(gate.store, planned[aid].follows or "", gate.action_id(q)):
                    await ds.note_unlisted_follower(gate.store, p.hash)  # its producer is being planned
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
    await ds.release(gate.store, held, produced, BY, "followed a concurrent computation instead")


def action_document(
    wf_id: str,
    p: PlannedAction,
    planned: dict[ActionId, PlannedAction],
    paths: dict[str, str],
    output_of: dict[ActionId, str],
    now: float,
    saved_seconds: float,
    by: str,
    owner: str | None = None,
) -> ActionDoc:
    """The document of one planned action: WAITING/READY if computed (READY when no
    computed or followed parent must finish first), FOLLOWING if its dataset is in
    flight, REUSED/SKIPPED if not."""
    a = p.spec
    parents = sorted(a.parents, key=id_order)
    computed = p.computed
    pending = [f"{wf_id}.{q}" for q in parents if planned[q].pending] if computed else []
    if computed:
        state = A.WAITING if pending else A.READY
    else:
        state = {"stored": A.REUSED, "in_flight": A.FOLLOWING}.get(p.reason, A.SKIPPED)
    # A field a fresh action holds at its default is not written (attempt_log,
    # failed_attempts, submit_errors; force, owner, retries, timeout_seconds, expected_bytes
    # unless set): every read takes its default (records.ActionRecord.of, ``.get`` in the
    # engine), and nx-27017 encodes a third fewer nodes per action (docs/performance.md,
    # "A big workflow").
    doc = ActionDoc(
        _id=f"{wf_id}.{a.id}",
        workflow_id=wf_id,
        local_id=a.id,
        name=a.name,
        type=a.type.value,
        definition=acts.stored_definition(a.definition()),
        hash=p.hash,
        managed=a.isManaged,
        leaf=p.leaf,
        decision=p.decision,
        reason=p.reason,
        output_path=output_of[a.id],
        parents=[f"{wf_id}.{q}" for q in parents],
        parent_local_ids=parents,
        input_paths=[output_of[q] for q in parents],
        children=[f"{wf_id}.{c}" for c in p.children if planned[c].computed] if p.pending else [],
        pending_parents=pending,
        # Every managed parent's dataset, reused or computed here: released when this action ends.
        claims=[planned[q].hash for q in parents if planned[q].spec.isManaged] if computed else [],
        state=str(state),
        history=[history_entry(state, by, p.reason)],
        created_at=now,
        updated_at=now,
        attempt=0,
        secret=secrets.token_urlsafe(18) if computed else None,
        saved_seconds=0.0 if computed else saved_seconds,
        followers=[],  # kept: what a follower's registration is checked against
    )
    if owner is not None:
        doc["owner"] = owner
    if a.forceComputation:
        doc["force"] = True
    if (retries := a.retries.model_dump()) != DEFAULT_RETRIES:
        doc["retries"] = retries
    if a.timeoutSeconds is not None:
        doc["timeout_seconds"] = a.timeoutSeconds
    if a.expectedBytes is not None:
        doc["expected_bytes"] = a.expectedBytes
    if p.reason == "in_flight":
        doc["follows"] = p.follows or f"{wf_id}.{p.follows_local}"
    doc.update(paths)  # type: ignore[typeddict-item]  # the checked folder and output paths
    return doc


def action_documents(
    wf_id: str, spec: WorkflowSpec, planned: dict[ActionId, PlannedAction], paths: dict,
    output_of: dict[ActionId, str], now: float, known: dict[str, dict[str, Any]], owner: str | None,
) -> list[ActionDoc]:  # fmt: skip
    """The plan as action documents, in the submitted order: followers of an identical
    action of this workflow listed by it, and a reused action's size and owner taken
    from the dataset it reuses."""
    docs = [
        action_document(
            wf_id, planned[s.id], planned, paths.get(s.id, {}), output_of, now,
            ds.mean_seconds(known.get(planned[s.id].hash)) or 0.0, BY, owner,
        )
        for s in spec.actions
    ]  # fmt: skip
    by_id = {d["_id"]: d for d in docs}
    for d in docs:  # followers of an identical action of this workflow
        if d.get("follows") in by_id:
            by_id[d["follows"]]["followers"].append(d["_id"])
        if d["state"] == A.REUSED:  # the size of what it reuses (its event), and whose it is
            d["size"] = (known.get(d["hash"]) or {}).get("size")
            d["reused_from"] = (known.get(d["hash"]) or {}).get("owner")
    return docs


async def explained(
    store: Store, name: str, owner: str | None, planned: dict[ActionId, PlannedAction], hashes: dict[ActionId, str],
    now: float, wf_id: str,
) -> dict[ActionId, Miss]:  # fmt: skip
    """What changed since each computed action was last computed (``shared.lifecycle.misses``).
    Advice, not the plan: a failure to explain leaves it out and fails nothing."""
    try:
        return await explain(store, name, owner, planned, hashes, before=now, exclude=wf_id)
    except Exception:
        log.warning("%s: could not say why its actions are computed", wf_id, exc_info=True)
        return {}


def new_workflow_id() -> str:
    return f"wf-{uuid.uuid4().hex[:12]}"


def decoded(written: dict[str, Any]) -> Submitted:
    """The workflow and its actions, in id order, as the records the gateway answers with."""
    docs = sorted(written["actions"], key=lambda d: id_order(d["local_id"]))
    return Submitted(WorkflowRecord.of(written["workflow"]), [ActionRecord.of(d) for d in docs])


def definition_document(
    wf_id: str, body: dict[str, Any], spec: WorkflowSpec, hashes: dict[str, str], now: float
) -> dict[str, Any]:
    """The workflow's definition, kept beside its document: the body as submitted, but no
    secret value is kept here (docs/planning.md), and what its planning may claim or
    produce (what an undo releases, read by ``_id``)."""
    return {
        "_id": wf_id,
        "body": masked_body(body),
        "action_ids": [f"{wf_id}.{a.id}" for a in spec.actions],
        "dataset_hashes": sorted(set(hashes.values())),
        "created_at": now,
    }


def planned_move(
    planned: dict[ActionId, PlannedAction], docs: list[dict[str, Any]], owner: str | None
) -> tuple[WorkflowState, dict[str, Any]]:
    """Where a written plan moves its workflow (RUNNING, or SUCCEEDED when nothing is
    computed or followed), and what that move sets: the plan's counts and what the
    submission statistics count (an effect of the move)."""
    counts = {
        "compute": sum(p.computed for p in planned.values()),
        "reuse": sum(not p.computed for p in planned.values()),
        "follow": sum(p.reason == "in_flight" for p in planned.values()),
    }
    final = W.RUNNING if counts["compute"] or counts["follow"] else W.SUCCEEDED
    extra: dict[str, Any] = {
        "counts": counts,
        "planned": {
            "actions_reused": sum(d["state"] == A.REUSED for d in docs),
            "actions_skipped": sum(d["state"] == A.SKIPPED for d in docs),
            "saved_seconds": sum(d["saved_seconds"] for d in docs),
            # Reused from another user's workflow: what sharing across the team saved.
            "saved_others_seconds": sum(d["saved_seconds"] for d in docs if d.get("reused_from") not in (None, owner)),
        },
    }
    if any(d["followers"] for d in docs):  # identical actions of its own follow one
        extra["followed"] = True
    if final == W.SUCCEEDED:
        extra["finished_at"] = time.time()
        extra["outcome"] = outcome(docs)
    return final, extra


@dataclass
class Submitter:
    """Plans and writes validated workflows, and undoes a planning that did not finish."""

    store: Store
    storage: Storage
    mover: Mover  # publishing as the workflow manager
    settings: Settings

    async def submit(
        self, body: dict[str, Any], spec: WorkflowSpec, paths: dict, prints: dict, owner: str | None = None,
        wf_id: str | None = None,
    ) -> Submitted:  # fmt: skip
        """Plan and write ``owner``'s validated workflow (as ``wf_id``: one an Idempotency-Key
        recorded before). Raises ``PlanningLost`` if the planning sweep took the workflow away
        (this planner stalled past ``stale_after``): nothing is kept."""
        wf_id = wf_id or new_workflow_id()
        with logs.about(wf_id):  # its planning's log lines are about it
            written = await self.plan_and_write(wf_id, body, spec, paths, prints, owner)
            # What the next dry run compares each input with (docs/planning.md, "External inputs").
            prints_of = {i["path"]: {k: v for k, v in i.items() if k != "path"} for a in spec.actions for i in a.inputs}
            if prints_of:
                await seen_inputs.remember(self.store, prints_of)
        # Decoding a big plan is CPU work: in a worker thread, other requests are answered meanwhile.
        return await asyncio.to_thread(run_paused, decoded, written)

    async def plan_and_write(
        self, wf_id: str, body: dict[str, Any], spec: WorkflowSpec, paths: dict, prints: dict, owner: str | None
    ) -> dict[str, Any]:
        store = self.store
        now = time.time()
        token = uuid.uuid4().hex
        # The CPU-heavy pure steps run in a worker thread: the event loop keeps answering
        # other requests meanwhile (the interpreter hands it the GIL every few ms), while a
        # big workflow is planned (docs/performance.md, "A big workflow"); with the garbage
        # collector paused, which would otherwise walk their young objects again and again.
        hashes = await asyncio.to_thread(run_paused, workflow_hashes, spec, prints)
        definition = definition_document(wf_id, body, spec, hashes, now)
        told = spec.webhooks if spec.webhooks or self.settings.webhooks else None  # docs/webhooks.md
        await wfs.insert(
            store, wfs.new_document(wf_id, spec.name, len(spec.actions), token, now, BY, owner, told), definition
        )
        async with PlanningLease(store, self.settings.stale_after, wf_id, token) as lease:
            try:
                known = await ds.get_many(store, list(hashes.values()))
                if known:  # nothing known (a new lineage): nothing cut off early to stand in
                    known.update(await ds.get_many(store, stand_ins(known)))
                gate = StoreGate(store, self.storage, self.mover, self.settings.verify_reuse, wf_id, known)
                # Claims asked at once only when there is something stored to claim: with nothing
                # known, no decision waits on the store, and one by one costs no task per action.
                concurrency = PLANNING_CONCURRENCY if known else 1
                # With nothing known the plan is pure CPU (no store round trip): the collector paused.
                with paused() if not known else nullcontext():
                    planned = await plan(spec, hashes, gate, prints, concurrency=concurrency)
                for p in planned.values():  # a cut-off lineage reused: its action reads its twin
                    if p.reason == "stored" and p.hash in gate.twins:
                        p.hash = gate.twins[p.hash]
                output_of = {
                    aid: paths.get(aid, {}).get("output_path") or posixpath.join(self.storage.root, p.hash)
                    for aid, p in planned.items()
                }
                # Why each computed action is computed (a few reads), read while the datasets are
                # prepared: what prepare_datasets turns into a follower is left out below.
                misses, _ = await asyncio.gather(
                    explained(store, spec.name, owner, planned, hashes, now, wf_id),
                    prepare_datasets(gate, planned, output_of),
                )
                docs = await asyncio.to_thread(
                    run_paused, action_documents, wf_id, spec, planned, paths, output_of, now, gate.known, owner
                )
                await reserving.planned(store, docs, gate.known)  # what each start reserves
                for d in docs:
                    if d["decision"] == "compute" and (miss := misses.get(d["local_id"])) is not None:
                        d["miss"] = miss.stored()
                        if miss.may_be_cut_off(d["hash"]):  # absent otherwise: most actions pay no field
                            d["cutoff_candidate"] = True
                # Actions become claimable by the action managers once inserted: insert them only
                # while this planner provably holds the workflow, so the sweep cannot undo it under them.
                if not await lease.renew():
                    raise PlanningLost(wf_id)
                await acts.insert_many(store, docs)
            except Exception as exc:
                if not isinstance(exc, PlanningLost):
                    log.exception("planning %s failed; undoing it", wf_id)
                await self.undo(wf_id, "planning failed", where={"planner": token})
                await self.release(wf_id, "planning failed")
                raise
            final, extra = planned_move(planned, docs, owner)
            # Its effects: WORKFLOW_SUBMITTED, its actions' arrivals (READY ones wake the action
            # managers; REUSED, SKIPPED, FOLLOWING announce their outcome), WORKFLOW_FINISHED
            # when nothing is computed, and the submission statistics.
            # Its live actions, added to whatever their moves counted already (a fast action may
            # end before this move): settling reads the count (docs/state-machines.md, "Workflow").
            live = sum(d["state"] in ACTION_LIVE for d in docs)
            wf = await self.mover.workflow(
                wf_id, final, sources=[W.PLANNING], where={"planner": token}, set=extra, inc={"open_actions": live},
                arrivals=docs,
            )  # fmt: skip
        if wf is None:
            # The sweep undid it between our last renewal and now: take back what we wrote.
            await self.release(wf_id, "planning interrupted")
            raise PlanningLost(wf_id)
        # Counted once the plan is written: a plan undone by the sweep reused nothing.
        REUSE_HITS.inc(extra["planned"]["actions_reused"])
        SAVED_SECONDS.inc(extra["planned"]["saved_seconds"])
        return {"workflow": wf, "actions": docs}

    async def undo(self, wf_id: str, reason: str, where: dict[str, Any]) -> bool:
        """End a PLANNING workflow FAILED, then release what its planning took. The guarded
        transition comes first: only its winner releases, so a planner that finished in the
        meantime (PLANNING -> RUNNING) keeps everything. ``where`` narrows the guard (the
        planner's token, or the stale lease value the sweep saw)."""
        won = await self.mover.workflow(
            wf_id,
            W.FAILED,
            sources=[W.PLANNING],
            where=where,
            set={"error": reason, "finished_at": time.time()},
            note=reason,
        )
        if won is None:
            return False
        await self.release(wf_id, reason)
        return True

    async def release(self, wf_id: str, reason: str) -> None:
        """Release every claim and producer mark of a FAILED workflow's planning and delete its
        actions; idempotent, so the sweep and a late planner may both run it."""
        store = self.store
        wf = await wfs.get(store, wf_id, {"state": 1})
        planned = await wfs.planning_of(store, wf_id)
        if wf is None or wf["state"] != W.FAILED or planned is None:
            return
        mine = set(planned["action_ids"])
        held: dict[str, set[str]] = {}
        produced: set[str] = set()
        found = await ds.get_many(store, planned["dataset_hashes"])
        found.update(await ds.get_many(store, stand_ins(found)))  # twins reused in their place
        for h, d in found.items():
            if ids := mine & (set(d.get("claims", [])) | set(d.get("producers", []))):
                held[h] = ids
            if mine & set(d.get("producers", [])):
                produced.add(h)
        await ds.release(store, held, produced, BY, reason)
        await acts.delete_workflow(store, wf_id)
