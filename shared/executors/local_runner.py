"""The job runner of one host: ``python -m shared.executors.local_runner JOBS_DIR``.

One long-lived process runs every local job of a jobs folder on this host, instead of a
new Python interpreter per job (docs/architecture.md, "The local job runner"). It
keeps the job folder protocol of the per-job supervisor (``local_job``) unchanged, so
every reader (the poller, a kill request, another pod on the same volume) is the same:
``status.json`` written atomically (a job without one reads PREP: it is written at the
job's first second or its end, whichever comes first), ``heartbeat`` touched every second while
the job waits or runs, a ``kill`` file asks it to stop, slots are flocks on the shared
slot files, and the notification URL is called at the end, as Oozie would.

It is started detached (its own session) by the first executor that finds none
answering, so it outlives the action manager that started it, and it exits after it
has had no job for ``IDLE_EXIT`` seconds. One runner per jobs folder and host: it holds
a lock beside its socket, in a folder private to its user under the host's temporary
folder (a Unix socket's path must be short, and must not sit on a shared volume).

The executor hands a job over by its folder's name, request (argv, environment),
notification URL and secret values, one JSON line on a connection it keeps for many jobs
(``Handover``, ``runner_link``); no ``request.json`` is written for it;
the URL carries the callback secret and the values are the job's secrets
(docs/planning.md, "Secret values"), so both are kept in memory only. A job is started
with fork/exec (argv, never a shell), its output in the job folder, as the leader of a
process group of its own: a kill reaches every process of the job, and its end is
written only once none is left (``process_tree``). A job of a user runs in its sandbox
(``sandbox``): its argv is bwrap's, and its output is moved out of its outbox when it
has ended, before its end is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from shared.config import Settings
from shared.executors import process_tree, sandbox
from shared.executors.local_job import (
    HEARTBEAT_EVERY,
    KILL_GRACE,
    Slot,
    beat,
    ending,
    replace_status,
    try_slot,
)  # fmt: skip
from shared.executors.notices import Notices
from shared.logs import configure_logging

log = logging.getLogger(__name__)

# A runner with no job for this long exits (the next submission starts another).
IDLE_EXIT = 30.0
# How often a running job's kill file is looked for, and a queued job's.
KILL_CHECK = 0.1
QUEUED_KILL_CHECK = 0.5
# How often a queued job tries for a slot held by another process (a job of this
# runner ending frees one at once).
SLOT_RETRY = 0.05
# The longest request line taken (a job's name, URL, secret values and request: its argv
# and environment, which exec bounds at a few MiB).
MAX_REQUEST = 16 << 20
# How often the runner checks that its jobs folder is still there: removed (a test's or a
# benchmark's temporary folder), nothing of its jobs can be recorded, so it stops them
# and exits (docs/architecture.md, "The local job runner").
FOLDER_CHECK = 1.0
# A job still running this long after its start is announced (a RUNNING notification), so
# its action reads RUNNING from then on rather than at the poller's next look; a job that
# ends sooner sends only its end (docs/state-machines.md, "Action").
START_NOTICE_AFTER = 1.0


def runtime_dir() -> Path:
    """The folder of this user's runners' sockets and locks: private, and checked to be."""
    path = Path(tempfile.gettempdir()) / f"pingo-runner-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    st = path.lstat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or not path.is_dir() or path.is_symlink():
        raise PermissionError(f"{path} is not a folder private to this user")
    return path


# The hand-over's version, in the runner's address: an upgraded executor never hands a job
# to a runner of an earlier version still serving (it starts its own beside it; slots are
# flocks, so the two never run too many). 2: the request rides in the hand-over.
PROTOCOL = 2


def address(jobs_dir: Path) -> tuple[Path, Path, Path]:
    """The runner's socket, lock and log for ``jobs_dir`` on this host."""
    digest = hashlib.sha256(str(jobs_dir.resolve()).encode()).hexdigest()[:20]
    name = f"{digest}.v{PROTOCOL}"
    base = runtime_dir()
    return base / f"{name}.sock", base / f"{name}.lock", base / f"{name}.log"


