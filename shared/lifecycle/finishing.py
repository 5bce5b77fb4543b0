"""Finishing the jobs that end together, in two group commits (``shared.group_commit``;
docs/performance.md, "Work in groups"): the finish leases of ends notified (or polled)
while others' are being taken are taken together, next; the store work of successes
committed while others' is being done is done together, next.

Between the two, each end is finished on its own, as it always was: the executor asked,
the output committed and checked (work that may take long: a big output's checksum),
so no end waits for another's files. A lone end (a chain's) makes no group and pays
what it paid. A group pays each command once: the leases in one guarded write and one
read by ``_id`` (its datasets read beside them, in one), the datasets' records in one
guarded write per state (``datasets.record_outputs``), the release of what the
successes read in one, their FINISHED moves in one per state (``Mover.actions_each``).
Every write keeps its guard, and a document a group's write did not move (it changed
since it was read) takes the single-document path, so an end is still finished once,
under its lease (docs/state-machines.md, "Ending an action").
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from shared.states import ActionState
from shared.store import actions as acts
from shared.store import datasets as ds
from shared.store.actions import ActionDoc

if TYPE_CHECKING:
    from shared.lifecycle.ending import Committed, Outcomes

log = logging.getLogger(__name__)
A = ActionState
# A finish lease as ``Outcomes.lease`` answers it: the action (None: not taken), the
# lease's token, the action's dataset as read beside it (a success of a managed action).
Lease = tuple[ActionDoc | None, str, dict[str, Any] | None]


def reads_dataset(action: ActionDoc, succeeded: bool) -> bool:
    """Whether an end's dataset is read beside its lease: a success's commit starts from it."""
    return bool(succeeded and action.get("managed") and action.get("hash"))


async def lease_together(outcomes: Outcomes, asked: list[tuple[ActionDoc, bool]]) -> list[Lease]:
    """The finish leases of ``asked`` (an action, with ``_id`` and ``job_id``; whether its
    job succeeded), each as ``Outcomes.lease_alone`` takes it alone."""
    if len(asked) == 1:
        return [await outcomes.lease_alone(*asked[0])]
    store = outcomes.store
    tokens = [uuid.uuid4().hex for _ in asked]
    claims = [(a["_id"], a["job_id"], t) for (a, _), t in zip(asked, tokens, strict=True)]
    wanted = sorted({a["hash"] for a, succeeded in asked if reads_dataset(a, succeeded)})
    leased, datasets = await asyncio.gather(
        acts.take_finish_leases(store, claims, time.time(), outcomes.finish_lease), ds.get_many(store, wanted)
    )
    return [
        (doc, token, datasets.get(a["hash"]) if reads_dataset(a, succeeded) else None)
        for (a, succeeded), doc, token in zip(asked, leased, tokens, strict=True)
    ]


async def conclude_together(outcomes: Outcomes, group: list[Committed]) -> list[ActionDoc | BaseException | None]:
    """The store work of committed successes (``Outcomes.conclude_alone``, each alone):
    for each, its FINISHED move's document, None if it was left as it was (its dataset
    is being deleted, or the move lost), or what went wrong."""
    if len(group) == 1:
        return [await outcomes.conclude_alone(group[0])]
    out: list[ActionDoc | BaseException | None] = [None] * len(group)
    recorded = await _record(outcomes, group, out)
    plain: list[int] = []
    for n in recorded:
        try:
            await outcomes.before_finished(group[n])
        except Exception as exc:
            out[n] = exc
            continue
        plain.append(n)
    # What they read is free then (record_output struck them from producers).
    reads: dict[str, set[str]] = {}
    for n in plain:
        for h in group[n].action.get("claims", []):
            reads.setdefault(h, set()).add(group[n].action["_id"])
    await ds.release(outcomes.store, reads, set(), outcomes.by, "finished")
    moved = await _move_finished(outcomes, [group[n] for n in plain])
    for n, done in zip(plain, moved, strict=True):
        out[n] = done
        if done is not None:
            try:
                await outcomes.after_finished(group[n], done, recorded[n])
            except Exception as exc:
                out[n] = exc
    return out


async def _record(
    outcomes: Outcomes, group: list[Committed], out: list[ActionDoc | BaseException | None]
) -> dict[int, dict[str, Any] | None]:
    """Record the committed outputs of the managed successes in their datasets together:
    each one's dataset as recorded, by position (an unmanaged one's None); a success
    missing here is left as it was (its dataset is being deleted) or failed (``out``)."""
    recorded: dict[int, dict[str, Any] | None] = {n: None for n, c in enumerate(group) if not c.action.get("managed")}
    managed = [n for n, c in enumerate(group) if c.action.get("managed")]
    outputs = await asyncio.gather(*(outcomes.output_of(group[n]) for n in managed))
    for n, r in zip(managed, await ds.record_outputs(outcomes.store, outputs, outcomes.by), strict=True):
        if isinstance(r, ds.Deferred):
            log.info("%s: dataset is being deleted; committing after it is gone", group[n].action["_id"])
            continue
        try:
            await outcomes.recorded(group[n])
        except Exception as exc:
            out[n] = exc
            continue
        recorded[n] = r
    return dict(sorted(recorded.items()))


async def _move_finished(outcomes: Outcomes, group: list[Committed]) -> list[ActionDoc | None]:
    """The FINISHED moves of committed successes, in one write per state they were leased
    in, each guarded as alone; one that did not move so (it moved meanwhile, SUBMITTED
    to RUNNING) is moved alone, from either. Each one's document, None if it lost."""
    moved: dict[str, ActionDoc] = {}
    by_state: dict[str, list[Committed]] = {}
    for c in group:
        by_state.setdefault(str(c.action["state"]), []).append(c)
    for state, members in by_state.items():
        if len(members) == 1:
            continue
        moves, more = [], {}
        for c in members:
            fields = outcomes.finished_move(c)
            moves.append((c.action["_id"], fields["where"], fields["set"]))
            more[c.action["_id"]] = {"$push": fields["push"]}
        docs = await outcomes.mover.actions_each(
            moves, A.FINISHED, source=ActionState(state), by=outcomes.by, more=more
        )
        moved.update((d["_id"], d) for d in docs)
    out: list[ActionDoc | None] = []
    for c in group:
        done = moved.get(c.action["_id"])
        if done is None:
            done = await outcomes.move_finished(c)
        out.append(done)
    return out
