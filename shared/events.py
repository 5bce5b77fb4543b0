"""The event envelope published on every transition, its routing key and the payload of
each event type (docs/architecture.md, "Events").

Events are hints: a consumer re-reads MongoDB before acting, so a lost, repeated or
reordered event changes nothing. An integrator gets from the payload what it needs
without calling back (names, state, paths, sizes, durations, counts, reasons). The JSON
Schema of ``Event``, with the payload of each type, is served at
``GET /api/v1/events/schema``.
"""

from __future__ import annotations

import logging
import time
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import models_json_schema

log = logging.getLogger(__name__)

# 2: routing keys <type>.<owner>.<workflow>; typed payloads (workflow.submitted's counts
# under ``planned``, workflow.finished with its duration and action counts).
SCHEMA_VERSION = 2
# The routing key's word for "none": an owner before workflows have owners, the workflow
# of a dataset event that no workflow caused.
NO_SCOPE = "_"


class EventType(StrEnum):
    WORKFLOW_SUBMITTED = "workflow.submitted"
    ACTION_READY = "action.ready"
    ACTION_SUBMITTED = "action.submitted"
    ACTION_RUNNING = "action.running"
    ACTION_RETRYING = "action.retrying"
    ACTION_FINISHED = "action.finished"
    ACTION_FAILED = "action.failed"
    ACTION_KILLED = "action.killed"
    ACTION_FOLLOWING = "action.following"
    ACTION_REUSED = "action.reused"
    ACTION_SKIPPED = "action.skipped"
    DATASET_STORED = "dataset.stored"
    DATASET_MARKED = "dataset.marked"
    DATASET_DELETED = "dataset.deleted"
    DATASET_LOST = "dataset.lost"
    WORKFLOW_FINISHED = "workflow.finished"


class Subject(BaseModel):
    owner: str | None = Field(None, description="The user whose workflow it is (null when users are off).")
    workflow_id: str | None = None
    action_id: str | None = None
    dataset_hash: str | None = None


