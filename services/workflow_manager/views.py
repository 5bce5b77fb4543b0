"""How workflows, actions and datasets look over HTTP (camelCase, times as Unix seconds).

Every answer is one of the models here, built by the handlers from the stored documents
and serialized by the model: the OpenAPI document (``openapi.py``) is generated from the
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
from shared.store import datasets as ds
from shared.store.transitions import decode
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


def miss_view(a: dict[str, Any]) -> Miss | None:
    """An action's ``miss`` (null stored: never computed before; absent: not explained)."""
    if "miss" not in a:
        return None
    return Miss.model_validate(misses.Miss.of(a["miss"]).document())


class PlannedAction(View):
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


def attempt_view(r: dict[str, Any]) -> Attempt:
    return Attempt(
        attempt=r.get("attempt") or 0, jobId=r.get("job_id"), executor=r.get("executor"),
        submittedAt=r.get("submitted_at"), startedAt=r.get("started_at"), endedAt=r.get("ended_at"),
        outcome=r.get("outcome") or "", error=r.get("error"),
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


class Action(PlannedAction):
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
    followers: list[str]
    successor: str | None
    takeoverOf: str | None
    nondeterministic: NonDeterminism | None = Field(
        None, description="Its output differs from what its lineage's last computation made"
    )


def _planned_fields(a: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": a["_id"],
        "localId": a["local_id"],
        "name": a["name"],
        "hash": a["hash"],
        "decision": a["decision"],
        "reason": a.get("reason"),
        "state": a["state"],
        "outputPath": a.get("output_path"),
        "follows": a.get("follows") or None,
        "miss": miss_view(a),
    }


def planned_action(a: dict[str, Any]) -> PlannedAction:
    return PlannedAction(**_planned_fields(a))


def action_view(a: dict[str, Any]) -> Action:
    return Action(
        **_planned_fields(a),
        type=a.get("type"),
        managed=a.get("managed"),
        forceComputation=a.get("force"),
        parents=a.get("parent_local_ids", []),
        attempts=a.get("attempt", 0),
        attemptLog=[attempt_view(r) for r in a.get("attempt_log") or []],
        failedAttempts=a.get("failed_attempts", 0),
        retryAt=a.get("retry_at") if a["state"] == ActionState.RETRYING else None,
        retries=a.get("retries"),
        timeoutSeconds=a.get("timeout_seconds"),
        submitErrors=a.get("submit_errors", 0),
        jobId=a.get("job_id"),
        createdAt=a.get("created_at"),
        submittedAt=a.get("submitted_at"),
        startedAt=a.get("started_at"),
        finishedAt=a.get("finished_at"),
        seconds=a.get("seconds"),
        size=a.get("size"),
        error=a.get("error"),
        followers=a.get("followers", []),
        successor=a.get("successor"),
        takeoverOf=a.get("takeover_of"),
        nondeterministic=nondeterminism_view(a.get("nondeterministic")),
    )


class Plan(View):
    """A submitted workflow (201): its id and what each action will do."""

    id: str
    state: WorkflowState
    actions: list[PlannedAction]


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


def _workflow_fields(wf: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": wf["_id"],
        "name": wf.get("name"),
        "owner": wf.get("owner"),
        "state": wf["state"],
        "counts": wf.get("counts"),
        "outcome": wf.get("outcome"),
        "openActions": wf.get("open_actions"),
        "createdAt": wf.get("created_at"),
        "finishedAt": wf.get("finished_at"),
        "error": wf.get("error"),
        "killRequested": bool(wf.get("kill_requested")),
        "killedBy": wf.get("killed_by"),
        "href": workflow_href(wf["_id"]),
    }


def workflow_view(wf: dict[str, Any]) -> Workflow:
    return Workflow(**_workflow_fields(wf))


def workflow_detail(wf: dict[str, Any], actions: list[dict[str, Any]]) -> WorkflowDetail:
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
    nondeterministicCount: int = Field(
        0, description="Recomputations whose output differed from the one recorded before (docs/planning.md)"
    )
    lastUsedAt: float | None
    createdAt: float | None
    updatedAt: float | None
    href: str


def produced_by(d: dict[str, Any]) -> str | None:
    """The action whose output the dataset is: the one that committed it, else the one computing it now."""
    return d.get("produced_by") or next(iter(d.get("producers") or []), None)


def dataset_view(
    d: dict[str, Any], names: dict[str, str | None] | None = None, action_names: dict[str, str] | None = None
) -> Dataset:
    """``names``: workflow names by id, for the link to the producing workflow;
    ``action_names``: action names by id, for the producing action's."""
    producers = d.get("producers", [])
    producer = produced_by(d)
    wf_id = workflow_of(producer) if producer else None
    return Dataset(
        hash=d["_id"],
        state=d["state"],
        path=d.get("path"),
        size=d.get("size"),
        files=d.get("files"),
        checksum=d.get("checksum"),
        committedAt=d.get("committed_at"),
        computeSeconds=ds.mean_seconds(d),
        computeCount=int(d.get("compute_count") or 0),
        useCount=d.get("use_count", 0),
        claims=d.get("claims", []),
        producers=producers,
        producedBy=producer,
        producedByName=(action_names or {}).get(producer) if producer else None,
        neverStored=d["state"] == DatasetState.DELETED and d.get("committed_at") is None,
        workflow=WorkflowLink(id=wf_id, name=(names or {}).get(wf_id), href=workflow_href(wf_id)) if wf_id else None,
        nondeterministicCount=int(d.get("nondeterministic_count") or 0),
        lastUsedAt=d.get("last_used_at"),
        createdAt=d.get("created_at"),
        updatedAt=d.get("updated_at"),
        href=f"/api/v1/datasets/{d['_id']}",
    )


class UserUsage(View):
    """One user's share: what their workflows keep in storage, and what reuse saved them."""

    user: str | None = Field(description="null: datasets committed while users were off")
    datasets: int = Field(description="Datasets their workflows computed that storage holds now")
    bytes: int
    computeSeconds: float = Field(description="Compute time their workflows spent, all time")
    savedSeconds: float = Field(description="Compute time reuse saved their workflows, all time")
    savedFromOthersSeconds: float = Field(description="Of savedSeconds: by reusing other users' datasets")


def named_actions(d: dict[str, Any]) -> list[str]:
    """The actions a dataset document names: its readers to come, its producers, its maker."""
    return [*(d.get("claims") or []), *(d.get("producers") or []), *filter(None, [d.get("produced_by")])]


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


def lineage_view(lineage: dict[str, Any]) -> Lineage:
    """A stored lineage as shown: its secret values (kept there as digests) masked."""
    definition = lineage.get("definition")
    if isinstance(definition, str) and '"secret":true' in definition:
        parsed = json.loads(definition)
        parsed["configurationParameters"] = masked_parameters(parsed.get("configurationParameters"))
        definition = canonical(parsed)
    return Lineage.model_validate({**lineage, "definition": definition})


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


def action_link(a: dict[str, Any], workflows: dict[str, dict[str, Any]]) -> ActionLink:
    wf = workflows.get(a["workflow_id"], {})
    return ActionLink(
        id=a["_id"],
        name=a["name"],
        state=a["state"],
        decision=a["decision"],
        reason=a.get("reason"),
        workflow=WorkflowLink(id=a["workflow_id"], name=wf.get("name"), href=workflow_href(a["workflow_id"])),
        createdAt=a.get("created_at"),
    )


def history_of(d: dict[str, Any]) -> list[Transition]:
    return [Transition(state=h["state"], at=h["at"], by=h.get("by"), note=h.get("note")) for h in d.get("history", [])]


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


def timeline(wf: dict[str, Any], actions: list[dict[str, Any]], datasets: list[dict[str, Any]]) -> list[TimelineEntry]:
    """The story of one workflow, in time order, from its submission: its own transitions,
    its actions', and those of their datasets from then on (a dataset's earlier history
    belongs to the workflows that made it before). Actors by name (``actor``); the
    submission by the user who made it, if users are on."""
    rows = []
    since = float(wf.get("created_at") or 0)
    for kind, docs in (("workflow", [wf]), ("action", actions), ("dataset", datasets)):
        for d in docs:
            d = decode(d)
            label = d["_id"] if kind != "action" else f"{d['_id']} ({d['name']})"
            for h in d.get("history", []):
                if kind == "dataset" and h["at"] < since:
                    continue
                by = actor(kind, h.get("by"))
                if kind == "workflow" and h["state"] == "PLANNING" and wf.get("owner"):
                    by = str(wf["owner"])  # who submitted it
                rows.append(TimelineEntry(at=h["at"], kind=kind, id=label, state=h["state"], by=by, note=h.get("note")))
    if wf.get("kill_requested_at") is not None:
        # Who asked is not a state the workflow passes through, but what a debugger looks for.
        who = wf.get("killed_by")
        rows.append(
            TimelineEntry(
                at=wf["kill_requested_at"], kind="workflow", id=wf["_id"], state="KILL_REQUESTED",
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