@dataclass
class Job:
    dir: Path
    notify_url: str
    request: dict[str, Any]
    proc: subprocess.Popen[bytes] | None = None
    slot: Slot | None = None
    announce: asyncio.TimerHandle | None = None
    # What its status.json holds: kept here, so each step writes it without reading it.
    status: dict[str, Any] = field(default_factory=dict)
    # Whether its start (RUNNING, its pid and start time) is written yet: not before its
    # first beat or start notice, so a job that ends sooner writes its status once, at its end.
    start_written: bool = False
    killed_at: float | None = None
    # Why the runner itself stopped the job, if it did (its end is FAILED with this).
    stopped_because: str | None = None


class Runner:
    def __init__(self, jobs_dir: Path, job_umask: int) -> None:
        self.jobs_dir = jobs_dir
        self.job_umask = job_umask
        self.jobs: dict[str, Job] = {}
        self.queue: deque[Job] = deque()
        self.wake = asyncio.Event()
        self.held = 0  # slots its jobs hold
        self.idle_since = time.monotonic()
        self.clients: set[asyncio.Transport] = set()
        self.tasks: set[asyncio.Task] = set()
        self.notices = Notices()  # gathered per callback service while one is in flight

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- taking jobs ---------------------------------------------------------------

    def take(self, line: bytes) -> bytes:
        """The reply to one request line."""
        self.idle_since = time.monotonic()
        try:
            reply = self.accept(json.loads(line))
        except Exception as exc:  # a malformed request is refused; the runner goes on
            reply = f"error {type(exc).__name__}: {exc}"
        return reply.encode() + b"\n"

    def accept(self, message: dict[str, Any]) -> str:
        name = str(message["job"])
        if name != Path(name).name or name.startswith("."):
            return f"error not a job name: {name!r}"
        job_dir = self.jobs_dir / name
        # Handed over twice, or taken by a runner before (its output files are made before
        # its process is started, its status.json at its first beat or its end): the same job.
        if name in self.jobs or (job_dir / "status.json").exists() or (job_dir / "stdout.log").exists():
            return "ok"
        job = Job(job_dir, str(message.get("notify") or ""), {})
        self.jobs[name] = job
        try:
            # Neither a heartbeat nor a status.json yet: a job reads PREP without one, and
            # until its first beat (within a second) it is judged by its folder's age, so
            # one that ends sooner writes its status once, at its end. Creating a file is
            # the largest part of the runner's CPU per job where the file system makes it
            # dear (docs/performance.md, "The job runner").
            job.status.update(state="PREP", submitted_at=time.time(), runner=os.getpid())
            # The request rides in the hand-over (an executor of an earlier version, which wrote
            # it to the job's folder, talks to a runner of its own version: ``PROTOCOL``).
            job.request = dict(message["request"])
            int(job.request["slots"])
            # Secret values come with the hand-over, in memory only (docs/planning.md, "Secret values").
            job.request["env"].update({str(k): str(v) for k, v in (message.get("secrets") or {}).items()})
        except Exception as exc:
            self.finish(job, "FAILED", f"the local job runner could not read the job: {type(exc).__name__}: {exc}")
            return "ok"
        self.queue.append(job)
        self.wake.set()
        return "ok"

    # -- starting --------------------------------------------------------------------

    async def dispatch(self) -> None:
        """Start queued jobs, oldest first, as slots free up."""
        while True:
            if not self.wake.is_set():
                if self.queue and not self.holds_all(self.queue[0]):
                    with contextlib.suppress(TimeoutError):  # a slot another process holds may free up
                        await asyncio.wait_for(self.wake.wait(), SLOT_RETRY)
                else:  # nothing queued, or every slot is a job of ours, whose end wakes this
                    await self.wake.wait()
            self.wake.clear()
            while self.queue:
                job = self.queue[0]
                if (job.dir / "kill").exists():
                    self.queue.popleft()
                    self.killed_queued(job)
                    continue
                if self.holds_all(job):
                    break
                try:
                    slot = try_slot(Path(job.request["slots_dir"]), int(job.request["slots"]))
                except OSError:  # the jobs folder was removed: ``folder_removed`` stops the runner
                    slot = None
                if slot is None:
                    break
                self.queue.popleft()
                job.slot = slot
                self.held += 1
                try:
                    self.start(job)
                except Exception as exc:  # the runner's own fault: this job fails, the others go on
                    log.exception("starting job %s failed", job.dir.name)
                    self.finish(job, "FAILED", f"the local job runner failed: {type(exc).__name__}: {exc}")

    def holds_all(self, job: Job) -> bool:
        """Whether this runner's jobs hold every slot ``job`` could take."""
        return self.held >= int(job.request["slots"])

    def start(self, job: Job) -> None:
        argv = job.request["argv"]
        started = time.time()
        out, err = output_files(job.dir)
        try:
            # Popen forks and execs in C, and its exit is awaited through a pidfd
            # (``watch_exit``): no asyncio transport nor thread per child, the larger
            # part of the runner's CPU per job (docs/performance.md, "The job runner").
            job.proc = subprocess.Popen(
                argv, cwd=job.request["cwd"], env=job.request["env"], stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, umask=self.job_umask, start_new_session=True,
            )  # fmt: skip
        except Exception as exc:  # OSError, and ValueError for a NUL or an "=" the OS cannot take
            program = repr(argv[0]) if argv else "an empty command"
            self.finish(job, "FAILED", f"could not start {program}: {exc}", started_at=started)
            return
        finally:
            os.close(out)
            os.close(err)
        # Its start is written at its first beat or start notice (``write_start``), with
        # its end if it ends sooner: a status.json replacement less for most jobs, each a
        # new file where file creation is the runner's dearest work (docs/performance.md,
        # "The job runner"). Until then it reads PREP, judged alive by its folder's age.
        job.status.update(state="RUNNING", pid=job.proc.pid, started_at=started)
        self.watch_exit(job)
        job.announce = asyncio.get_running_loop().call_later(START_NOTICE_AFTER, self.announce_start, job)

    def write_start(self, job: Job) -> None:
        """Write the start of a job that still runs, once (its first status.json)."""
        if job.start_written or job.proc is None or job.proc.returncode is not None or job.dir.name not in self.jobs:
            return
        self.record(job)
        job.start_written = True

    def announce_start(self, job: Job) -> None:
        """Tell the callback URL the job runs, if it still does ``START_NOTICE_AFTER`` on:
        the callback checks with the executor (so its start is written first) and moves
        the action to RUNNING."""
        if job.proc is not None and job.proc.returncode is None and job.dir.name in self.jobs:
            with contextlib.suppress(OSError):
                self.write_start(job)
            if job.notify_url:
                self.spawn(self.notices.send(job.notify_url, job.dir.name, "RUNNING"))

    def watch_exit(self, job: Job) -> None:
        """Call ``exited`` once the job's process has ended: the loop watches a pidfd of it
        (Linux 5.3 and later), else a thread waits for it."""
        assert job.proc is not None
        proc = job.proc
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.spawn(self.wait_in_thread(job))
            return
        loop = asyncio.get_running_loop()

        def readable() -> None:
            loop.remove_reader(fd)
            os.close(fd)
            self.exited(job, proc.wait())  # it has ended: this reaps it at once

        loop.add_reader(fd, readable)

    async def wait_in_thread(self, job: Job) -> None:
        assert job.proc is not None
        self.exited(job, await asyncio.to_thread(job.proc.wait))

    def exited(self, job: Job, rc: int) -> None:
        assert job.proc is not None
        if job.announce is not None:
            job.announce.cancel()
        if job.request.get("sandbox") or not process_tree.gone(job.proc.pid):
            self.spawn(self.wait(job, rc))  # processes to end, or a sandbox to collect: off the loop
            return
        try:
            state, error = self.outcome(job, rc, [])
        except Exception as exc:  # its folder removed, say: the job still leaves the runner
            state, error = "FAILED", f"the local job runner could not end the job: {type(exc).__name__}: {exc}"
        self.finish(job, state, error, exit_code=rc)

    async def wait(self, job: Job, rc: int) -> None:
        assert job.proc is not None
        try:
            # What the job left running ends with it, before its end is told: a retry never
            # runs beside what is left of this attempt.
            left = await asyncio.to_thread(process_tree.end, job.proc.pid)
            if spec := job.request.get("sandbox"):
                await asyncio.to_thread(sandbox.collect, spec)
            state, error = self.outcome(job, rc, left)
        except Exception as exc:  # its folder removed, say: the job still leaves the runner
            state, error = "FAILED", f"the local job runner could not end the job: {type(exc).__name__}: {exc}"
        self.finish(job, state, error, exit_code=rc)

    def outcome(self, job: Job, rc: int, left: list[int]) -> tuple[str, str | None]:
        """The job's end state and error, once none of its processes is left but ``left``."""
        spec = job.request.get("sandbox")
        if left:
            return "FAILED", f"processes {left} of the job did not end after SIGKILL"
        if job.stopped_because is not None:
            return "FAILED", job.stopped_because
        if spec and job.killed_at is None and (why := sandbox.launch_error(job.dir, rc, job.request["argv"])):
            return "FAILED", why
        return ending(job.dir, rc, job.killed_at is not None)

    @staticmethod
    def record(job: Job, **fields: object) -> None:
        """A step of the job, written to its status.json."""
        job.status.update(fields)
        replace_status(job.dir, job.status)

    def finish(self, job: Job, state: str, error: str | None, **fields: object) -> None:
        """Write the job's end, free its slot, and notify, whatever of that can be done: a
        job always leaves the runner (one left in ``jobs`` would keep it alive for ever)."""
        try:
            self.record(job, state=state, ended_at=time.time(), error=error, **fields)
        except OSError as exc:
            log.warning("could not write the end of job %s: %s", job.dir.name, exc)
        finally:
            if job.slot is not None:
                job.slot.close()
                job.slot = None
                self.held -= 1
                self.wake.set()  # a queued job may take the slot
            self.jobs.pop(job.dir.name, None)
            self.idle_since = time.monotonic()
        # Three tries, off the loop, with the ends that come meanwhile (``Notices``). A job
        # whose folder is gone has nothing to tell (its reader finds no job), and would
        # only hold the runner's exit.
        if job.notify_url and job.dir.is_dir():
            self.spawn(self.notices.send(job.notify_url, job.dir.name, state))

    def killed_queued(self, job: Job) -> None:
        """End a queued job whose kill was asked. The starts not written yet are written
        first: whoever sees the queued job's end (often after a job it waited behind)
        sees the running ones RUNNING."""
        for other in list(self.jobs.values()):
            with contextlib.suppress(OSError):
                self.write_start(other)
        self.finish(job, "KILLED", "killed before it started")

    # -- watching --------------------------------------------------------------------

    async def watch_kills(self) -> None:
        last_queued = 0.0
        while True:
            await asyncio.sleep(KILL_CHECK)
            now = time.time()
            for job in list(self.jobs.values()):
                if job.proc is None or job.proc.returncode is not None:
                    continue
                if job.killed_at is None and (job.dir / "kill").exists():
                    job.killed_at = now
                    terminate(job)
                elif job.killed_at is not None and now - job.killed_at > KILL_GRACE:
                    process_tree.signal_group(job.proc.pid, signal.SIGKILL)
            if now - last_queued >= QUEUED_KILL_CHECK:
                last_queued = now
                for job in [j for j in self.queue if (j.dir / "kill").exists()]:
                    self.queue.remove(job)
                    self.killed_queued(job)

    async def heartbeat(self) -> None:
        while True:
            for job in list(self.jobs.values()):
                with contextlib.suppress(OSError):
                    self.write_start(job)  # a reader that finds its beat finds it RUNNING
                    beat(job.dir)
            await asyncio.sleep(HEARTBEAT_EVERY)

    async def until_idle(self) -> None:
        while self.jobs or time.monotonic() - self.idle_since < IDLE_EXIT:
            await asyncio.sleep(1.0)

    async def folder_removed(self) -> None:
        """Returns once the jobs folder is gone."""
        while await asyncio.to_thread(self.jobs_dir.is_dir):
            await asyncio.sleep(FOLDER_CHECK)

    async def stop_all(self, failure: str | None = None, grace: float = KILL_GRACE) -> None:
        """The runner itself is stopping: asked to (SIGTERM), its jobs end KILLED, as a
        supervisor's did; because it failed (``failure``), they end FAILED with the reason.
        Their processes get ``grace`` seconds between SIGTERM and SIGKILL."""
        for job in list(self.jobs.values()):
            if job.proc is not None and job.proc.returncode is None:
                job.killed_at, job.stopped_because = time.time(), failure
                terminate(job)
        for job in list(self.queue):
            self.finish(job, "FAILED" if failure else "KILLED", failure or "the local job runner was stopped")
        self.queue.clear()
        deadline = time.monotonic() + grace
        while any(j.proc is not None for j in self.jobs.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for job in list(self.jobs.values()):
            if job.proc is not None and job.proc.returncode is None:
                process_tree.signal_group(job.proc.pid, signal.SIGKILL)
        while any(j.proc is not None for j in self.jobs.values()) and time.monotonic() < deadline + 5.0:
            await asyncio.sleep(0.1)  # their waiters end what is left and write the final states


class Handover(asyncio.Protocol):
    """One executor's connection, kept for many jobs: a request per line, and a reply per
    line in the same order; the lines that arrive together are answered in one write.
    Taking a job does not wait, so a runner closing its connections loses no job it took
    (docs/architecture.md, "The local job runner")."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.runner.clients.add(transport)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        if lines:
            self.transport.write(b"".join(self.runner.take(line) for line in lines))
        if len(self.buffer) > MAX_REQUEST:
            self.transport.write(b"error the request is too long\n")
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self.runner.clients.discard(self.transport)


def terminate(job: Job) -> None:
    """SIGTERM to every process of the job (its group), but bwrap's own: its end would
    SIGKILL the sandbox at once, where the job gets KILL_GRACE to stop cleanly."""
    assert job.proc is not None
    spare = job.proc.pid if job.request.get("sandbox") else None
    process_tree.signal_group(job.proc.pid, signal.SIGTERM, spare=spare)


def output_files(job_dir: Path) -> tuple[int, int]:
    """The job's stdout and stderr files, new and private."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    return os.open(job_dir / "stdout.log", flags, 0o600), os.open(job_dir / "stderr.log", flags, 0o600)


def take_lock(path: Path) -> IO[str] | None:
    """The runner's lock, held for its life; None if another runner holds it."""
    lock = open(path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


async def serve(jobs_dir: Path, job_umask: int) -> int:
    sock, lock_path, log_path = address(jobs_dir)
    lock = take_lock(lock_path)
    if lock is None:
        return 0  # another runner serves this jobs folder
    runner = Runner(jobs_dir, job_umask)
    sock.unlink(missing_ok=True)  # a dead runner's
    server = await asyncio.get_running_loop().create_unix_server(lambda: Handover(runner), path=str(sock))
    os.chmod(sock, 0o600)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    workers = [asyncio.create_task(c) for c in (runner.dispatch(), runner.watch_kills(), runner.heartbeat())]
    idle = asyncio.create_task(runner.until_idle())
    stop = asyncio.create_task(stopping.wait())
    removed = asyncio.create_task(runner.folder_removed())
    await asyncio.wait([idle, stop, removed, *workers], return_when=asyncio.FIRST_COMPLETED)
    failure = None
    for worker in workers:
        if worker.done():  # a loop of its own ended: a bug; its jobs fail with the reason
            exc = None if worker.cancelled() else worker.exception()
            if exc is not None:
                log.error("a loop of the job runner ended", exc_info=exc)
            failure = f"the local job runner failed: {type(exc).__name__}: {exc}"
    # Stop taking jobs, then let go of the lock, so a submitter that cannot connect now
    # starts another runner at once; slots are flocks, so the two never run too many.
    server.close()
    sock.unlink(missing_ok=True)
    for client in list(runner.clients):  # an executor's next hand-over finds the next runner
        client.close()
    if removed.done():  # nothing names that folder now: its lock and log go too
        for path in (lock_path, log_path):
            path.unlink(missing_ok=True)
    lock.close()
    if removed.done():
        # Nothing of its jobs can be recorded any more, nor read: they are stopped at once.
        log.warning("the jobs folder %s was removed: its jobs are stopped and the runner exits", jobs_dir)
        await runner.stop_all("the jobs folder was removed", grace=0.0)
    elif stopping.is_set() or failure:
        await runner.stop_all(failure)
    while runner.jobs:  # taken in the instant before the server closed
        await asyncio.sleep(0.1)
    for task in [*workers, idle, stop, removed]:
        task.cancel()
    if runner.tasks:  # notifications under way
        await asyncio.wait(list(runner.tasks), timeout=5)
    return 1 if failure else 0


def main(jobs_dir: Path) -> int:
    # Its starter passes PINGO_LOG_LEVEL and PINGO_LOG_FORMAT on, and no other setting.
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format, "job_runner")
    job_umask = os.umask(0o077)
    return asyncio.run(serve(jobs_dir, job_umask))


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
