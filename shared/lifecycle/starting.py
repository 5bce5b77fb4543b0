"""Starting an action: its attempt claimed and handed to the executor (thesis section 3.3;
docs/architecture.md, "action_manager").

PROCESSING is the synchronisation state: a scraper owns an action once its guarded
READY -> PROCESSING write wins, and only the owner (by lease) moves it to SUBMITTED. A
PROCESSING lease older than ``stale_after`` (its manager died) is taken again by any
scraper. An action named by its READY event is claimed READY -> SUBMITTED in one write
instead. Either claim first reserves room for its output in the storage budget
(``shared.lifecycle.reserving``); without room it stays READY, held. Its inputs are
checked just before its job is made; one gone is re-planned.
Submit errors go back to READY, counted, and FAILED past the ceiling.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Protocol

from shared import callback_tokens
from shared.config import Settings
from shared.errors import Refused
from shared.events import EventType
from shared.executors.base import Executor, JobFenced, JobRequest
from shared.hadoop.sqoop import sqoop_fields
from shared.lifecycle import attempts, cutoff, reserving
from shared.lifecycle.moves import Mover
from shared.lifecycle.replanning import CannotReplan, Replans
from shared.metrics import READY_TO_SUBMIT, SUBMIT_ERRORS
from shared.states import ActionState
from shared.storage import Storage
from shared.storage.base import InputsGone
from shared.store import Store
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store.actions import ActionDoc
from shared.workflow_spec import ActionType

log = logging.getLogger(__name__)
A = ActionState


# What a READY event names to claim: the action, the attempt it was readied for, its
# output path, and what its start reserves (None: the claim reads the action to know).
ReadyEvent = tuple[str, int, str, int | None]


class Ending(Protocol):
    """How a start that cannot go on ends its action (``shared.lifecycle.ending``)."""

    async def end(
        self, action: ActionDoc, target: ActionState, reason: str, error: str | None = None, *,
        sources: list[ActionState], where: dict[str, Any] | None = None, set: dict[str, Any] | None = None,
        note: str | None = None, by: str | None = None, record: dict[str, Any] | None = None,
    ) -> ActionDoc | None: ...  # fmt: skip

    async def stop_if_killed(self, action: ActionDoc | None, job_id: str) -> None: ...

    async def ready_children(
        self, action: ActionDoc, skip: list[str] | None = None, size: int | None = None
    ) -> None: ...


@dataclass
class Starter:
    store: Store
    storage: Storage
    executor: Executor
    mover: Mover
    ending: Ending
    replanning: Replans
    settings: Settings
    owner: str  # the lease owner: this manager
    # What the callback URL's token is signed with (``shared.callback_tokens``); empty:
    # the URL carries the action's stored secret, which the callback service reads.
    callback_key: bytes = b""
    # When stale PROCESSING leases were last looked for (see claim).
    stale_looked_at: float = 0.0
    # Where jobs notify their end (every start names it): worked out once.
    callback_base: str = field(init=False)

    def __post_init__(self) -> None:
        self.callback_base = self.settings.callback_url.rstrip("/")

    async def claim_attempt(
        self, action_id: str, attempt: int, output_path: str, reserve_bytes: int | None = None
    ) -> ActionDoc | None:
        """READY -> SUBMITTED: the next attempt recorded, ours, in one write. Guarded by the
        attempt the READY event named (an event about an earlier READY finds it moved on)
        and by the absence of a kill request, as the PROCESSING -> SUBMITTED move is.
        ``reserve_bytes``: what the event says its start reserves (None: not worked out, or
        the action may be cut off early: the action is read for it)."""
        if reserve_bytes is not None:
            # The guarded claim below checks the event is current; a reservation made for a
            # stale one is undone with the lost claim.
            action = ActionDoc(_id=action_id, managed=True, reserve_bytes=reserve_bytes)
        else:
            fields = {**reserving.FIELDS, "state": 1, "attempt": 1, "cutoff_candidate": 1, "timeout_seconds": 1}
            action = await acts.get(self.store, action_id, fields)
            if action is None or action["state"] != A.READY or int(action.get("attempt") or 0) != attempt:
                return None  # an event about an earlier READY
            if action.get("cutoff_candidate") and await self.cut_off(action_id):
                return None
        room = await self.reserve(action)
        if room is None:
            return None
        now = time.time()
        fields = self.attempt_fields(action_id, output_path, attempt + 1, now, action.get("timeout_seconds"))
        res = await self.mover.action(
            action_id, A.SUBMITTED, by=self.owner, sources=[A.READY],
            where={"attempt": attempt, "kill_requested": {"$ne": True}},
            set={"lease_owner": self.owner, "lease_at": now, **fields, **room},
        )  # fmt: skip
        if res is None:
            await reserving.undo(self.store, room)
        return res

    async def claim_attempts(self, events: list[ReadyEvent]) -> list[ActionDoc | None]:
        """``claim_attempt`` for many READY events at once (a submission readies hundreds):
        the attempts of those whose start reserves a known amount are claimed in one
        guarded write (``Mover.actions_each``) and one read, each guarded as
        ``claim_attempt``'s write is; the others one by one. One result per event, in order."""
        if len(events) == 1:
            return [await self.claim_attempt(*events[0])]
        out: list[ActionDoc | None] = [None] * len(events)
        now = time.time()
        moves, rooms = [], {}
        first: dict[str, int] = {}  # an action named twice is claimed once, for its first event
        for i, (action_id, attempt, output_path, reserve_bytes) in enumerate(events):
            if first.setdefault(action_id, i) != i:
                continue
            if reserve_bytes is None:
                out[i] = await self.claim_attempt(action_id, attempt, output_path, None)
                continue
            room = await self.reserve(ActionDoc(_id=action_id, managed=True, reserve_bytes=reserve_bytes))
            if room is None:
                continue
            rooms[action_id] = room
            fields = self.attempt_fields(action_id, output_path, attempt + 1, now)
            moves.append((
                action_id, {"attempt": attempt, "kill_requested": {"$ne": True}},
                {"lease_owner": self.owner, "lease_at": now, **fields, **room},
            ))  # fmt: skip
        moved = {d["_id"]: d for d in await self.mover.actions_each(moves, A.SUBMITTED, source=A.READY, by=self.owner)}
        for action_id, room in rooms.items():
            if action_id not in moved:  # an event about an earlier READY, or taken by another manager
                await reserving.undo(self.store, room)
        for action_id, doc in moved.items():
            out[first[action_id]] = doc
        return out

    async def cut_off(self, action_id: str) -> bool:
        """READY -> REUSED instead of a start when a parent's output is byte-identical to an
        earlier lineage's and that lineage's output of this action is stored
        (docs/planning.md, "Early cutoff"): its children read that output instead."""
        action = await acts.get(self.store, action_id)
        if action is None or action["state"] != A.READY:
            return False
        try:
            found = await cutoff.reusable(self.store, self.storage, action)
        except Exception:  # a cutoff missed is a computation, never an error
            log.exception("%s: early cutoff not looked up", action_id)
            return False
        if found is None:
            return False
        twin = {"hash": found.hash}
        moved = await self.mover.action(
            action_id, A.REUSED, by=self.owner, sources=[A.READY], where={"kill_requested": {"$ne": True}},
            set={"output_path": found.path, "twin": twin, "reason": found.reason, "finished_at": time.time(),
                 "saved_seconds": found.saved_seconds},
            note=found.reason,
        )  # fmt: skip
        if moved is None:
            return False
        log.info("%s: %s", action_id, found.reason)
        children = list(action.get("children", []))
        await ds.add_claims(self.store, found.hash, children)
        for child in children:
            await acts.redirect_input(self.store, child, action["output_path"], found.path, found.hash)
        await ds.set_twin(self.store, action["hash"], twin)
        # What it read, and the dataset it was to make (never made: gone), are free.
        held, produced = ds.held_by([action])
        await ds.release(self.store, held, produced, self.owner, "early_cutoff")
        await self.ending.ready_children(moved)
        return True

    async def reserve(self, action: ActionDoc) -> dict[str, Any] | None:
        """Room for the attempt's output in the storage budget: what its claim records, or
        None (held READY; docs/operations.md, "Storage budget")."""
        if not self.settings.budget_reservations:
            return {"reservation": None, "held": None}
        return await reserving.reserve(self.store, action, self.settings.capacity_bytes)

    def attempt_fields(
        self, action_id: str, output_path: str, attempt: int, now: float, timeout_seconds: float | None = None
    ) -> dict[str, Any]:
        """What the move to SUBMITTED records of the attempt it starts. An executor that
        names its jobs in advance (``Executor.job_id``) has the job id and the first check
        of its timeout recorded here, so nothing is written after the submit (the hop's
        ``record_job``; docs/performance.md, "A chain's hop"); another's are recorded with
        its job (``acts.record_job``). ``timeout_seconds``: the action's, if any (a claim
        that reads nothing knows it has none: ``effects._ready_action``)."""
        external_id = f"{action_id}#{attempt}"
        job_id = self.executor.job_id(external_id)
        return {
            "attempt": attempt,
            "external_id": external_id,
            "attempt_path": self.storage.attempt_path(output_path, action_id, attempt),
            "submitted_at": now,
            "next_poll_at": now + self.settings.poll_interval,
            "poll_count": 0,
            "job_id": job_id,
            "finish_lease_at": 0.0,
            "executor": self.executor.name,
            "started_at": None,  # an earlier attempt's
            # An earlier attempt's is cleared; the first check of this one's (pushed back to
            # the job's real start once it runs: ``Outcomes.enforce_timeout``).
            "timeout_at": acts.first_timeout_check(now, timeout_seconds) if job_id else None,
        }

    async def prune_jobs(self) -> bool:
        """Remove what the executor keeps of jobs that ended more than ``job_retention`` ago
        (the starter makes the job folders, so it prunes them). The jobs of attempts still
        in flight stay whatever their job says: the poller has yet to read how they ended."""
        keep: set[str] = set()
        for state in (A.SUBMITTED, A.RUNNING):
            in_flight = await acts.in_state(self.store, state, fields={"job_id": 1})
            keep |= {a["job_id"] for a in in_flight if a.get("job_id")}
        removed = await self.executor.prune(time.time() - self.settings.job_retention, keep)
        if removed:
            log.info("removed %d job folder(s) past their retention", removed)
        return False

    async def claim(self, limit: int) -> tuple[list[ActionDoc], int]:
        """The actions taken (READY, or PROCESSING with a stale lease), and how many were found to take."""
        stale = time.time() - self.settings.stale_after
        fields = {"lease_at": 1, "state": 1, "cutoff_candidate": 1, **reserving.FIELDS}
        candidates = await acts.in_state(self.store, A.READY, fields=fields, sort="updated_at", limit=limit)
        # A lease turns stale only after stale_after, so looking once per scrape interval is
        # soon enough; a scrape an event woke (an action just turned READY: a chain's hop)
        # does not pay that query (docs/architecture.md, "Query forms").
        now = time.time()
        if len(candidates) < limit and now - self.stale_looked_at >= self.settings.scrape_interval:
            self.stale_looked_at = now
            candidates += await acts.stale_leases(
                self.store, A.PROCESSING, stale, fields, limit=limit - len(candidates)
            )
        out, held = [], 0
        for c in candidates:
            ready = c["state"] == A.READY
            if ready and c.get("cutoff_candidate") and await self.cut_off(c["_id"]):
                continue
            # A READY action starts only with room for its output; a stale lease keeps its own.
            room = await self.reserve(c) if ready else {}
            if room is None:
                held += 1
                continue
            res = await self.take(c["_id"], c["state"], c.get("lease_at"), room)
            if res is not None:
                out.append(res)
            else:
                await reserving.undo(self.store, room)
        # Held actions are not found work: a scrape of only those waits for its timer.
        return out, len(candidates) - held

    async def take(
        self, action_id: str, state: A, lease_at: float | None = None, room: dict[str, Any] | None = None
    ) -> ActionDoc | None:
        """READY (or a stale PROCESSING lease) -> PROCESSING, ours: one guarded move."""
        return await self.mover.action(
            action_id, A.PROCESSING, by=self.owner, sources=[state],
            where={} if state == A.READY else {"lease_at": lease_at},
            set={"lease_owner": self.owner, "lease_at": time.time(), **(room or {})},
            note=None if state == A.READY else "stale lease taken over",
        )  # fmt: skip

    async def inputs_ready(self, action: ActionDoc, guard: dict[str, Any]) -> bool:
        """Just before the start, every input must be there (one ``exists`` each). One that
        vanished since planning is produced again inside the workflow (docs/planning.md,
        "Re-planning"), and the action waits for it instead of failing on a missing input.
        ``guard``: the ``sources`` and ``where`` of a move that holds while the action is
        still ours and has no job."""
        paths = action.get("input_paths", [])
        found = await asyncio.gather(*(self.storage.exists(p) for p in paths))
        if all(found):
            return True
        return await self.inputs_gone(action, [p for p, ok in zip(paths, found, strict=True) if not ok], guard)

    async def inputs_gone(self, action: ActionDoc, gone: list[str], guard: dict[str, Any]) -> bool:
        """``inputs_ready``'s answer once ``gone`` were found missing: True if they are
        stored again after all (re-planning found them), else False, the action ended or
        waiting for their producers."""
        log.warning("%s: input %s gone before the start; re-planning its producers", action["_id"], ", ".join(gone))
        try:
            pending, claims = await self.replanning.inputs(action)
        except CannotReplan as exc:
            await self.ending.end(action, A.FAILED, "input_missing", str(exc), **guard)
            return False
        if not pending:
            return True
        moved = await self.mover.action(
            action["_id"], A.WAITING, by=self.owner, **guard,
            set={"pending_parents": pending, "claims": claims}, note=f"input gone: waits for {', '.join(pending)}",
        )  # fmt: skip
        if moved is not None:
            await self.replanning.recheck(action["_id"], pending)
        return False

    async def start_attempt(self, action: ActionDoc) -> ActionDoc | None:
        """PROCESSING (our lease) -> SUBMITTED once its inputs are there: the attempt the
        scrape claimed, recorded. None if it is not to be submitted (an input gone, the
        lease taken over, its workflow being killed)."""
        lease = {"lease_owner": self.owner, "lease_at": action["lease_at"]}
        if not action.get("kill_requested") and not await self.inputs_ready(
            action, {"sources": [A.PROCESSING], "where": lease}
        ):
            return None
        fields = self.attempt_fields(
            action["_id"], action["output_path"], int(action.get("attempt", 0)) + 1, time.time(),
            action.get("timeout_seconds"),
        )  # fmt: skip
        res = await self.mover.action(
            action["_id"], A.SUBMITTED, by=self.owner, sources=[A.PROCESSING],
            # Its workflow is being killed: leave it to the kill, which ends it KILLED.
            where={**lease, "kill_requested": {"$ne": True}}, set=fields,
        )  # fmt: skip
        if res is None:
            # The lease was taken over (someone else has it), or its workflow is being
            # killed: then it is ours to end, if the kill did not end it already.
            mine = await acts.get(self.store, action["_id"])
            if mine and mine.get("kill_requested") and mine["state"] == A.PROCESSING:
                await self.ending.end(mine, A.KILLED, "killed", sources=[A.PROCESSING], where=lease, by=self.owner)
        return res

    async def claimed_attempt(self, action: ActionDoc) -> tuple[ActionDoc, list[str]] | None:
        """The attempt to submit of a claimed action: recorded now (PROCESSING, claimed by
        the scrape, its inputs checked) or already (SUBMITTED, claimed on its READY event),
        with the inputs its start is still to check. None if it is not to be submitted."""
        if action["state"] != A.SUBMITTED:
            res = await self.start_attempt(action)
            return None if res is None else (res, [])
        if time.time() - float(action["lease_at"]) > self.settings.stale_after / 2:
            # Queued long enough that the poller may soon judge its submitter lost (it
            # takes back a SUBMITTED attempt with no job after PINGO_STALE_AFTER): is it still ours?
            mine = await acts.get(self.store, action["_id"], {"state": 1, "external_id": 1})
            if not mine or mine["state"] != A.SUBMITTED or mine.get("external_id") != action["external_id"]:
                return None
        return action, list(action.get("input_paths", []))

    @staticmethod
    def no_job(action: ActionDoc) -> dict[str, Any]:
        """The guard of a move of a SUBMITTED attempt whose job is not made yet: its job id
        is None, or the one named with the claim."""
        guard = {"external_id": action["external_id"], "job_id": action.get("job_id")}
        return {"sources": [A.SUBMITTED], "where": guard}

    async def make_job(self, action: ActionDoc, inputs: list[str]) -> str | None:
        """The attempt's inputs checked (``inputs``: those still to check), its folder
        prepared and its job made: its job id, or None if an input is gone (the action
        then ends or waits for it: ``inputs_gone``). Where the storage is local, the three
        are one worker thread's work, the executor's (``Storage.preparer``;
        docs/performance.md, "A chain's hop"). Submitting an external id again returns its
        job (the Executor contract): no find first."""
        prepare = self.storage.preparer(action["attempt_path"], inputs, user=action.get("owner"))
        if prepare is None:
            if inputs and not await self.inputs_ready(action, self.no_job(action)):
                return None
            await self.storage.prepare(action["attempt_path"], user=action.get("owner"))
        try:
            return await self.executor.submit(self.job_request(action), prepare=prepare)
        except InputsGone as exc:
            # Found before the job was made: none was, so the no-job guard holds.
            if not await self.inputs_gone(action, exc.paths, self.no_job(action)):
                return None
        return await self.make_job(action, [])  # re-planning found nothing to wait for: it starts as it is

    async def submit(self, action: ActionDoc) -> None:
        """Hand a claimed action's attempt to the executor, and record its job if the claim
        could not (``attempt_fields``)."""
        claimed = await self.claimed_attempt(action)
        if claimed is None:
            return
        res, inputs = claimed
        attempt, external_id = res["attempt"], res["external_id"]
        # An action turns READY when its last parent ends: this is parent end -> child start.
        ready = [h["at"] for h in res.get("history") or [] if h.get("state") == A.READY]
        if ready:
            READY_TO_SUBMIT.observe(max(0.0, time.time() - ready[-1]))
        try:
            job_id = await self.make_job(res, inputs)
            if job_id is None:
                return
        except JobFenced as exc:
            # This submitter was slower than its lease: the poller took the attempt back
            # (the next one is its own), and no job of this one was started.
            log.warning("%s: %s", res["_id"], exc)
            return
        except Exception as exc:
            await self.submit_failed(res, external_id, exc)
            return
        if self.settings.fault_crash_after_submit:
            log.critical("fault injection: exiting after submitting %s as %s, before recording it", external_id, job_id)
            os._exit(137)
        if res.get("job_id") == job_id:
            # Recorded with the claim. Killed while we were submitting, its job is stopped
            # by the kill, which fences a job not made yet (``Executor.job_id``), and by the
            # poller, which stops a flagged action's job on its next poll (due at once).
            await self.mover.publish(EventType.ACTION_SUBMITTED, "action", res, job_id=job_id, attempt=attempt)
            return
        done = await acts.record_job(self.store, res["_id"], external_id, job_id, res.get("timeout_seconds"))
        if done is not None:
            await self.mover.publish(EventType.ACTION_SUBMITTED, "action", res, job_id=job_id, attempt=attempt)
        # Killed while we were submitting (no longer SUBMITTED, or flagged): the job must not run on.
        await self.ending.stop_if_killed(done, job_id)

    def job_request(self, action: ActionDoc) -> JobRequest:
        """What the executor is asked to run for the attempt ``action`` records."""
        definition = acts.definition_of(action)
        parameters = definition.get("configurationParameters", [])
        return JobRequest(
            action_id=action["_id"],
            external_id=action["external_id"],
            type=definition["type"],
            name=definition["name"],
            action_folder=action.get("action_folder_path"),
            main_class=definition.get("mainClassName"),
            command=definition.get("command"),
            arguments=[
                *(p["value"] for p in definition.get("additionalInput", [])),
                *action.get("input_paths", []),
                action["attempt_path"],
            ],
            # Its parents' outputs and its external inputs: what a sandboxed job is given back.
            inputs=[*action.get("input_paths", []), *(i["path"] for i in definition.get("inputs") or [])],
            configuration={p["key"] or "": p["value"] for p in parameters},
            secret_keys=[p["key"] for p in parameters if p.get("secret")],
            notify_url=self.notify_url(action),
            owner=action.get("owner"),
            mapper=definition.get("mapper"),
            reducer=definition.get("reducer"),
            input_format=definition.get("inputFormat"),
            output_format=definition.get("outputFormat"),
            mapreduce_api=definition.get("mapreduceApi") or "mapred",
            application=definition.get("application"),
            spark_opts=definition.get("sparkOpts") or [],
            sqoop=sqoop_fields(definition) if definition["type"] == ActionType.SQOOP else {},
        )

    def notify_url(self, action: ActionDoc) -> str:
        base = self.callback_base
        # An action id may hold what a URL path cannot (a space, '#'): percent-encoded.
        path = urllib.parse.quote(action["_id"], safe="")
        if not self.callback_key:
            return f"{base}/callback/{path}?secret={action['secret']}&jobId=$jobId&status=$status"
        # Signed: checked without a store read; the dataset it computes rides along, signed,
        # so its end reads it beside the finish lease (docs/performance.md, "A chain's hop").
        dataset = action.get("hash") if action.get("managed") else None
        token = callback_tokens.sign(self.callback_key, action["_id"], dataset)
        signed = f"&dataset={urllib.parse.quote(dataset, safe='')}" if dataset else ""
        return f"{base}/callback/{path}?secret={token}{signed}&jobId=$jobId&status=$status"

    async def submit_failed(self, action: ActionDoc, external_id: str, exc: Exception) -> None:
        """Back to READY, counted; past the retry ceiling the action ends FAILED, by the
        one ending protocol."""
        SUBMIT_ERRORS.inc()
        errors = int(action.get("submit_errors", 0)) + 1
        refused = isinstance(exc, Refused)
        tries = "not retried: refused" if refused else f"{errors}/{self.settings.submit_retry_ceiling}"
        message = f"submit failed ({tries}): {exc}"
        log.warning("%s: %s", action["_id"], message)
        guard = {"sources": [A.SUBMITTED], "where": {"external_id": external_id}, "note": message}
        record = acts.attempt_entry(action, attempts.SUBMIT_FAILED, message)
        if (await acts.get(self.store, action["_id"], {"kill_requested": 1}) or {}).get("kill_requested"):
            # Killed while it was being submitted: no retry, it ends KILLED.
            await self.ending.end(action, A.KILLED, "killed", message, by=self.owner, record=record, **guard)
        elif errors >= self.settings.submit_retry_ceiling or refused:
            # A refusal (a permission denied, a proxy user not trusted) would only be refused again.
            await self.ending.end(
                action, A.FAILED, "submit_failed", message, by=self.owner, set={"submit_errors": errors},
                record=record, **guard,
            )  # fmt: skip
        else:
            await self.mover.action(
                action["_id"], A.READY, by=self.owner, set={"submit_errors": errors, "error": message},
                push={"attempt_log": record}, **guard,
            )  # fmt: skip
