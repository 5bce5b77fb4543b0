"""Workflow documents: their state is derived from their actions'.

A workflow's submitted body and its planning bookkeeping (every action id, every dataset
hash its planning may touch) live in a separate document of ``workflow_definitions``,
written once: the workflow document itself stays small, because on a document store
every state change rewrites the whole document.
"""

from __future__ import annotations

import time
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

from shared.states import ACTION_TERMINAL, WORKFLOW_TRANSITIONS, ActionState, WorkflowState
from shared.store.client import Store
from shared.store.transitions import transition

W = WorkflowState


def definitions(store: Store) -> AsyncCollection:
    """``{_id: workflow id, body, action_ids, dataset_hashes, created_at}``."""
    return store.db["workflow_definitions"]


def derive(actions: list[dict[str, Any]], kill_requested: bool) -> WorkflowState | None:
    """The workflow's final state once every action is terminal, else None. A workflow
    with no actions has not ended: its actions were never written (or were undone)."""
    states = [a["state"] for a in actions]
    if not states or any(s not in ACTION_TERMINAL for s in states):
        return None
    if kill_requested:
        return W.KILLED
    if any(s in (ActionState.FAILED, ActionState.KILLED) for s in states):
        return W.FAILED
    return W.SUCCEEDED


async def settle(store: Store, workflow_id: str, by: str) -> dict[str, Any] | None:
    """Move a RUNNING workflow to its final state if all its actions ended; idempotent."""
    wf = await store.workflows.find_one({"_id": workflow_id}, {"state": 1, "kill_requested": 1})
    if wf is None or wf["state"] != W.RUNNING:
        return None
    actions = [a async for a in store.actions.find({"workflow_id": workflow_id}, {"state": 1})]
    final = derive(actions, bool(wf.get("kill_requested")))
    if final is None:
        return None
    return await transition(
        store.workflows,
        WORKFLOW_TRANSITIONS,
        workflow_id,
        final,
        by=by,
        sources=[W.RUNNING],
        set={"finished_at": time.time()},
    )
