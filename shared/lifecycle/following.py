"""Following a computation in flight, and taking it over (docs/state-machines.md,
"Following a computation in flight").

A FOLLOWING action waits for the live action computing its dataset (``follows``),
which lists it in ``followers``. When that producer ends:

- FINISHED: each follower readies its children, then ends REUSED.
- unfinished (FAILED, KILLED, its workflow no longer needing it): exactly one follower
  carries on. The election is one guarded write on the producer (``successor``: the
  first writer wins; every later caller reads the winner). The successor adopts the
  producer's running job if the producer's workflow was killed while the job ran (the
  job runs on for the others), and otherwise computes the dataset itself, its inputs
  re-planned inside its own workflow. The other followers follow the successor.
- A computation that itself failed (``action_failed``, ``output_missing``, or an
  ancestor's failure: ``upstream_failed``) is taken over at most ``takeover_retries``
  times along the chain of successors; past that the followers end FAILED with reason
  ``upstream_failed``, pointing at the failed attempt.

A producer's single end runs the election before it releases the producer's hold on the
dataset, so the dataset keeps a producer (a bulk kill releases first: the dataset may
pass through DELETED, and is taken back by the successor). The repair sweep (``sweep``)
resolves any follower whose producer ended without resolving it: a crash in between, a
successor elected by a caller that died before handing it the work (handed now), or one
that ended without taking over (replaced).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any, Protocol

from shared.lifecycle.moves import Mover
from shared.lifecycle.replanning import CannotReplan, Replans
from shared.states import ACTION_TERMINAL, ActionState
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store import workflows as wfs
from shared.store.actions import ActionDoc

log = logging.getLogger(__name__)
A = ActionState
# Failures of the computation itself, as opposed to a kill or a lost submission.
COMPUTATION_FAILED = frozenset({"action_failed", "output_missing", "commit_refused", "timed_out", "upstream_failed"})
# Elections held in one call before giving up (each lost one is a successor gone meanwhile).
ELECTIONS = 5
# What a successor adopting a running job takes from the producer.
JOB_FIELDS = ("job_id", "external_id", "attempt", "attempt_path", "submitted_at", "started_at", "executor", "claims")


class Ends(Protocol):
    """What following needs of ending (``shared.lifecycle.ending.Outcomes``)."""

    async def end(
        self, action: ActionDoc, target: ActionState, reason: str, error: str | None = None, *,
        sources: list[ActionState], where: dict[str, Any] | None = None,
    ) -> ActionDoc | None: ...  # fmt: skip

    async def ready_children(
        self, action: ActionDoc, skip: list[str] | None = None, size: int | None = None
    ) -> None: ...


class Following:
    def __init__(
        self, store: Store, mover: Mover, by: str, ends: Ends, replanner: Replans, takeover_retries: int
    ) -> None:
        self.store, self.mover, self.by = store, mover, by
        self.ends = ends
        self.replanner = replanner
        self.takeover_retries = takeover_retries

    def failures(self, producer: ActionDoc, reason: str | None) -> int:
        """Failed computations of the dataset along the takeover chain, this end included."""
        return int(producer.get("takeover_failures") or 0) + int(reason in COMPUTATION_FAILED)

    def exhausted(self, producer: ActionDoc, reason: str | None) -> bool:
        return self.failures(producer, reason) > self.takeover_retries

    async def elect(self, producer_id: str, reason: str, job_alive: bool = False) -> str | None:
        """Choose the follower that carries on an unfinished producer's computation and
        hand the work to it; the successor's id (None: no follower may). Idempotent: a
        successor elected by a caller that died before handing the work over is handed it
        now; one that ended without taking over is replaced.
        ``job_alive``: the producer's job runs on (its workflow was killed), to be adopted."""
        for _ in range(ELECTIONS):
            producer = await acts.get(self.store, producer_id)
            if producer is None:
                return None
            if elected := producer.get("successor"):
                successor = await acts.get(self.store, elected)
                if successor is not None and successor.get("takeover_of") == producer_id:
                    return elected  # it took over (whatever became of it since: its followers see to it)
                waiting = successor is not None and successor["state"] == A.FOLLOWING
                if waiting and successor.get("follows") == producer_id:  # elected, not handed over yet
                    if await self.take_over(successor, producer, reason, job_alive):
                        return elected
                await acts.clear_successor(self.store, producer_id, elected)
                continue
            if self.exhausted(producer, reason):
                return None
            candidates = await self.candidates(producer)
            if not candidates:
                return None
            if await acts.elect_successor(self.store, producer_id, candidates[0]["_id"]):
                if await self.take_over(candidates[0], producer, reason, job_alive):
                    return candidates[0]["_id"]
                await acts.clear_successor(self.store, producer_id, candidates[0]["_id"])
        return None

    async def candidates(self, producer: ActionDoc) -> list[ActionDoc]:
        """Followers still following it whose workflow still needs them, oldest first."""
        found = await acts.following(self.store, producer["_id"])
        killed = await self.killed(found)
        return sorted((f for f in found if f["_id"] not in killed), key=lambda f: (f["created_at"], f["_id"]))

    async def killed(self, followers: list[ActionDoc]) -> set[str]:
        """The followers no longer needed: flagged, or their workflow's kill is requested."""
        gone = set()
        for wf_id in {f["workflow_id"] for f in followers}:
            wf = await wfs.get(self.store, wf_id, {"kill_requested": 1})
            if wf is None or wf.get("kill_requested"):
                gone.add(wf_id)
        return {f["_id"] for f in followers if f.get("kill_requested") or f["workflow_id"] in gone}

    async def take_over(self, follower: ActionDoc, producer: ActionDoc, reason: str, job_alive: bool) -> bool:
        """The elected follower carries on: True once it did (here or by a concurrent caller)."""
        fid, pid = follower["_id"], producer["_id"]
        # Never a follower its workflow's kill has flagged: that kill moves one state at a
        # time (WAITING before FOLLOWING), and one taking over between two of its writes
        # would be left WAITING for ever. Refused, it stays FOLLOWING for the kill to end
        # (docs/state-machines.md, "Kill").
        guard = {"sources": [A.FOLLOWING], "where": {"follows": pid, "kill_requested": {"$ne": True}}}
        common = {
            "decision": "compute", "reason": "takeover", "takeover_of": pid, "error": None,
            "takeover_failures": self.failures(producer, reason), "secret": secrets.token_urlsafe(18),
        }  # fmt: skip
        # The successor becomes a producer of the dataset before the old one lets go of it.
        await ds.prepare_compute(
            self.store, follower["hash"], {}, follower["output_path"], fid, bool(follower.get("leaf")), self.by, []
        )
        moved = None
        if job_alive and producer["state"] in (A.SUBMITTED, A.RUNNING) and producer.get("job_id"):
            handed = await acts.hand_job_to(self.store, producer, fid)
            if handed is not None:
                for h in handed.get("claims", []):  # what the running job reads stays protected
                    await ds.add_claims(self.store, h, [fid])
                now = time.time()
                moved = await self.mover.action(
                    fid, handed["state"], **guard, note=f"adopted the job of {pid}",
                    set={**common, **{k: handed.get(k) for k in JOB_FIELDS},
                         "next_poll_at": now, "poll_count": 0, "finish_lease_at": 0.0,
                         # The adopted job runs under the successor's own timeout, from its start.
                         **({"timeout_at": (handed.get("started_at") or now) + float(t)}
                            if (t := follower.get("timeout_seconds")) else {})},
                )  # fmt: skip
                if moved is not None:
                    log.info("%s adopted the running job %s of %s", fid, handed["job_id"], pid)
        if moved is None and not (job_alive and producer.get("job_id")):
            try:
                pending, claims = await self.replanner.inputs(follower)
            except CannotReplan as exc:
                await self.ends.end(follower, A.FAILED, "upstream_failed", str(exc), **guard)
                await self.let_go(follower, pid)
                return False
            moved = await self.mover.action(
                fid, A.WAITING if pending else A.READY, **guard, note=f"takes over from {pid} ({reason})",
                set={**common, "pending_parents": pending, "claims": claims},
            )  # fmt: skip
            if moved is not None:
                log.info("%s takes over the computation of %s from %s (%s)", fid, follower["hash"][:12], pid, reason)
                if pending:
                    await self.replanner.recheck(fid, pending)
        if moved is not None:
            return True
        fresh = await acts.get(self.store, fid, {"takeover_of": 1})
        if fresh is not None and fresh.get("takeover_of") == pid:
            return True  # a concurrent caller handed it over
        await self.let_go(follower, pid)
        return False

    async def let_go(self, follower: ActionDoc, producer_id: str) -> None:
        """A successor that did not take over (killed meanwhile, or its inputs cannot be
        had) keeps nothing: not the job, not the dataset, not what re-planning claimed
        for it. A dataset it alone was producing never existed (DELETED)."""
        fid = follower["_id"]
        await acts.take_job_back(self.store, producer_id, fid)
        held = {follower["hash"]: {fid}}
        for parent in await acts.get_many(self.store, follower.get("parents", []), {"hash": 1, "managed": 1}):
            if parent.get("managed"):
                held.setdefault(parent["hash"], set()).add(fid)
        produced = {follower["hash"]} if follower.get("managed") else set()
        await ds.release(self.store, held, produced, self.by, "successor gone")

    async def resolve(self, producer: ActionDoc, followers: list[ActionDoc] | None = None) -> None:
        """After ``producer``'s terminal move: every follower still following it completes,
        follows the successor, or fails. ``followers``: those its caller read after that
        move (else they are read here)."""
        pid = producer["_id"]
        if followers is None:
            followers = await acts.following(self.store, pid)
        if not followers:
            return
        if producer["state"] == A.FINISHED:
            for f in followers:
                await self.complete(f, producer)
            return
        successor = await self.elect(pid, producer.get("reason") or "")
        killed = await self.killed(followers)
        for f in followers:
            if f["_id"] == successor:
                continue
            guard = {"sources": [A.FOLLOWING], "where": {"follows": pid}}
            if f["_id"] in killed:
                # Its workflow's kill may have passed it by (re-planning made it follow after
                # the bulk move): it ends here, or it would wait for nobody.
                await self.ends.end(f, A.KILLED, "killed", sources=[A.FOLLOWING], where={"follows": pid})
            elif successor:
                await acts.add_follower(self.store, successor, f["_id"])
                # If the successor ended meanwhile, the sweep resolves this follower against it.
                await self.mover.action(f["_id"], A.FOLLOWING, **guard, set={"follows": successor},
                                        note=f"follows {successor}, which took over from {pid}")  # fmt: skip
            elif self.exhausted(producer, producer.get("reason")):
                error = f"computing its dataset failed in {pid}: {producer.get('error') or producer.get('reason')}"
                await self.ends.end(f, A.FAILED, "upstream_failed", error, **guard)
            # Otherwise no election could be held (each successor went away): the sweep tries again.

    async def complete(self, follower: ActionDoc, producer: ActionDoc) -> None:
        """The producer committed: the follower's children may run, then it ends REUSED
        (the step the sweep keys on comes last). A child re-planning added while it
        followed is readied from the document the move returns."""
        await self.ends.ready_children(follower, size=producer.get("size"))
        done = await self.mover.action(
            follower["_id"], A.REUSED, sources=[A.FOLLOWING], where={"follows": producer["_id"]},
            set={"finished_at": time.time(), "size": producer.get("size"),
                 "saved_seconds": producer.get("seconds") or 0.0},
            note=f"reused what {producer['_id']} computed",
        )  # fmt: skip
        if done is not None:
            await self.ends.ready_children(done, skip=follower.get("children"))

    async def sweep(self) -> None:
        """Followers whose producer ended (or vanished) without resolving them: a crash
        between the producer's end and its followers', or a follower registered while its
        producer was still being planned."""
        followers = await acts.in_state(self.store, A.FOLLOWING, fields={"follows": 1})
        for pid in {f.get("follows") or "" for f in followers}:
            producer = await acts.get(self.store, pid)
            if producer is None:
                # Its workflow's planning was undone, or is still going on: once it is gone
                # for good, each follower computes for itself. (Not planned any more may
                # also mean written just now: it is read again.)
                planned = await acts.being_planned(self.store, pid)
                if not planned and await acts.get(self.store, pid, {"_id": 1}) is None:
                    for f in await acts.following(self.store, pid):
                        await self.take_over(f, {"_id": pid, "state": A.KILLED}, "gone", job_alive=False)
            elif producer["state"] in ACTION_TERMINAL:
                await self.resolve(producer)
