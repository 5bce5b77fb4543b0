"""The local job runner (docs/architecture.md, "The local job runner"): one long-lived
process per jobs folder and host runs every job, whichever executor (action manager)
submitted it; it outlives them, keeps the job folder protocol, and is replaced when it
dies."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from shared.executors import local
from shared.executors.base import JobRequest, JobState
from shared.executors.local import LocalExecutor, job_name
from shared.executors.local_runner import address
from tests.support.gates import Gate
from tests.support.workflows import JOBS


def synth_job(tmp_path: Path, name: str, seconds: float, notify_url: str, gate: Gate | None = None) -> JobRequest:
    """``gate``: the job runs on until the test opens it (tests/support/gates.py)."""
    return JobRequest(
        action_id=f"wf-r.{name}", external_id=f"wf-r.{name}#1", type="SHELL", name=name, action_folder=str(JOBS),
        main_class=None, command=["python3", "synth.py"], arguments=[name, str(seconds), "1", str(tmp_path / name)],
        configuration=gate.env if gate else {}, notify_url=notify_url,
    )  # fmt: skip


async def ended(executor: LocalExecutor, job_id: str, timeout: float = 30.0) -> JobState:
    async with asyncio.timeout(timeout):
        while (st := await executor.status(job_id)).state in (JobState.PREP, JobState.RUNNING):
            await asyncio.sleep(0.05)
    return st


def runner_pid(jobs: Path, job_id: str) -> int:
    return json.loads((jobs / job_id / "status.json").read_text())["runner"]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def test_two_action_managers_on_one_host_share_one_runner_and_every_job_notifies(
    tmp_path: Path, notifications
) -> None:
    url, got = notifications
    jobs = tmp_path / "jobs"
    managers = [LocalExecutor(jobs, slots=4), LocalExecutor(jobs, slots=4)]
    ids = await asyncio.gather(
        *(managers[i % 2].submit(synth_job(tmp_path, f"j{i}", 0.2, url)) for i in range(16))
    )  # fmt: skip
    states = [await ended(managers[0], job_id) for job_id in ids]
    assert all(st.state == JobState.SUCCEEDED for st in states), [st.error for st in states]
    assert len({runner_pid(jobs, j) for j in ids}) == 1  # one runner for both managers
    assert not any((jobs / j / "supervisor.log").exists() for j in ids)  # no supervisor of its own
    # A job still running a second after its start is announced RUNNING first (a 0.2 s
    # job can take that long on a loaded machine): its end is what every job must tell.
    async with asyncio.timeout(10):
        while len(ends := [g for g in got if g["status"] != "RUNNING"]) < 16:
            await asyncio.sleep(0.05)
    assert sorted(g["jobId"] for g in ends) == sorted(ids) and {g["status"] for g in ends} == {"SUCCEEDED"}
    for job_id in {g["jobId"] for g in got if g["status"] == "RUNNING"}:
        assert [g["status"] for g in got if g["jobId"] == job_id] == ["RUNNING", "SUCCEEDED"]
    # The notification URL holds the callback secret: it was never written to a file.
    sock, _, _ = address(jobs)
    for folder in (jobs, sock.parent):
        for f in folder.rglob("*"):
            if f.is_file():
                assert b"s3cret" not in f.read_bytes(), f


async def test_a_queued_job_is_killed_before_it_starts_and_frees_nothing_it_did_not_hold(
    tmp_path: Path, notifications, gate: Gate
) -> None:
    url, got = notifications
    jobs = tmp_path / "jobs"
    executor = LocalExecutor(jobs, slots=1)
    first = await executor.submit(synth_job(tmp_path, "long", 0.0, url, gate))
    queued = await executor.submit(synth_job(tmp_path, "queued", 0.1, url))
    assert (await executor.status(queued)).state == JobState.PREP
    await executor.kill(queued)
    st = await ended(executor, queued, 10)
    assert st.state == JobState.KILLED and st.error == "killed before it started"
    async with asyncio.timeout(10):  # it reads RUNNING from its start notice on, a second in
        while (first, "RUNNING") not in [(g["jobId"], g["status"]) for g in got]:
            await asyncio.sleep(0.05)
    assert (await executor.status(first)).state == JobState.RUNNING  # the running one goes on
    gate.open()
    assert (await ended(executor, first)).state == JobState.SUCCEEDED
    assert not (tmp_path / "queued").exists()
    async with asyncio.timeout(10):
        while len(got) < 3:
            await asyncio.sleep(0.05)
    # The long job was announced RUNNING a second after its start (its action reads RUNNING
    # from then on), then its end; the queued one, which never started, only its end.
    assert [(g["jobId"], g["status"]) for g in got if g["jobId"] == first] == [(first, "RUNNING"), (first, "SUCCEEDED")]
    assert [(g["jobId"], g["status"]) for g in got if g["jobId"] == queued] == [(queued, "KILLED")]


async def test_a_job_beats_from_its_first_second_on_and_reads_alive_before(
    tmp_path: Path, notifications, gate: Gate
) -> None:
    """The runner makes no heartbeat file when it takes a job (a job that ends within a
    second never needs one: docs/performance.md, "The job runner"); until its first beat
    the job is judged by its folder's age, so it reads PREP, and one waiting or running
    past a second has a fresh heartbeat."""
    url, _ = notifications
    jobs = tmp_path / "jobs"
    executor = LocalExecutor(jobs, slots=1)
    running = await executor.submit(synth_job(tmp_path, "running", 0.0, url, gate))
    queued = await executor.submit(synth_job(tmp_path, "queued", 0.1, url))
    assert (await executor.status(queued)).state == JobState.PREP
    async with asyncio.timeout(10):
        while not all((jobs / j / "heartbeat").exists() for j in (running, queued)):
            await asyncio.sleep(0.05)
    assert (await executor.status(running)).state == JobState.RUNNING
    assert (await executor.status(queued)).state == JobState.PREP
    gate.open()
    assert (await ended(executor, running)).state == JobState.SUCCEEDED
    assert (await ended(executor, queued)).state == JobState.SUCCEEDED


async def test_a_job_a_dead_runner_was_starting_is_not_started_again(tmp_path: Path, notifications) -> None:
    """A runner writes nothing when it takes a job (its status.json comes at its first
    second or its end: docs/performance.md, "The job runner"), but it makes the job's
    output files before its process: a job handed over again with its stdout.log there
    (the runner died as it started it) is the same job, not started twice."""
    url, _ = notifications
    jobs = tmp_path / "jobs"
    executor = LocalExecutor(jobs, slots=1)
    taken = synth_job(tmp_path, "taken", 0.0, url)
    job_id = job_name(taken.external_id)
    request = executor._make(taken, jobs / job_id, None)
    assert request is not None
    (jobs / job_id / "stdout.log").touch()  # what the dead runner left of its start
    assert await executor._hand_to_runner(job_id, url, {}, request)
    later = await executor.submit(synth_job(tmp_path, "later", 0.0, url))
    assert (await ended(executor, later)).state == JobState.SUCCEEDED
    # One slot, oldest first: had it been started, it would have run before the later one.
    assert not (tmp_path / "taken").exists()
    assert (await executor.status(job_id)).state == JobState.PREP


async def test_a_runner_that_dies_is_replaced_and_its_jobs_read_failed(
    tmp_path: Path, notifications, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "HEARTBEAT_TIMEOUT", 2.0)  # not the 15 s of production, for the test's sake
    url, _ = notifications
    jobs = tmp_path / "jobs"
    executor = LocalExecutor(jobs)
    orphan = await executor.submit(synth_job(tmp_path, "orphan", 30.0, url))
    async with asyncio.timeout(10):
        while (await executor.status(orphan)).state != JobState.RUNNING:
            await asyncio.sleep(0.05)
    dead = runner_pid(jobs, orphan)
    job_pid = json.loads((jobs / orphan / "status.json").read_text())["pid"]
    os.kill(dead, signal.SIGKILL)
    try:
        fresh = await executor.submit(synth_job(tmp_path, "fresh", 0.1, url))
        assert (await ended(executor, fresh)).state == JobState.SUCCEEDED
        assert runner_pid(jobs, fresh) != dead
        st = await ended(executor, orphan, 10)
        assert st.state == JobState.FAILED and "no heartbeat" in st.error
    finally:
        try:
            os.kill(job_pid, signal.SIGKILL)  # the dead runner's job, left running
        except ProcessLookupError:
            pass


async def test_a_runner_whose_jobs_folder_is_removed_stops_its_jobs_and_exits_at_once(
    tmp_path: Path, notifications
) -> None:
    url, _ = notifications
    jobs = tmp_path / "jobs"
    executor = LocalExecutor(jobs, slots=1)
    running = await executor.submit(synth_job(tmp_path, "long", 60.0, url))
    await executor.submit(synth_job(tmp_path, "queued", 0.1, url))
    async with asyncio.timeout(10):
        while (await executor.status(running)).state != JobState.RUNNING:
            await asyncio.sleep(0.05)
    runner = runner_pid(jobs, running)
    job_pid = json.loads((jobs / running / "status.json").read_text())["pid"]
    _, lock, _ = address(jobs)
    shutil.rmtree(jobs)
    # Not after its idle time (30 s), and its job does not run on with nothing to record it.
    async with asyncio.timeout(10):
        while alive(runner) or alive(job_pid):
            await asyncio.sleep(0.1)
    assert not jobs.exists()  # never made again
    assert not (tmp_path / "queued").exists()  # the queued job never ran
    assert not lock.exists()


async def test_an_executor_keeps_one_connection_and_reaches_the_next_runner_when_it_closes(
    tmp_path: Path, notifications
) -> None:
    url, _ = notifications
    jobs = tmp_path / "jobs"
    executor = LocalExecutor(jobs)
    first = await asyncio.gather(*(executor.submit(synth_job(tmp_path, f"a{i}", 0.0, url)) for i in range(8)))
    assert all([(await ended(executor, j)).state == JobState.SUCCEEDED for j in first])
    runner = runner_pid(jobs, first[0])
    # Every job went over one connection: the runner's socket, and one taken from it.
    sock, _, _ = address(jobs)
    assert sum(line.endswith(f" {sock}") for line in Path("/proc/net/unix").read_text().splitlines()) == 2
    os.kill(runner, signal.SIGTERM)  # as when it exits idle: it closes its connections
    async with asyncio.timeout(10):
        while alive(runner):
            await asyncio.sleep(0.05)
    later = await executor.submit(synth_job(tmp_path, "later", 0.0, url))
    assert (await ended(executor, later)).state == JobState.SUCCEEDED
    assert runner_pid(jobs, later) != runner
