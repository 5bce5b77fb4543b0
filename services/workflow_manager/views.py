"""How workflows, actions and datasets look over HTTP (camelCase, times as Unix seconds).

Every answer is one of the models here, built by the handlers from the stored documents
(workflows and datasets as the typed records of ``shared.store.records``, decoded where
they left the store) and serialized by the model: the OpenAPI document (``openapi.py``) is generated from the
same models, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from shared.hashing import canonical
from shared.lifecycle import misses
from shared.states import ActionState, DatasetState, WorkflowState
from shared.store.records import (
    UNEXPLAINED,
    ActionRecord,
    AttemptRecord,
    DatasetRecord,
    Move,
    WorkflowBrief,
    WorkflowRecord,
)
from shared.workflow_spec import masked_parameters

ActionId = int | str


class View(BaseModel):
    # Documents may hold fields a view does not show; a view never has fields it does not declare.
    model_config = ConfigDict(extra="forbid")


def answer(view: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, headers=headers, content_type="application/json", text=view.model_dump_json())


def workflow_href(wf_id: str) -> str:
    return f"/api/v1/workflows/{wf_id}"


def workflow_of(action_id: str) -> str:
    """The workflow of an action: its id is ``<workflow id>.<local id>`` and workflow ids
    (``wf-<hex>``) hold no dot."""
    return action_id.split(".", 1)[0]


# --- actions and workflows -------------------------------------------------------------------


class InputView(View):
    """An external input an action reads, with the fingerprint its lineage hash was
    computed with (docs/planning.md, "External inputs")."""

    path: str
    fingerprint: dict[str, Any] = Field(
        description="kind (file or folder), size; mtime_ns (local) or mtime_ms (HDFS), or checksum; a folder's "
        "files and digest"
    )


def input_views(definition: dict[str, Any] | None) -> list[InputView]:
    inputs = (definition or {}).get("inputs") or []
    return [InputView(path=i["path"], fingerprint={k: v for k, v in i.items() if k != "path"}) for i in inputs]


class LineageChange(View):
    field: str = Field(
        description="What changed, as a path into the lineage: a field of the definition (command, "
        "additionalInput[1].value, actionFolderFingerprint...), another key of the lineage, or parent"
    )
    old: str | None = Field(description="Its value then (a parent: its hash); null: it was absent")
    new: str | None = Field(description="Its value now; null: it is absent now")
    parent: str | None = Field(None, description="field parent: the parent's id, whose output is another dataset now")


class MissAgainst(View):
    workflow: str = Field(description="The earlier workflow of the same name")
    action: str = Field(description="Its action of the same name and id")
    hash: str
    state: str | None = Field(description="That action's dataset's state now (null: none)")


class Miss(View):
    """Why an action is computed: what changed against the nearest stored lineage of the
    same action (docs/planning.md, "Why an action is computed")."""

    summary: str = Field(description="In words; 'never computed before' when no earlier lineage exists")
    changes: list[LineageChange]
    against: MissAgainst | None


def miss_view(a: ActionRecord) -> Miss | None:
    """An action's ``miss`` (null stored: never computed before; absent: not explained)."""
    if a.miss is UNEXPLAINED:
        return None
    return Miss.model_validate(misses.Miss.of(a.miss).document())


class PlannedActionView(View):
    """An action as planned: what a submission answers, per action."""

    id: str
    localId: ActionId
    name: str
    hash: str = Field(description="The lineage hash: the dataset this action produces")
    decision: str = Field(description="compute or reuse")
    reason: str | None = Field(
        description="stored, in_flight (follows another computation), feeds_only_reused, not_stored, forced, "
        "unmanaged; later takeover, replanned, or why it ended"
    )
    state: ActionState
    outputPath: str | None
    follows: str | None = Field(
        None, description="FOLLOWING: the action whose computation it waits for (null when it is another user's)"
    )
    shared: bool = Field(
        False,
        description="Its computation is shared with another user's workflow (followed by, following, taken over "
        "from or by it): that workflow's ids and job are not shown (docs/users.md)",
    )
    inputs: list[InputView] = Field(default_factory=list, description="The external inputs it reads")
    miss: Miss | None = Field(None, description="Computed: what changed since the same action was last computed")


class Attempt(View):
    """One attempt of an action that ended (docs/state-machines.md, "Retries and timeouts")."""

    attempt: int
    jobId: str | None
    executor: str | None
    submittedAt: float | None
    startedAt: float | None
    endedAt: float | None
    outcome: str = Field(description="succeeded, failed, timed_out, killed, submit_failed or lost")
    error: str | None = Field(description="Why it ended, as the executor or Pingo said")


