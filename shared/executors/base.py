"""The executor port, and the argument contract every executor follows (docs/planning.md, "The argument contract"):
additionalInput values in order, then the parents' output paths by parent id, then the
action's own (attempt) output path last."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from shared.errors import PingoError, Refused
from shared.workflow_spec import ActionSpec, ActionType


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
    # The parents' output paths (among ``arguments`` too): what a sandboxed job may read.
    inputs: list[str] = []
    configuration: dict[str, str]
    notify_url: str
    # The configuration keys whose values are secret (docs/planning.md, "Secret values"):
    # the local executor hands them to the job runner in memory, never in request.json.
    secret_keys: list[str] = []
    # MAP_REDUCE: a streaming command (argv) or a Java class per side, and the formats;
    # SPARK: the application file (inside action_folder) and spark-submit options.
    mapper: list[str] | str | None = None
    reducer: list[str] | str | None = None
    input_format: str | None = None
    output_format: str | None = None
    # A Java job's Hadoop API: "mapred" (the old one) or "mapreduce" (the new one).
    mapreduce_api: str = "mapred"
    application: str | None = None
    spark_opts: list[str] = []
    # SQOOP: its fields as in the definition (``shared.hadoop.sqoop.sqoop_fields``).
    sqoop: dict[str, Any] = {}
    # The user the job runs for (docs/users.md, "On Hadoop"): Oozie's doAs. None: users off,
    # the job runs as Pingo's own identity. The local executor runs every job as Pingo's OS user,
    # a job with an owner in its sandbox (docs/users.md, "What a job can reach").
    owner: str | None = None


LogStream = Literal["stdout", "stderr"]
# Bytes a job's log is read and sent in, and how often a followed log is looked at again.
LOG_CHUNK = 64 * 1024
FOLLOW_INTERVAL = 0.2


# What an executor raises on purpose (shared/errors.py); a failure to reach it is its client's own.
class ExecutorError(PingoError):
    """The base of the executor port's errors."""


class JobRefused(ExecutorError, Refused):
    """The executor refused who submits (Oozie: a user it does not trust to act for the
    action's owner): final, the action ends FAILED without another try."""


class LogsGone(ExecutorError):
    """The job's logs were removed (job retention, or the cluster purged the job)."""


class JobFenced(ExecutorError):
    """The attempt's external id was fenced (``Executor.fence``): its submitter was judged
    lost and the attempt taken back, so no job of it may start."""


class Executor(Protocol):
    name: str
    supports: frozenset[ActionType]

    def refusals(self, action: ActionSpec, owner: str | None = None) -> list[tuple[str, str]]:
        """(field, why) for each part of a supported action this executor cannot run for
        ``owner`` (the submitting user; None with users off): checked at submission, so that
        the workflow is refused whole, before anything runs."""
        ...

    async def submit(self, job: JobRequest, prepare: Callable[[], None] | None = None) -> str:
        """Start the job and return its id. Submitting an external id again returns the same job.
        Raises ``JobFenced`` (see ``fence``), ``JobRefused`` (final); any other failure is
        retried, up to ``PINGO_SUBMIT_RETRY_CEILING`` tries. ``prepare``: the caller's
        blocking work to do first (``Storage.preparer``), run in a worker thread (the local
        executor's own, which makes the job's folder: one hand-off on the hop instead of
        three); what it raises is raised, and then no job is made."""

    def job_id(self, external_id: str) -> str | None:
        """The id the job of ``external_id`` will have, known before it is submitted (the
        local executor: its folder's name), so that the claim of an attempt records it and
        no write follows the submit (docs/performance.md, "A chain's hop"); None when only
        the submit tells it (Oozie: it makes the id). An executor that names its jobs so
        also answers ``status`` UNKNOWN for a job not made yet, and ``kill`` of a job not
        made yet fences it (see ``fence``): the poller and a kill rely on both."""
        ...

    async def find(self, external_id: str) -> str | None: ...

    async def fence(self, external_id: str) -> str | None:
        """Before an attempt whose submitter seems lost is taken back: the id of its job if
        one exists (to be recorded instead), else None, and from then on no job of
        ``external_id`` starts (a submit of it raises ``JobFenced``). A submitter that was
        only slow must not start a second live attempt of the action (docs/state-machines.md,
        "Action")."""
        ...

    async def status(self, job_id: str) -> JobStatus: ...

    async def kill(self, job_id: str) -> None: ...

    async def logs(
        self, job_id: str, stream: LogStream, tail: int | None = None, follow: bool = False
    ) -> AsyncIterator[bytes]:
        """The job's standard output or error, in chunks (docs/api.md, "Action logs"): its
        last ``tail`` lines only, if given; with ``follow``, then the bytes it writes next,
        until it ends. Raises ``LogsGone`` if its logs no longer exist."""
        ...

    async def prune(self, ended_before: float, keep: set[str]) -> int:
        """Remove what is kept of jobs that ended before ``ended_before`` (job retention),
        never a running job's nor one in ``keep``; the count removed."""
        ...

    async def close(self) -> None: ...
