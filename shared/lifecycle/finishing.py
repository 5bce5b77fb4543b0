"""Finishing the jobs that end together: the signed notifications of jobs that end while
others are being finished are finished together, next, in a group commit
(``shared.group_commit``; docs/performance.md, "Work in groups").

A lone end is finished as it always was (``Outcomes.finish_notified_alone``), so a
chain's hop pays what it paid. A group pays each of its store commands once: the finish
leases in one guarded write and one read by ``_id`` (beside them, the datasets in one
read), the datasets' guarded writes in one per state (``datasets.record_outputs``), the
release of what the successes read in one, their FINISHED moves in one per state
(``Mover.actions_each``). Every write keeps its guard, and a document that a group's
write did not move (it changed since it was read) takes the single-document path, so an
end is still finished exactly once, under its lease (docs/state-machines.md, "Ending an
action"). What is not a plain success (a failure, a kill, a missing output, a dataset
being deleted) is finished as it would be alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.executors.base import JobState, JobStatus
from shared.states import ActionState
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store.actions import ActionDoc

if TYPE_CHECKING:
    from shared.lifecycle.ending import Committed, Outcomes

log = logging.getLogger(__name__)
A = ActionState
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED)


@dataclass(frozen=True)
class Notified:
    """A job's end, as its signed notification names it."""

    action_id: str
    job_id: str
    dataset: str | None  # the action's dataset (signed), None if it is not managed
    succeeded: bool


@dataclass
class Leased:
    """A notified end whose finish lease was taken: what finishing it reads."""

    action: ActionDoc  # as the lease found it
    token: str
    dataset: dict[str, Any] | None  # its dataset, read beside the lease
    status: JobStatus | None = None
    moved: ActionDoc | None = None  # its terminal move, once made


async def finish_together(outcomes: Outcomes, ends: list[Notified]) -> list[bool | BaseException]:
    """Finish the jobs' ends ``ends``: for each, True if it was finished here, False if the
    caller is to read the action and check it (as ``Outcomes.finish_notified_alone``), or
    what went wrong finishing it."""
    if len(ends) == 1:
        e = ends[0]
        return [await outcomes.finish_notified_alone(e.action_id, e.job_id, e.dataset, e.succeeded)]
    store = outcomes.store
    tokens = [uuid.uuid4().hex for _ in ends]
    wanted = sorted({e.dataset for e in ends if e.succeeded and e.dataset})
    leases, datasets = await asyncio.gather(
        acts.take_finish_leases(
            store, [(e.action_id, e.job_id, t) for e, t in zip(ends, tokens, strict=True)], time.time(),
            outcomes.finish_lease,
        ),
        ds.get_many(store, wanted) if wanted else _nothing(),
    )  # fmt: skip
    results: list[bool | BaseException] = [False] * len(ends)
    held: dict[int, Leased] = {}
    for i, (e, doc, token) in enumerate(zip(ends, leases, tokens, strict=True)):
        if doc is not None:
            held[i] = Leased(doc, token, datasets.get(e.dataset) if e.succeeded and e.dataset else None)
    asked = [
        i
        for i, h in held.items()
        if not h.action.get("job_handed_to") and (ends[i].dataset is None or h.action.get("hash") == ends[i].dataset)
    ]
    statuses = await asyncio.gather(*(outcomes.executor.status(ends[i].job_id) for i in asked), return_exceptions=True)
    for i, status in zip(asked, statuses, strict=True):
        if isinstance(status, BaseException):
            results[i] = status
        else:
            held[i].status = status
    # Nothing to finish (handed over, another dataset, not ended, the executor away): the lease goes back at once.
    ended = {i: h for i, h in held.items() if h.status is not None and h.status.state in ENDED}
    for i, h in held.items():
        if i not in ended:
            await _drop(outcomes, h)
    succeeded = {i: h for i, h in ended.items() if h.status is not None and h.status.state == JobState.SUCCEEDED}
    others = [i for i in ended if i not in succeeded]

    async def finish_other(i: int) -> None:
        await outcomes.finish(ended[i].action, _status(ended[i]), ended[i].token, None)

    done = await asyncio.gather(
        succeed_together(outcomes, list(succeeded.values())), *(finish_other(i) for i in others),
        return_exceptions=True,
    )  # fmt: skip
    outcome_of_successes, outcomes_of_others = done[0], done[1:]
    for n, i in enumerate(succeeded):
        if isinstance(outcome_of_successes, BaseException):
            results[i] = outcome_of_successes
        else:
            results[i] = error if (error := outcome_of_successes[n]) is not None else True
    for i, r in zip(others, outcomes_of_others, strict=True):
        results[i] = r if isinstance(r, BaseException) else True
    return results