def attempt_view(r: AttemptRecord) -> Attempt:
    return Attempt(
        attempt=r.attempt, jobId=r.job_id, executor=r.executor, submittedAt=r.submitted_at, startedAt=r.started_at,
        endedAt=r.ended_at, outcome=r.outcome, error=r.error,
    )  # fmt: skip


class NonDeterminism(View):
    """A recomputation of a lineage whose output differs from the one its last commit
    recorded (docs/planning.md, "Determinism audit")."""

    previousChecksum: str
    checksum: str
    previousAction: str | None = Field(description="The action whose commit recorded the previous checksum")


def nondeterminism_view(doc: dict[str, Any] | None) -> NonDeterminism | None:
    if not doc:
        return None
    return NonDeterminism(
        previousChecksum=doc["previous_checksum"], checksum=doc["checksum"], previousAction=doc.get("previous_action")
    )


class Action(PlannedActionView):
    """An action with everything recorded about its run."""

    type: str | None
    managed: bool | None
    forceComputation: bool | None
    parents: list[ActionId]
    attempts: int
    attemptLog: list[Attempt] = Field(description="Each attempt that ended, oldest first")
    failedAttempts: int = Field(description="Attempts that failed or timed out (what its retries count)")
    retryAt: float | None = Field(description="RETRYING: when its next attempt is due")
    retries: dict[str, float] | None = Field(description="Its retry policy: count, delaySeconds, backoff")
    timeoutSeconds: float | None = Field(description="How long one attempt may run before it is killed")
    submitErrors: int
    jobId: str | None
    createdAt: float | None
    submittedAt: float | None
    startedAt: float | None
    finishedAt: float | None
    seconds: float | None
    size: int | None
    error: str | None
    held: str | None = Field(
        None, description="READY but not started: why (no room for its output in the storage budget)"
    )
    expectedBytes: int | None = Field(None, description="What its output is expected to take (declared)")
    followers: list[str]
    successor: str | None
    takeoverOf: str | None
    inputChanged: list[dict[str, Any]] | None = Field(
        None, description="Inputs that changed while it ran ({path, changes}): its output is not reused"
    )
    nondeterministic: NonDeterminism | None = Field(
        None, description="Its output differs from what its lineage's last computation made"
    )


def _planned_fields(a: ActionRecord) -> dict[str, Any]:
    return {
        "id": a.id,
        "localId": a.local_id,
        "name": a.name,
        "hash": a.hash,
        "decision": a.decision,
        "reason": a.reason,
        "state": a.state,
        "outputPath": a.output_path,
        "follows": a.follows or None,
        "inputs": input_views(a.definition),
        "miss": miss_view(a),
    }


def planned_action(a: ActionRecord) -> PlannedActionView:
    return PlannedActionView(**_planned_fields(a))


def action_view(a: ActionRecord) -> Action:
    return Action(
        **_planned_fields(a),
        type=a.type,
        managed=a.managed,
        forceComputation=a.force,
        parents=a.parent_local_ids,
        attempts=a.attempt,
        attemptLog=[attempt_view(r) for r in a.attempt_log],
        failedAttempts=a.failed_attempts,
        retryAt=a.retry_at if a.state == ActionState.RETRYING else None,
        retries=a.retries,
        timeoutSeconds=a.timeout_seconds,
        submitErrors=a.submit_errors,
        jobId=a.job_id,
        createdAt=a.created_at,
        submittedAt=a.submitted_at,
        startedAt=a.started_at,
        finishedAt=a.finished_at,
        seconds=a.seconds,
        size=a.size,
        error=a.error,
        held=(a.held or {}).get("message") if a.state == ActionState.READY else None,
        expectedBytes=a.expected_bytes,
        followers=a.followers,
        successor=a.successor,
        takeoverOf=a.takeover_of,
        inputChanged=a.input_changed,
        nondeterministic=nondeterminism_view(a.nondeterministic),
    )


class Plan(View):
    """A submitted workflow (201): its id and what each action will do."""

    id: str
    state: WorkflowState
    actions: list[PlannedActionView]


class Workflow(View):
    id: str
    name: str | None
    owner: str | None = Field(description="The user who submitted it; null while users are off")
    state: WorkflowState
    counts: dict[str, int] | None = Field(description="Planned actions: compute, reuse, follow")
    outcome: dict[str, int] | None = Field(
        None, description="Once ended: how its actions ended (finished, reused, skipped, failed, killed)"
    )
    openActions: int | None = Field(None, description="Actions not ended yet")
    createdAt: float | None
    finishedAt: float | None
    error: str | None
    killRequested: bool
    killedBy: str | None = Field(description="Who asked for the kill (a user name; null while users are off)")
    href: str


