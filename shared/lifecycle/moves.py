"""The guarded writer with its effects: every state move of a workflow, action or dataset.

``Mover.action``/``dataset``/``workflow`` make one guarded move (``transition``) and, if
it won, apply that move's effects from ``shared.lifecycle.effects``: events, usage
statistics, and settling the workflow of an action that ended. ``actions_many`` is the
bulk form, ``actions_each`` the grouped one (many moves, each with its own guard, in one
write). A lost race (``None`` back) has no effect, so a move repeated by a retry, a
second replica or a repair sweep counts and announces once.

The effects of an action's end (FINISHED) are group-committed: moves that win while
another's effects are being applied have theirs applied together, next, with one count
of their workflow's live actions, one statistics write per bucket and their events
published at once (docs/performance.md, "Work in groups"). Alone, a move's effects are
applied at once, as before; either way ``action`` returns once they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.bus import Bus
from shared.events import Event, EventType, Subject, checked
from shared.group_commit import GroupCommit
from shared.lifecycle import reserving
from shared.lifecycle.effects import PAYLOAD_OF, Effect, effects_of
from shared.states import ACTION_TERMINAL, ACTION_TRANSITIONS, TABLES, ActionState, WorkflowState
from shared.store import actions as acts
from shared.store import stats
from shared.store import workflows as wfs
from shared.store.client import Store
from shared.store.transitions import transition, transition_each, transition_many

A = ActionState

Doc = dict[str, Any]
W = WorkflowState
# Workflows whose settling waits for the end of a ``Mover.batch()``, with the task that
# opened it: a task started inside the batch inherits the variable but not the batch.
_settle_later: contextvars.ContextVar[tuple[asyncio.Task | None, set[str]] | None] = contextvars.ContextVar(
    "settle_later", default=None
)


def _open_batch() -> set[str] | None:
    later = _settle_later.get()
    return later[1] if later is not None and later[0] is asyncio.current_task() else None


COLLECTIONS = {"action": "actions", "dataset": "datasets", "workflow": "workflows"}
# The moves whose effects concurrent winners apply together (``Mover.grouped``): an
# action's success, the one end every action of a busy workflow makes.
GROUPED: frozenset[tuple[str, str]] = frozenset({("action", A.FINISHED)})
# How long usage statistics may be held in a running workflow's document (``Effect.held``)
# before its next settling counts them, seconds: its end counts them at once.
HOLD_STATS = 30.0
# What a bulk move reads back of the moved actions leaves out: read by no effect (payloads,
# counters, settling, releasing, following), and most of a big workflow's bytes.
LEFT_OUT = ("definition", "history", "parents", "parent_local_ids", "children", "pending_parents", "input_paths",
            "secret", "miss")  # fmt: skip


def source_of(doc: Doc, sources: list[str] | None) -> str | None:
    """The state a document was moved from: the caller's only source, else the entry
    before the last in its history (the move's own entry is the last)."""
    if sources is not None and len(sources) == 1:
        return str(sources[0])
    hist = doc.get("history") or []
    return hist[-2].get("state") if len(hist) >= 2 and isinstance(hist[-2], dict) else None


@dataclass
class Mover:
    store: Store
    bus: Bus
    producer: str  # the service named as the events' producer
    # The group commits of the GROUPED moves' effects, by (entity, source, target).
    _groups: dict[tuple[str, str | None, str], GroupCommit[Doc, None]] = field(
        default_factory=dict, init=False, repr=False
    )

    async def action(self, action_id: str, target: ActionState, *, by: str | None = None, **kw: Any) -> Doc | None:
        return await self._move("action", action_id, target, by, kw)

    async def dataset(self, h: str, target: str, *, by: str | None = None, **kw: Any) -> Doc | None:
        return await self._move("dataset", h, target, by, kw)

    async def workflow(
        self, workflow_id: str, target: WorkflowState, *, by: str | None = None, arrivals: list[Doc] | None = None,
        **kw: Any,
    ) -> Doc | None:  # fmt: skip
        """``arrivals``: the actions its planning created, whose arrival effects come
        with this move's (after WORKFLOW_SUBMITTED, before WORKFLOW_FINISHED)."""
        return await self._move("workflow", workflow_id, target, by, kw, arrivals)

    async def _move(
        self, entity: str, doc_id: Any, target: str, by: str | None, kw: dict[str, Any],
        arrivals: list[Doc] | None = None,
    ) -> Doc | None:  # fmt: skip
        coll = self.store.db[COLLECTIONS[entity]]
        doc = await transition(coll, TABLES[entity], doc_id, target, by=by or self.producer, **kw)
        if doc is None:
            return None
        source = source_of(doc, kw.get("sources"))
        if (entity, target) in GROUPED and arrivals is None and _open_batch() is None:
            await self.grouped(entity, doc, source, target)
        else:
            await self.apply(entity, [doc], source, target, arrivals)
        return doc

    async def grouped(self, entity: str, doc: Doc, source: str | None, target: str) -> None:
        """Apply a won move's effects together with those of the moves that won while the
        previous group's were being applied (``shared.group_commit``): returns once
        ``doc``'s effects were applied."""
        key = (entity, source, target)
        group = self._groups.get(key)
        if group is None:

            async def apply(docs: list[Doc]) -> list[None]:
                await self.apply(entity, docs, source, target)
                return [None] * len(docs)

            group = self._groups[key] = GroupCommit(apply)
        await group(doc)

    async def actions_many(
        self, where: Doc, target: ActionState, *, sources: list[ActionState], by: str | None = None,
        set: Doc | None = None, note: str | None = None,
        before_effects: Callable[[list[Doc]], Awaitable[None]] | None = None,
    ) -> list[Doc]:  # fmt: skip
        """Move every action matching ``where`` in one of ``sources`` to ``target``, one
        write per source state, then apply the effects to the moved ones (each write's
        tagged with its own batch token, to read them back by equality and know the state
        they left); ``before_effects`` runs in between, so what the moved actions held is
        released before anyone hears of the move. The moved documents come back, without
        what no effect reads (``LEFT_OUT``: a big workflow's are read back fast)."""
        batch = uuid.uuid4().hex
        by_source: dict[str, list[Doc]] = {}
        for s in sources:
            token = f"{batch}.{s}"
            n = await transition_many(
                self.store.actions, ACTION_TRANSITIONS, where, target, by=by or self.producer, sources=[s],
                set={**(set or {}), "move_batch": token}, note=note,
            )  # fmt: skip
            if n:
                by_source[str(s)] = await acts.in_state(
                    self.store, target, {**where, "move_batch": token}, dict.fromkeys(LEFT_OUT, 0)
                )
        moved = [d for docs in by_source.values() for d in docs]
        if before_effects is not None:
            await before_effects(moved)
        for source, docs in by_source.items():
            await self.apply("action", docs, source, target)
        return moved

    async def actions_each(
        self, moves: list[tuple[str, Doc, Doc]], target: ActionState, *, source: ActionState, by: str | None = None,
        note: str | None = None, more: dict[str, dict[str, Doc]] | None = None,
    ) -> list[Doc]:  # fmt: skip
        """Move many actions from ``source`` to ``target``, each guarded by its own ``where``
        and recording its own ``set`` (``moves``: id, where, set; ``more``: other update
        operators by id, as ``transition_each`` takes them), in one write; then one read of
        them by id tells which moved (tagged with a batch token), and the moved ones have
        their effects. The moved documents come back, in ``moves``' order."""
        batch = uuid.uuid4().hex
        n = await transition_each(
            self.store.actions, ACTION_TRANSITIONS, moves, target, by=by or self.producer, source=source,
            token=batch, note=note, more=more,
        )  # fmt: skip
        if not n:
            return []
        found = {d["_id"]: d for d in await acts.get_many(self.store, [m[0] for m in moves])}
        moved = [d for m in moves if (d := found.get(m[0])) is not None and d.get("move_batch") == batch]
        if moved:
            await self.apply("action", moved, str(source), target)
        return moved

    async def publish(self, event_type: EventType, entity: str, doc: Doc, **extra: Any) -> None:
        """One event about ``doc``, its payload read from it (``extra`` on top): the one that
        follows no move (an action's job id was recorded: ACTION_SUBMITTED)."""
        payload = PAYLOAD_OF[event_type](doc)
        if payload is not None:
            await self._publish(event_type, entity, doc, {**payload, **extra})

    async def _publish(self, event_type: EventType, entity: str, doc: Doc, payload: dict[str, Any]) -> None:
        await self.bus.publish(self._event(event_type, entity, doc, payload))

    def _event(self, event_type: EventType, entity: str, doc: Doc, payload: dict[str, Any]) -> Event:
        return Event(
            type=event_type, producer=self.producer, subject=subject(entity, doc), payload=checked(event_type, payload)
        )

    async def arrived(self, entity: str, docs: list[Doc]) -> None:
        """Documents just created in their initial state: the effects of arriving there."""
        by_state: dict[str, list[Doc]] = {}
        for d in docs:
            by_state.setdefault(d["state"], []).append(d)
        for state, group in by_state.items():
            await self.apply(entity, group, None, state)

    async def apply(
        self, entity: str, docs: list[Doc], source: str | None, target: str, arrivals: list[Doc] | None = None
    ) -> None:
        if entity == "action":  # an attempt that ended frees its room in the budget
            await reserving.settle(self.store, docs, source, target)
        # The events of every effect go out together, after their writes, with one wait for
        # the broker's confirms (a success's action.running, action.finished and
        # dataset.stored; a submission's hundreds of READY): published before any other
        # move's (arrivals, the workflow's end), so their order holds.
        events: list[Event] = []
        for effect in effects_of(entity, source, target):
            if effect.after_arrivals and arrivals:
                await self.bus.publish_many(events)
                events = []
                await self.arrived("action", arrivals)
                arrivals = None
            counted: dict[str, Doc | None] = {}  # each workflow as its count left it
            if effect.open_delta:  # first: what settling reads
                by_workflow: dict[str, int] = {}
                held: dict[str, dict[float, dict[str, float]]] = {}
                for d in docs:
                    by_workflow[d["workflow_id"]] = by_workflow.get(d["workflow_id"], 0) + effect.open_delta
                    if effect.held and effect.counters is not None:
                        at = stats.bucket_of(float(d.get(effect.at) or time.time()))
                        sums = held.setdefault(d["workflow_id"], {}).setdefault(at, {})
                        for k, v in effect.counters(d).items():
                            sums[k] = sums.get(k, 0) + v
                now = time.time()
                for wf_id, delta in by_workflow.items():
                    counted[wf_id] = await wfs.count_open(self.store, wf_id, delta, now, held.get(wf_id))
            if not (effect.held and effect.open_delta):
                await self._count(effect, docs)
            events += [
                self._event(event_type, entity, d, body)
                for d in docs
                for event_type, payload in effect.events
                if (body := payload(d)) is not None
            ]
            if effect.settle:
                await self.bus.publish_many(events)
                events = []
                for wf_id in dict.fromkeys(d["workflow_id"] for d in docs):
                    await self.settle(wf_id, seen=counted.get(wf_id))
        await self.bus.publish_many(events)
        if arrivals:
            await self.arrived("action", arrivals)

    async def _count(self, effect: Effect, docs: list[Doc]) -> None:
        """One statistics write per finest bucket, failure reason and owner, however many
        documents (every coarser bucket holds the finest one's whole)."""
        if effect.counters is None and not effect.failure:
            return
        groups: dict[tuple[float, str | None, str | None], tuple[dict[str, float], int]] = {}
        for d in docs:
            reason = d.get("reason") if effect.failure else None
            key = (stats.bucket_of(float(d.get(effect.at) or time.time())), reason, d.get("owner"))
            sums, n = groups.get(key, ({}, 0))
            for k, v in (effect.counters(d) if effect.counters else {}).items():
                sums[k] = sums.get(k, 0) + v
            groups[key] = (sums, n + 1)
        for (at, reason, owner), (sums, n) in groups.items():
            await stats.count(self.store, at, failure=reason, failures=n, owner=owner, **sums)

    async def settle(self, workflow_id: str, recount: bool = False, seen: Doc | None = None) -> Doc | None:
        """End a RUNNING workflow whose actions all ended; idempotent. Inside ``batch()``
        it waits for the batch's end, so a cascade settles each workflow once.

        Its count of live actions (``open_actions``, kept by the moves' effects) says
        whether anything is left, so an action's end costs one read; the actions are
        read once, when the count reaches zero. ``recount`` (the repair sweep, for a
        workflow quiet for a while) reads them anyway and corrects a count a crash left
        too high. ``seen``: the workflow as the count of the move being settled left it
        (``wfs.count_open``), which saves reading it again."""
        later = _open_batch()
        if later is not None:
            later.add(workflow_id)
            return None
        wf = seen if seen is not None and not recount else await wfs.get(self.store, workflow_id, wfs.SETTLE_FIELDS)
        if wf is None:
            return None
        if wf["state"] != W.RUNNING:
            if wf.get("held_stats_since") is not None:  # held after its end: an effect late past a repair's
                await self.count_held(workflow_id)
            return None
        if wf.get("kill_requested") and wf.get("kill_applied") is False:
            # Its kill is being applied: ``kill_workflow`` settles it once it has released
            # everything (until then the repair sweep applies the kill again).
            return None
        held_since = wf.get("held_stats_since")
        if held_since is not None and (recount or time.time() - float(held_since) > HOLD_STATS):
            await self.count_held(workflow_id)  # a long workflow's are counted as it goes
            held_since = None
        if not recount and int(wf.get("open_actions") or 0) > 0:
            return None
        # Counted by the store, not read: a big workflow's states cost 0.6 s to read (docs/performance.md).
        states = await acts.state_counts(self.store, workflow_id)
        final = wfs.derive_counted(states, bool(wf.get("kill_requested")))
        if final is None:
            if recount:
                live = sum(n for s, n in states.items() if s not in ACTION_TERMINAL)
                if live != wf.get("open_actions"):
                    await wfs.recount_open(self.store, workflow_id, live, wf.get("last_move_at"))
            return None
        if held_since is not None:  # counted before anyone can see it ended
            await self.count_held(workflow_id)
        return await self.workflow(
            workflow_id, final, sources=[W.RUNNING], set={"finished_at": time.time(), "outcome": tally(states)}
        )

    async def count_held(self, workflow_id: str) -> None:
        """Add the usage statistics held in the workflow's document (``Effect.held``) to
        the statistics, taking them in one write so that they are counted once."""
        owner, held = await wfs.take_held_stats(self.store, workflow_id)
        for at, counters in sorted(held.items()):
            await stats.count(self.store, at, owner=owner, **counters)

    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """Settle each workflow this task touches inside once, at the end. Nothing is
        settled if the block fails: what it left undone is applied again first (by the
        poller, the repair sweep or a retry), and settling comes after that."""
        if _open_batch() is not None:
            yield
            return
        pending: set[str] = set()
        token = _settle_later.set((asyncio.current_task(), pending))
        try:
            yield
        finally:
            _settle_later.reset(token)
        for wf_id in sorted(pending):
            await self.settle(wf_id)


def outcome(actions: list[Doc]) -> dict[str, int]:
    """How a workflow's actions ended (read at its end; WORKFLOW_FINISHED says it)."""
    return tally(Counter(str(a["state"]) for a in actions))


def tally(states: Mapping[str, int]) -> dict[str, int]:
    """``outcome`` from how many actions are in each state (``actions.state_counts``)."""
    counted = {"finished": 0, "reused": 0, "skipped": 0, "failed": 0, "killed": 0}
    for state, n in states.items():
        if (key := str(state).lower()) in counted:
            counted[key] += n
    return counted


def subject(entity: str, d: Doc) -> Subject:
    if entity == "action":
        return Subject(
            owner=d.get("owner"), workflow_id=d.get("workflow_id"), action_id=d["_id"], dataset_hash=d.get("hash")
        )
    if entity == "dataset":
        return Subject(dataset_hash=d["_id"])
    return Subject(owner=d.get("owner"), workflow_id=d["_id"])
