"""Where actions run: the executor port and its adapters (local subprocesses; Oozie later)."""

from shared.config import Settings
from shared.executors.base import Executor, JobRequest, JobState, JobStatus


def make_executor(settings: Settings) -> Executor:
    from shared.executors.local import LocalExecutor

    return LocalExecutor(settings.jobs_dir, slots=settings.local_slots)


__all__ = ["Executor", "JobRequest", "JobState", "JobStatus", "make_executor"]