class WorkflowDetail(Workflow):
    actions: list[Action]


def _workflow_fields(wf: WorkflowRecord) -> dict[str, Any]:
    return {
        "id": wf.id,
        "name": wf.name,
        "owner": wf.owner,
        "state": wf.state,
        "counts": wf.counts,
        "outcome": wf.outcome,
        "openActions": wf.open_actions,
        "createdAt": wf.created_at,
        "finishedAt": wf.finished_at,
        "error": wf.error,
        "killRequested": wf.kill_requested,
        "killedBy": wf.killed_by,
        "href": workflow_href(wf.id),
    }


def workflow_view(wf: WorkflowRecord) -> Workflow:
    return Workflow(**_workflow_fields(wf))


def workflow_detail(wf: WorkflowRecord, actions: list[ActionRecord]) -> WorkflowDetail:
    return WorkflowDetail(**_workflow_fields(wf), actions=[action_view(a) for a in actions])


class WorkflowList(View):
    workflows: list[Workflow] = Field(description="Newest first")
    next: str | None = Field(description="Cursor of the next page (pass it as ?cursor=); null on the last page")


# --- datasets ----------------------------------------------------------------------------------


class WorkflowLink(View):
    id: str
    name: str | None = None
    href: str


class Dataset(View):
    hash: str
    state: DatasetState
    path: str | None
    size: int | None
    files: int | None = Field(description="As recorded at commit: what a verification before a reuse compares")
    checksum: str | None = Field(description="As recorded at commit")
    committedAt: float | None
    computeSeconds: float | None = Field(description="Mean time of one computation; null if never computed")
    computeCount: int
    useCount: int
    claims: list[str] = Field(description="Actions that will read it: it is not deleted while any remain")
    producers: list[str] = Field(description="Actions computing it now")
    producedBy: str | None = Field(description="The action whose output it is (or the one computing it now)")
    producedByName: str | None = Field(None, description="The name of the producedBy action")
    neverStored: bool = Field(
        False, description="Planned but never committed (its producer failed or was killed): DELETED in the "
        "state machine, though no file was ever kept or deleted"
    )  # fmt: skip
    workflow: WorkflowLink | None = Field(description="The workflow of producedBy")
    inputChanged: list[dict[str, Any]] | None = Field(
        None, description="Made from inputs that changed while it was computed ({path, changes}): not reused"
    )
    nondeterministicCount: int = Field(
        0, description="Recomputations whose output differed from the one recorded before (docs/planning.md)"
    )
    lastUsedAt: float | None
    createdAt: float | None
    updatedAt: float | None
    pinned: bool = Field(False, description="Pinned by a user: never chosen for eviction")
    expiresAt: float | None = Field(None, description="Deleted once this time has passed and nothing needs it")
    withdrawnBy: str | None = Field(
        None, description="INVALIDATED: who withdrew it (user <name>, or dataset_manager for an expiry)"
    )
    canChange: bool = Field(
        False,
        description="Whether the caller may delete, invalidate, pin or expire it: the owner of the workflow "
        'that committed it, or an admin (docs/api.md, "Datasets by hand")',
    )
    href: str


def dataset_view(
    d: DatasetRecord, names: dict[str, str | None] | None = None, action_names: dict[str, str] | None = None
) -> Dataset:
    """``names``: workflow names by id, for the link to the producing workflow;
    ``action_names``: action names by id, for the producing action's."""
    producer = d.maker
    wf_id = workflow_of(producer) if producer else None
    return Dataset(
        hash=d.id,
        state=d.state,
        path=d.path,
        size=d.size,
        files=d.files,
        checksum=d.checksum,
        committedAt=d.committed_at,
        computeSeconds=d.mean_seconds,
        computeCount=d.compute_count,
        useCount=d.use_count,
        claims=d.claims,
        producers=d.producers,
        producedBy=producer,
        producedByName=(action_names or {}).get(producer) if producer else None,
        neverStored=d.state == DatasetState.DELETED and d.committed_at is None,
        workflow=WorkflowLink(id=wf_id, name=(names or {}).get(wf_id), href=workflow_href(wf_id)) if wf_id else None,
        inputChanged=d.input_changed,
        nondeterministicCount=d.nondeterministic_count,
        lastUsedAt=d.last_used_at,
        createdAt=d.created_at,
        updatedAt=d.updated_at,
        pinned=d.pinned,
        expiresAt=d.expires_at,
        withdrawnBy=(d.withdrawn or {}).get("by") if d.state == DatasetState.INVALIDATED else None,
        href=f"/api/v1/datasets/{d.id}",
    )


