"""The event envelope published on every transition (docs/architecture.md, "Events").

Events are hints: a consumer re-reads MongoDB before acting, so a lost, repeated or
reordered event changes nothing. The JSON Schema of ``Event`` is served at
``GET /api/v1/events/schema`` for integrators.
"""

from __future__ import annotations

import time
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1


class EventType(StrEnum):
    WORKFLOW_SUBMITTED = "workflow.submitted"
    ACTION_READY = "action.ready"
    ACTION_SUBMITTED = "action.submitted"
    ACTION_RUNNING = "action.running"
    ACTION_FINISHED = "action.finished"
    ACTION_FAILED = "action.failed"
    ACTION_KILLED = "action.killed"
    ACTION_FOLLOWING = "action.following"
    ACTION_REUSED = "action.reused"
    DATASET_STORED = "dataset.stored"
    DATASET_MARKED = "dataset.marked"
    DATASET_DELETED = "dataset.deleted"
    DATASET_LOST = "dataset.lost"
    WORKFLOW_FINISHED = "workflow.finished"


class Subject(BaseModel):
    workflow_id: str | None = None
    action_id: str | None = None
    dataset_hash: str | None = None


class Event(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    type: EventType
    time: float = Field(default_factory=time.time, description="Unix time, seconds.")
    producer: str = Field(description="The service that published it.")
    subject: Subject = Field(default_factory=Subject)
    payload: dict[str, Any] = Field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
