"""The executor port, and the argument contract every executor follows (docs/planning.md, "The argument contract"):
additionalInput values in order, then the parents' output paths by parent id, then the
action's own (attempt) output path last."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel

from shared.workflow_spec import ActionType


class JobState(StrEnum):
    PREP = "PREP"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    UNKNOWN = "UNKNOWN"  # the executor has no such job


class JobStatus(BaseModel):
    state: JobState
    error: str | None = None
    started_at: float | None = None
    ended_at: float | None = None


class JobRequest(BaseModel):
    action_id: str
    external_id: str  # unique per attempt: lets a retried submit find the job it already made
    type: ActionType
    name: str
    action_folder: str | None
    main_class: str | None
    command: list[str] | None
    arguments: list[str]
    configuration: dict[str, str]
    notify_url: str


class Executor(Protocol):
    name: str
    supports: frozenset[ActionType]

    async def submit(self, job: JobRequest) -> str:
        """Start the job and return its id. Submitting an external id again returns the same job."""

    async def find(self, external_id: str) -> str | None: ...

    async def status(self, job_id: str) -> JobStatus: ...

    async def kill(self, job_id: str) -> None: ...

    async def close(self) -> None: ...