class UserUsage(View):
    """One user's share: what their workflows keep in storage, and what reuse saved them."""

    user: str | None = Field(description="null: datasets committed while users were off")
    datasets: int = Field(description="Datasets their workflows computed that storage holds now")
    bytes: int
    computeSeconds: float = Field(description="Compute time their workflows spent, all time")
    savedSeconds: float = Field(description="Compute time reuse saved their workflows, all time")
    savedFromOthersSeconds: float = Field(description="Of savedSeconds: by reusing other users' datasets")


def redacted(view: Dataset, visible: set[str] | None) -> Dataset:
    """The dataset as a caller who sees only the workflows ``visible`` (None: all) may see
    it: shared, but silent about the actions and workflows of others (docs/users.md)."""
    if visible is None:
        return view
    mine = [a for a in view.claims if workflow_of(a) in visible]
    making = [a for a in view.producers if workflow_of(a) in visible]
    shown = view.producedBy if view.producedBy and workflow_of(view.producedBy) in visible else None
    return view.model_copy(
        update={
            "claims": mine, "producers": making, "producedBy": shown, "workflow": view.workflow if shown else None,
            "producedByName": view.producedByName if shown else None,
        }
    )  # fmt: skip


class DatasetList(View):
    capacityBytes: int
    threshold: float
    managedRootBytes: int | None = Field(description="What the storage says is under the managed root")
    bytesByState: dict[str, int] = Field(description="Size of every dataset, in each state (not only this page's)")
    usedBytes: int = Field(
        0,
        description="Bytes held in storage, shown against capacityBytes: STORED, LEAF (final outputs), those "
        "marked or being deleted and those withdrawn but not yet deleted",
    )
    byUser: list[UserUsage] | None = Field(None, description="With ?byUser=true: per user, biggest first")
    datasets: list[Dataset] = Field(description="Most recently changed first")
    next: str | None = Field(description="Cursor of the next page (pass it as ?cursor=); null on the last page")


class Transition(View):
    state: str
    at: float
    by: str | None = None
    note: str | None = None


class Lineage(View):
    model_config = ConfigDict(extra="allow")

    definition: Any = Field(
        description="The canonical definition of the computation, as hashed; secret values shown as *** "
        '(docs/planning.md, "Secret values")'
    )
    parents: list[str] = Field(description="The hashes of the datasets it was computed from, in argument order")
    inputs: list[InputView] = Field(
        default_factory=list, description="The external inputs it was computed from, with their fingerprints"
    )


def lineage_view(lineage: dict[str, Any]) -> Lineage:
    """A stored lineage as shown: its secret values (kept there as digests) masked."""
    definition = lineage.get("definition")
    if isinstance(definition, str) and '"secret":true' in definition:
        parsed = json.loads(definition)
        parsed["configurationParameters"] = masked_parameters(parsed.get("configurationParameters"))
        definition = canonical(parsed)
    inputs = input_views(json.loads(definition)) if isinstance(definition, str) and '"inputs":' in definition else []
    return Lineage.model_validate({**lineage, "definition": definition, "inputs": inputs})


class ActionLink(View):
    id: str
    name: str
    state: ActionState
    decision: str
    reason: str | None
    workflow: WorkflowLink
    createdAt: float | None


class Consumer(ActionLink):
    relation: str = Field(description="reused (took it instead of computing), followed (waited for its "
                          "computation), or read (an action with it as input)")  # fmt: skip


class DatasetDetail(Dataset):
    lineage: Lineage | None = Field(
        description="What it was computed from. Shown to admins, to the user whose workflow committed it and to "
        "users whose own workflows hold an action computing it; null for others (docs/users.md)"
    )
    othersActions: bool = Field(
        False,
        description="Actions of workflows the caller may not see made, computed, followed or read it: they are "
        "not listed, and their definition is not shown",
    )
    parents: list[str] = Field(description="Hashes of its parent datasets (links: /api/v1/datasets/{hash})")
    producer: ActionLink | None = Field(description="The action that computed what is stored, or computes it now")
    computations: list[ActionLink] = Field(description="Every action that computed it, newest first")
    consumers: list[Consumer] = Field(description="Actions that reused, followed or read it, newest first")
    history: list[Transition]