class Event(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    type: EventType
    time: float = Field(default_factory=time.time, description="Unix time, seconds.")
    producer: str = Field(description="The service that published it.")
    subject: Subject = Field(default_factory=Subject)
    payload: dict[str, Any] = Field(
        default_factory=dict, description="What the event says; its shape depends on ``type`` (see PAYLOADS)."
    )
    schema_version: int = SCHEMA_VERSION

    @property
    def routing_key(self) -> str:
        """``<type>.<owner>.<workflow>``: bind ``action.finished.#`` for one type,
        ``*.*.alice.*`` for one user's, ``#.<workflow id>`` for one workflow. The owner is
        ``_`` where there is none (users off, or a dataset event no workflow caused); user
        names hold no dot (shared/store/users.py), so each is one word."""
        owner = self.subject.owner or NO_SCOPE
        return f"{self.type.value}.{owner}.{self.subject.workflow_id or NO_SCOPE}"

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The envelope's schema, with ``payload`` narrowed to the model of each type."""
        schema = super().model_json_schema(*args, **kwargs)
        _, defs = models_json_schema([(m, "validation") for m in payload_models()], ref_template="#/$defs/{model}")
        schema.setdefault("$defs", {}).update(defs.get("$defs", {}))
        schema["allOf"] = payload_narrowing("#/$defs/{model}")
        return schema


# -- payloads ------------------------------------------------------------------------
# Every field is present in a published payload (null when unknown), so a consumer reads
# them without guessing; nothing else is (``extra="forbid"``).


class Payload(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ActionPayload(Payload):
    """The action as it stands after the move (docs/state-machines.md, "Action")."""

    name: str | None = Field(description="The action's name in its workflow.")
    local_id: int | str | None = Field(description="Its id in the submitted workflow.")
    state: str = Field(description="Its state after the move.")
    output_path: str | None = Field(description="Where its output is (or will be).")
    managed: bool | None = Field(description="Its output is a managed, reusable dataset.")
    reason: str | None = Field(
        description="The planner's word (stored, in_flight, feeds_only_reused, not_stored, forced, unmanaged; "
        "later takeover, replanned) or why it ended (action_failed, killed, upstream_failed, ...)."
    )
    attempt: int | None = Field(description="Attempts started so far.")


class ActionReady(ActionPayload):
    reserve_bytes: int | None = Field(
        None,
        description="What its start reserves in the storage budget, worked out at planning (0: nothing; "
        'absent: not worked out yet; docs/operations.md, "Storage budget").',
    )


class ActionSubmitted(ActionPayload):
    job_id: str | None = Field(description="The executor's job id.")
    executor: str | None


class ActionRunning(ActionPayload):
    started_at: float | None = Field(description="When its job started, Unix seconds.")


class ActionRetrying(ActionPayload):
    failed_attempts: int | None
    retry_at: float | None = Field(description="When the next attempt is due, Unix seconds.")
    error: str | None


class ActionFinished(ActionPayload):
    size: int | None = Field(description="Bytes written.")
    seconds: float | None = Field(description="How long its job ran.")
    started_at: float | None
    ended_at: float | None


class ActionEnded(ActionPayload):
    """FAILED or KILLED."""

    error: str | None


class ActionFollowing(ActionPayload):
    follows: str | None = Field(description="The action (of any workflow) whose computation it waits for.")


class ActionReused(ActionPayload):
    follows: str | None = Field(description="The computation it followed; null when reused as stored.")
    size: int | None = Field(description="Bytes of the reused dataset, when known.")
    saved_seconds: float | None = Field(description="Mean compute time it saved.")


class ActionSkipped(ActionPayload):
    """Not computed: it only fed actions that reuse their stored outputs."""

    saved_seconds: float | None


class DatasetStored(Payload):
    path: str | None
    size: int | None
    seconds: float | None = Field(description="How long computing it took.")
    action: str | None = Field(description="The name of the action that computed it.")


class DatasetMarked(Payload):
    path: str | None
    size: int | None
    algorithm: str | None = Field(description="The eviction algorithm that chose it (PINGO_ALGORITHM).")
    reason: str = Field(
        description="over_threshold: managed storage was past its threshold; deleted, invalidated or expired: "
        'a user withdrew it (docs/api.md, "Datasets by hand"), deleted once nothing needs it.'
    )
    rank: int | None = Field(description="Its place in the algorithm's choice of this round, 1 first.")
    usage_bytes: int | None = Field(description="Managed storage in use when it was chosen.")
    capacity_bytes: int | None
    to_free_bytes: int | None = Field(description="What the round set out to free.")


class DatasetDeleted(Payload):
    path: str | None
    size: int | None


class DatasetLost(Payload):
    path: str | None
    size: int | None
    found_size: int | None = Field(description="What was found instead, if anything.")
    reason: str | None


class WorkflowSubmitted(Payload):
    name: str | None
    state: str = Field(description="RUNNING, or SUCCEEDED when nothing had to be computed.")
    actions: int = Field(description="Its number of actions.")
    compute: int = Field(description="Actions planned to be computed.")
    reuse: int = Field(description="Actions not computed here (reused, skipped, following).")
    follow: int = Field(description="Actions following a computation in flight.")
    reused: int = Field(description="Actions reusing a stored output.")
    skipped: int = Field(description="Actions skipped.")
    saved_seconds: float = Field(description="Mean compute time of what is reused or skipped.")


class WorkflowFinished(Payload):
    name: str | None
    state: str = Field(description="SUCCEEDED, FAILED or KILLED.")
    seconds: float | None = Field(description="From submission to end.")
    finished: int = Field(description="Actions computed.")
    reused: int
    skipped: int
    failed: int
    killed: int


PAYLOADS: dict[EventType, type[Payload]] = {
    EventType.WORKFLOW_SUBMITTED: WorkflowSubmitted,
    EventType.ACTION_READY: ActionReady,
    EventType.ACTION_SUBMITTED: ActionSubmitted,
    EventType.ACTION_RUNNING: ActionRunning,
    EventType.ACTION_RETRYING: ActionRetrying,
    EventType.ACTION_FINISHED: ActionFinished,
    EventType.ACTION_FAILED: ActionEnded,
    EventType.ACTION_KILLED: ActionEnded,
    EventType.ACTION_FOLLOWING: ActionFollowing,
    EventType.ACTION_REUSED: ActionReused,
    EventType.ACTION_SKIPPED: ActionSkipped,
    EventType.DATASET_STORED: DatasetStored,
    EventType.DATASET_MARKED: DatasetMarked,
    EventType.DATASET_DELETED: DatasetDeleted,
    EventType.DATASET_LOST: DatasetLost,
    EventType.WORKFLOW_FINISHED: WorkflowFinished,
}


def payload_models() -> list[type[Payload]]:
    return sorted(set(PAYLOADS.values()), key=lambda m: m.__name__)


def payload_narrowing(ref_template: str) -> list[dict[str, Any]]:
    """The ``allOf`` of the envelope's schema: for each type, ``payload`` is its model's
    (referenced with ``ref_template``, as ``$defs`` or as an OpenAPI component)."""
    return [
        {
            "if": {"properties": {"type": {"const": t.value}}, "required": ["type"]},
            "then": {"properties": {"payload": {"$ref": ref_template.format(model=m.__name__)}}},
        }
        for t, m in PAYLOADS.items()
    ]


def checked(event_type: EventType, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as its type's model says. A mismatch is a bug of ours; the event still
    goes out as it is (events are hints, the write it reports has happened)."""
    try:
        return PAYLOADS[event_type].model_validate(payload).model_dump(mode="json")
    except ValidationError:
        log.exception("%s payload does not match its schema: published as is", event_type)
        return payload
