"""Local executor: each action is a subprocess of this machine, run by a detached
supervisor (``local_job``) whose job folder under ``jobs_dir`` is the job's record, so
any process on the machine (the callback poller, a kill request) can read its status."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from shared.executors.base import JobRequest, JobState, JobStatus
from shared.workflow_spec import ActionType

# The supervisor is started as ``python -m shared.executors.local_job`` from here.
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


def _job_id(external_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in external_id)


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class LocalExecutor:
    name = "local"
    supports = frozenset({ActionType.COMMAND_LINE, ActionType.SHELL})

    def __init__(self, jobs_dir: Path, slots: int = 4) -> None:
        self.jobs_dir = jobs_dir
        self.slots = slots
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._reapers: set[asyncio.Task] = set()

    def _write_request(self, job: JobRequest, job_dir: Path) -> bool:
        """Create the job's folder and request; False if the job exists already."""
        try:
            job_dir.mkdir()
        except FileExistsError:
            return False
        env = dict(os.environ)
        env["PINGO_ACTION_ID"] = job.action_id
        if job.type == ActionType.SHELL:
            env.update(job.configuration)
        request = {
            "argv": self.argv(job),
            "cwd": job.action_folder or str(job_dir),
            "env": env,
            "notify_url": job.notify_url,
            "slots_dir": str(self.jobs_dir / ".slots"),
            "slots": self.slots,
            "external_id": job.external_id,
        }
        (job_dir / "request.json").write_text(json.dumps(request))
        return True

    def argv(self, job: JobRequest) -> list[str]:
        if job.type == ActionType.COMMAND_LINE:
            props = [f"-D{k}={v}" for k, v in job.configuration.items()]
            return ["java", *props, "-cp", f"{job.action_folder}/*", job.main_class or "", *job.arguments]
        return [*(job.command or []), *job.arguments]

    async def submit(self, job: JobRequest) -> str:
        job_id = _job_id(job.external_id)
        job_dir = self.jobs_dir / job_id
        if not await asyncio.to_thread(self._write_request, job, job_dir):
            return job_id  # submitted before (a retried submit): the same job
        err = await asyncio.to_thread(open, job_dir / "supervisor.log", "wb")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "shared.executors.local_job",
                str(job_dir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                cwd=PROJECT_ROOT,
            )
        finally:
            err.close()
        await asyncio.to_thread((job_dir / "supervisor.pid").write_text, str(proc.pid))
        task = asyncio.create_task(proc.wait())  # reaps it, so no zombie looks alive
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)
        return job_id

    async def find(self, external_id: str) -> str | None:
        job_id = _job_id(external_id)
        return job_id if (self.jobs_dir / job_id).is_dir() else None

    async def status(self, job_id: str) -> JobStatus:
        return await asyncio.to_thread(self._status, job_id)

    def _status(self, job_id: str) -> JobStatus:
        job_dir = self.jobs_dir / job_id
        if not job_dir.is_dir():
            return JobStatus(state=JobState.UNKNOWN)
        try:
            st = json.loads((job_dir / "status.json").read_text())
        except (OSError, ValueError):
            st = {}
        state = JobState(st.get("state", "PREP"))
        if state in (JobState.PREP, JobState.RUNNING):
            pid_file = job_dir / "supervisor.pid"
            pid = st.get("supervisor_pid") or (int(pid_file.read_text()) if pid_file.exists() else None)
            if pid is not None and not _alive(pid):
                # Re-read: the supervisor may have written its final state as it exited.
                st = json.loads((job_dir / "status.json").read_text()) if (job_dir / "status.json").exists() else st
                state = JobState(st.get("state", "PREP"))
                if state in (JobState.PREP, JobState.RUNNING):
                    return JobStatus(
                        state=JobState.FAILED, error="the local job supervisor died", started_at=st.get("started_at")
                    )
        return JobStatus(
            state=state, error=st.get("error"), started_at=st.get("started_at"), ended_at=st.get("ended_at")
        )

    async def kill(self, job_id: str) -> None:
        job_dir = self.jobs_dir / job_id
        if not job_dir.is_dir():
            return
        (job_dir / "kill").touch()
        try:
            st = json.loads((job_dir / "status.json").read_text())
            pid = st.get("supervisor_pid")
        except (OSError, ValueError):
            pid_file = job_dir / "supervisor.pid"
            pid = int(pid_file.read_text()) if pid_file.exists() else None
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)

    async def close(self) -> None:
        # Jobs outlive this process on purpose; just stop reaping.
        for t in list(self._reapers):
            t.cancel()