def action_link(a: ActionRecord, workflows: dict[str, WorkflowBrief]) -> ActionLink:
    wf_id = a.workflow_id or ""
    wf = workflows.get(wf_id)
    return ActionLink(
        id=a.id,
        name=a.name,
        state=a.state,
        decision=a.decision,
        reason=a.reason,
        workflow=WorkflowLink(id=wf_id, name=wf.name if wf else None, href=workflow_href(wf_id)),
        createdAt=a.created_at,
    )


def history_of(d: DatasetRecord) -> list[Transition]:
    return [Transition(state=h.state, at=h.at, by=h.by, note=h.note) for h in d.history]


# --- timeline and statistics -------------------------------------------------------------------


class TimelineEntry(View):
    at: float
    kind: str = Field(description="workflow, action or dataset")
    id: str = Field(description="The id (actions: with their name in brackets)")
    state: str
    by: str | None
    note: str | None


class Timeline(View):
    id: str
    owner: str | None = Field(description="The user who submitted it; null while users are off")
    transitions: list[TimelineEntry] = Field(description="In time order")
    next: str | None = Field(description="Cursor of the next page (pass it as ?cursor=); null on the last page")


# A service replica's name as recorded before it carried the service's (host:pid:token).
_BARE_REPLICA = re.compile(r"[^\s:@]+:\d+:[0-9a-f]{6}")
# Which service wrote a bare replica name, by what it moved (only these two recorded one).
_BARE_WRITER = {"action": "action_manager", "dataset": "dataset_manager"}


def actor(kind: str, by: str | None) -> str | None:
    """Who made a move, as a reader names it: a service replica (``action_manager@host:pid:token``)
    by its service, a user or a service name as written."""
    if by is None:
        return None
    if _BARE_REPLICA.fullmatch(by):
        return _BARE_WRITER.get(kind, by)
    service, at, replica = by.partition("@")
    return service if at and _BARE_REPLICA.fullmatch(replica) else by


def timeline(wf: WorkflowRecord, actions: list[ActionRecord], datasets: list[DatasetRecord]) -> list[TimelineEntry]:
    """The story of one workflow, in time order, from its submission: its own transitions,
    its actions', and those of their datasets from then on (a dataset's earlier history
    belongs to the workflows that made it before). Actors by name (``actor``); the
    submission by the user who made it, if users are on."""
    rows = []
    since = float(wf.created_at or 0)
    stories: list[tuple[str, str, tuple[Move, ...]]] = [
        ("workflow", wf.id, wf.history),
        *(("action", f"{a.id} ({a.name})", a.history) for a in actions),
        *(("dataset", d.id, d.history) for d in datasets),
    ]
    for kind, label, moves in stories:
        for h in moves:
            if kind == "dataset" and h.at < since:
                continue
            by = actor(kind, h.by)
            if kind == "workflow" and h.state == "PLANNING" and wf.owner:
                by = str(wf.owner)  # who submitted it
            rows.append(TimelineEntry(at=h.at, kind=kind, id=label, state=h.state, by=by, note=h.note))
    if wf.kill_requested_at is not None:
        # Who asked is not a state the workflow passes through, but what a debugger looks for.
        who = wf.killed_by
        rows.append(
            TimelineEntry(
                at=wf.kill_requested_at, kind="workflow", id=wf.id, state="KILL_REQUESTED",
                by=f"user {who}" if who else None, note=None,
            )
        )  # fmt: skip
    # Ties in time broken by what they are, so that a page boundary is a fixed place.
    rows.sort(key=lambda r: (r.at, r.kind, r.id, r.state))
    return rows


class Totals(View):
    workflows_submitted: int
    actions_computed: int
    actions_reused: int
    actions_skipped: int
    compute_seconds: float
    saved_seconds: float
    saved_others_seconds: float = Field(
        0.0, description="Of saved_seconds: reusing datasets another user's workflow computed"
    )
    bytes_written: int
    bytes_deleted: int
    actions_nondeterministic: int = Field(
        0, description="Recomputations whose output differed from their lineage's last one (docs/planning.md)"
    )
    actions_cut_off: int = Field(
        0, description="Of actions_reused: cut off early, a parent's output being an earlier lineage's (planning.md)"
    )
    failures: dict[str, int] = Field(description="Failed actions by reason")


class Bucket(Totals):
    start: float
    end: float


class HistoryStats(View):
    resolution: str
    from_: float = Field(alias="from")
    to: float
    buckets: list[Bucket] = Field(description="Oldest first; empty ones included as zeros when there are few")
    totals: Totals
    byUser: dict[str, Totals] = Field(
        default_factory=dict,
        description="The totals of each user's workflows (docs/users.md): a user sees their own, an admin everyone's",
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class Health(View):
    ok: bool