async def succeed_together(outcomes: Outcomes, group: list[Leased]) -> list[BaseException | None]:
    """``Outcomes.succeed`` for many leased successes (each with its ``status``), with the
    store commands of the plain ones made together: what went wrong for each (None:
    nothing). A success left unmoved has its lease dropped, as ``Outcomes.finish`` does."""
    from shared.lifecycle.ending import Committed

    errors: list[BaseException | None] = [None] * len(group)
    try:
        firsts = await asyncio.gather(
            *(outcomes.commit_output(h.action, _status(h), h.dataset) for h in group), return_exceptions=True
        )
        committed: dict[int, Committed] = {}
        for n, (h, first) in enumerate(zip(group, firsts, strict=True)):
            if isinstance(first, BaseException):
                errors[n] = first
            elif isinstance(first, Committed):
                committed[n] = first
            else:
                h.moved = first  # ended otherwise (its output missing or refused), or left as it was
        recorded = await _record(outcomes, committed, errors)
        plain = []
        for n in committed:
            if n in recorded:
                try:
                    await outcomes.before_finished(committed[n])
                except Exception as exc:
                    errors[n] = exc
                    continue
                plain.append(n)
        # What they read is free then (record_output struck them from producers).
        reads: dict[str, set[str]] = {}
        for n in plain:
            for h in group[n].action.get("claims", []):
                reads.setdefault(h, set()).add(group[n].action["_id"])
        await ds.release(outcomes.store, reads, set(), outcomes.by, "finished")
        await _move_finished(outcomes, [(group[n], committed[n]) for n in plain])
        for n in plain:
            h = group[n]
            if h.moved is not None:
                try:
                    await outcomes.after_finished(committed[n], h.moved, recorded[n])
                except Exception as exc:
                    errors[n] = exc
    finally:
        for h in group:
            if h.moved is None:
                await _drop(outcomes, h)
    return errors


async def _record(
    outcomes: Outcomes, committed: dict[int, Committed], errors: list[BaseException | None]
) -> dict[int, dict[str, Any] | None]:
    """Record the committed outputs of the managed successes in their datasets together:
    each one's dataset as recorded, by position (an unmanaged one's None); a success
    missing here is left as it was (its dataset is being deleted)."""
    recorded: dict[int, dict[str, Any] | None] = {n: None for n, c in committed.items() if not c.action.get("managed")}
    managed = [n for n, c in committed.items() if c.action.get("managed")]
    outputs = await asyncio.gather(*(outcomes.output_of(committed[n]) for n in managed))
    for n, r in zip(managed, await ds.record_outputs(outcomes.store, outputs, outcomes.by), strict=True):
        if isinstance(r, ds.Deferred):
            log.info("%s: dataset is being deleted; committing after it is gone", committed[n].action["_id"])
            continue
        try:
            await outcomes.recorded(committed[n])
        except Exception as exc:
            errors[n] = exc
            continue
        recorded[n] = r
    return recorded


async def _move_finished(outcomes: Outcomes, group: list[tuple[Leased, Committed]]) -> None:
    """The FINISHED moves of committed successes: in one write per state they were leased
    in, each guarded as alone; one that did not move so (it moved meanwhile, SUBMITTED to
    RUNNING) is moved alone, from either."""
    by_state: dict[str, list[tuple[Leased, Committed]]] = {}
    for h, c in group:
        by_state.setdefault(str(h.action["state"]), []).append((h, c))
    for state, members in by_state.items():
        if len(members) == 1:
            continue
        moves, more = [], {}
        for h, c in members:
            fields = outcomes.finished_move(c)
            moves.append((h.action["_id"], fields["where"], fields["set"]))
            more[h.action["_id"]] = {"$push": fields["push"]}
        docs = await outcomes.mover.actions_each(
            moves, A.FINISHED, source=ActionState(state), by=outcomes.by, more=more
        )  # fmt: skip
        moved = {d["_id"]: d for d in docs}
        for h, _ in members:
            h.moved = moved.get(h.action["_id"])
    for h, c in group:
        if h.moved is None:
            h.moved = await outcomes.mover.action(
                h.action["_id"], A.FINISHED, by=outcomes.by, sources=[A.SUBMITTED, A.RUNNING],
                **outcomes.finished_move(c),
            )  # fmt: skip


def _status(h: Leased) -> JobStatus:
    if h.status is None:
        raise ValueError(f"{h.action['_id']}: finished before its executor was asked")
    return h.status


async def _drop(outcomes: Outcomes, h: Leased) -> None:
    try:
        await acts.drop_finish_lease(outcomes.store, h.action["_id"], h.token)
    except Exception:
        log.warning("%s: could not drop its finish lease; it expires", h.action["_id"], exc_info=True)


def _nothing() -> Awaitable[dict[str, dict[str, Any]]]:
    async def nothing() -> dict[str, dict[str, Any]]:
        return {}

    return nothing()
