"""Local executor: each action is a subprocess, run by a detached supervisor
(``local_job``) whose job folder under ``jobs_dir`` is the job's record. Any process that
sees the folder (the callback poller, a kill request; on Kubernetes, other pods on the
same volume) reads the status from it, judges liveness by the supervisor's heartbeat file
and asks for a kill with a ``kill`` file: no process id is used across processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from shared.executors.base import JobRequest, JobState, JobStatus
from shared.workflow_spec import ActionType

# The supervisor is started as ``python -m shared.executors.local_job`` from here.
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
# A supervisor that has not touched its heartbeat for this long is gone (it beats every second).
HEARTBEAT_TIMEOUT = 15.0


def _job_id(external_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in external_id)


def _age(path: Path) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


def job_environment(configuration: dict[str, str], action_id: str, shell: bool) -> dict[str, str]:
    """The action's environment: this process's, less Pingo's own settings (they hold the
    database and broker credentials), plus the action id and, for SHELL, its configuration."""
    from shared.config import Settings

    own = {f"PINGO_{name.upper()}" for name in Settings.model_fields}
    env = {k: v for k, v in os.environ.items() if k not in own}
    env["PINGO_ACTION_ID"] = action_id
    if shell:
        env.update(configuration)
    return env


class LocalExecutor:
    name = "local"
    supports = frozenset({ActionType.COMMAND_LINE, ActionType.SHELL})

    def __init__(self, jobs_dir: Path, slots: int = 4) -> None:
        self.jobs_dir = jobs_dir
        self.slots = slots
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._reapers: set[asyncio.Task] = set()

    def argv(self, job: JobRequest) -> list[str]:
        if job.type == ActionType.COMMAND_LINE:
            props = [f"-D{k}={v}" for k, v in job.configuration.items()]
            return ["java", *props, "-cp", f"{job.action_folder}/*", job.main_class or "", *job.arguments]
        return [*(job.command or []), *job.arguments]

    def _write_request(self, job: JobRequest, job_dir: Path) -> bool:
        """Create the job's folder and request; False if the job exists already."""
        try:
            job_dir.mkdir()
        except FileExistsError:
            return False
        request = {
            "argv": self.argv(job),
            "cwd": job.action_folder or str(job_dir),
            "env": job_environment(job.configuration, job.action_id, job.type == ActionType.SHELL),
            "notify_url": job.notify_url,
            "slots_dir": str(self.jobs_dir / ".slots"),
            "slots": self.slots,
            "external_id": job.external_id,
        }
        (job_dir / "request.json").write_text(json.dumps(request))
        return True

    async def submit(self, job: JobRequest) -> str:
        job_id = _job_id(job.external_id)
        job_dir = self.jobs_dir / job_id
        if not await asyncio.to_thread(self._write_request, job, job_dir):
            return job_id  # submitted before (a retried submit): the same job
        err = await asyncio.to_thread(open, job_dir / "supervisor.log", "wb")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shared.executors.local_job", str(job_dir),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=err,
                start_new_session=True, cwd=PROJECT_ROOT,
            )  # fmt: skip
        finally:
            err.close()
        task = asyncio.create_task(proc.wait())  # reaps it, so it leaves no zombie
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)
        return job_id

    async def find(self, external_id: str) -> str | None:
        job_id = _job_id(external_id)
        return job_id if await asyncio.to_thread((self.jobs_dir / job_id).is_dir) else None

    async def status(self, job_id: str) -> JobStatus:
        return await asyncio.to_thread(self._status, job_id)

    def _read(self, job_dir: Path) -> dict:
        try:
            return json.loads((job_dir / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def _status(self, job_id: str) -> JobStatus:
        job_dir = self.jobs_dir / job_id
        if not job_dir.is_dir():
            return JobStatus(state=JobState.UNKNOWN)
        st = self._read(job_dir)
        state = JobState(st.get("state", "PREP"))
        if state in (JobState.PREP, JobState.RUNNING):
            # Before its first beat, a supervisor is judged by the age of its job folder.
            age = _age(job_dir / "heartbeat") or _age(job_dir) or 0.0
            if age > HEARTBEAT_TIMEOUT:
                st = self._read(job_dir)  # it may have written its final state as it stopped
                state = JobState(st.get("state", "PREP"))
                if state in (JobState.PREP, JobState.RUNNING):
                    return JobStatus(
                        state=JobState.FAILED, started_at=st.get("started_at"),
                        error=f"the local job supervisor stopped (no heartbeat for {age:.0f}s)",
                    )  # fmt: skip
        return JobStatus(
            state=state, error=st.get("error"), started_at=st.get("started_at"), ended_at=st.get("ended_at")
        )

    async def kill(self, job_id: str) -> None:
        """Ask the supervisor to stop the job; it watches for this file while the job waits or runs."""
        job_dir = self.jobs_dir / job_id
        if await asyncio.to_thread(job_dir.is_dir):
            await asyncio.to_thread((job_dir / "kill").touch)

    async def close(self) -> None:
        # Jobs outlive this process on purpose; just stop reaping.
        for t in list(self._reapers):
            t.cancel()
