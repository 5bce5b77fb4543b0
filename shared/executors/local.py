"""Local executor: each action is a subprocess, run by this host's long-lived job runner
(``local_runner``; docs/architecture.md, "The local job runner") whose job folder under
``jobs_dir`` is the job's record. Any process that sees the folder (the callback poller,
a kill request; on Kubernetes, other pods on the same volume) reads the status from it,
judges liveness by the heartbeat file the runner touches and asks for a kill with a
``kill`` file: no process id is used across processes. If no runner can be reached, the
job gets a detached supervisor process of its own (``local_job``), with the same folder
protocol.

The jobs folder and everything in it is private to Pingo's user (0700 folders, 0600
files). The notification URL, which holds the action's callback secret, is never written
there: the runner gets it over its private socket (a supervisor, over its stdin). With
users on, a job runs in a sandbox (``sandbox``) that hides all of that, the store and
other users' data from it: docs/users.md, "What a job can reach"."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO

from shared.executors import local_runner
from shared.executors.base import (
    FOLLOW_INTERVAL,
    LOG_CHUNK,
    JobFenced,
    JobRequest,
    JobState,
    JobStatus,
    LogsGone,
    LogStream,
)
from shared.executors.log_tail import LineTail
from shared.executors.runner_link import RunnerLink
from shared.executors.sandbox import Sandbox
from shared.hadoop import sqoop
from shared.hadoop.jvm import JPMS_OPTS
from shared.hadoop.mapreduce import job_properties
from shared.storage.names import path_name
from shared.workflow_spec import ActionSpec, ActionType, is_streaming

log = logging.getLogger(__name__)
# The supervisor is started as ``python -m shared.executors.local_job`` from here.
PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
# A supervisor that has not touched its heartbeat for this long is gone (it beats every second).
HEARTBEAT_TIMEOUT = 15.0
# How long a submission tries to reach this host's job runner (starting one) before the
# job gets a supervisor process of its own, and how long a runner just started is given
# before another is started (the first may have found one stopping).
RUNNER_WAIT = 10.0
RUNNER_RESTART = 1.0


def job_name(external_id: str) -> str:
    """The job's folder name: ids differing in characters a name cannot hold ("a b",
    "a_b"), or beyond the readable prefix, never share a job."""
    return path_name(external_id)


def _legacy_job_name(external_id: str) -> str:
    """The name of job folders made before names carried a digest; not injective."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in external_id)


def _open_private(path: Path) -> int:
    """A new file mode 0600 (whatever the umask), open for writing."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _age(path: Path) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


# The variables of Pingo's environment a job gets (docs/planning.md, "The job's environment"):
# what finds programs and speaks the host's language and time, and where Java, Spark and
# Hadoop are. Nothing else of the server's: its environment holds its own settings and
# whatever its operator exported (PINGO_TOKEN, cloud keys). A name ending in * is a prefix.
JOB_ENV_ALLOWED = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR",
    "JAVA_HOME", "SPARK_HOME", "SPARK_CONF_DIR", "SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME",
    "HADOOP_HOME", "HADOOP_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
)  # fmt: skip


@functools.lru_cache(maxsize=32)
def _allow_list(allowed: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """``allowed`` as its exact names and its prefixes: tested in C for each of the server's
    variables (a generator over the list per variable cost 80 µs a job)."""
    return frozenset(a for a in allowed if not a.endswith("*")), tuple(a[:-1] for a in allowed if a.endswith("*"))


def job_environment(
    configuration: dict[str, str], action_id: str, shell: bool, passed: tuple[str, ...] = (), pingo_code: bool = False
) -> dict[str, str]:
    """The action's environment, built, never inherited: the allow-list (``JOB_ENV_ALLOWED``
    and ``passed``, PINGO_JOB_ENV_PASS) of this process's variables, the action id and, for
    SHELL, its configuration. ``pingo_code``: the job is a program of Pingo's (the MapReduce
    engines), which imports Pingo's own code."""
    names, prefixes = _allow_list((*JOB_ENV_ALLOWED, *passed))
    # PINGO_ variables are Pingo's own, whatever the allow-list says; the values of the
    # passing ones alone are decoded.
    env = {
        k: os.environ[k] for k in os.environ if (k in names or k.startswith(prefixes)) and not k.startswith("PINGO_")
    }
    env.setdefault("PATH", os.defpath)
    if pingo_code:
        env["PYTHONPATH"] = PROJECT_ROOT
    env["PINGO_ACTION_ID"] = action_id
    if shell:
        env.update(configuration)
    # A PySpark application's driver and workers run on this Python (it has pyspark).
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def _without_settings() -> dict[str, str]:
    """The environment of Pingo's own helper processes (the job runner, a supervisor): this
    process's, less every PINGO_ variable (settings, credentials such as PINGO_TOKEN) but the
    log settings, so that the runner's lines look like its starter's (docs/operations.md).
    Jobs never inherit it: theirs is built by ``job_environment``."""
    keep = {"PINGO_LOG_LEVEL", "PINGO_LOG_FORMAT"}
    return {k: v for k, v in os.environ.items() if not k.startswith("PINGO_") or k in keep}


# spark-submit's own log lines, kept out of a job's stderr where its own are read.
SPARK_QUIET = ("--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN")
TEXT_FORMATS = ("org.apache.hadoop.mapred.TextInputFormat", "org.apache.hadoop.mapred.TextOutputFormat")


def map_reduce_argv(job: JobRequest) -> list[str]:
    """A MAP_REDUCE job, run by a program of the emulator's (docs/planning.md, "Fields of one
    type"): a streaming job by its streaming engine, with Hadoop streaming's semantics; a
    Java job by Hadoop's own LocalJobRunner (the Hadoop jars Spark bundles), its classes from
    the action folder's jars. Every argument but the last is an input (additionalInput
    values, then the parents' outputs); the last is the output."""
    if not is_streaming(job.mapper):
        conf = job_properties(job)
        argv = [spark_submit() or "spark-submit", "--master", "local[1]", *SPARK_QUIET]
        if job.action_folder:
            argv += ["--driver-class-path", f"{job.action_folder}/*"]
        return [
            *argv,
            _program("hadoop_emulator.mapreduce"),
            *(a for k, v in conf.items() for a in ("--conf", f"{k}={v}")),
        ]
    *inputs, output = job.arguments
    argv = [sys.executable, "-m", "hadoop_emulator.streaming", "--mapper", json.dumps(job.mapper)]
    if job.reducer is not None:
        argv += ["--reducer", json.dumps(job.reducer)]
    for path in inputs:
        argv += ["--input", path]
    argv += ["--output", output]
    for k, v in job.configuration.items():
        argv += ["--conf", f"{k}={v}"]
    if job.action_folder:
        argv += ["--files", job.action_folder]
    return argv


def _program(module: str) -> str:
    """The file of a program Pingo runs (never imports)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"{module} is not installed")
    return spec.origin


def _spark_missing() -> str | None:
    """What this machine lacks to run Spark (and so Java MapReduce), if anything."""
    if spark_submit() is None:
        return "Spark on this machine: pip install 'pingo[spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Java 17 or newer on this machine (java not found)"
    return None


def spark_submit() -> str | None:
    """The spark-submit of this Python's pyspark (the ``spark`` extra), else one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    return str(beside) if beside.is_file() else shutil.which("spark-submit")


def spark_argv(job: JobRequest, master: str) -> list[str]:
    """``spark-submit`` in local mode, with the argument contract after the application."""
    argv = [spark_submit() or "spark-submit", "--master", master, "--name", job.name]
    for k, v in job.configuration.items():
        argv += ["--conf", f"{k}={v}"]
    if job.main_class:
        argv += ["--class", job.main_class]
    return [*argv, *job.spark_opts, f"{job.action_folder}/{job.application}", *job.arguments]


def sqoop_argv(job: JobRequest, classpath: str, work: Path) -> list[str]:
    """``sqoop import`` in a JVM of its own, with Hadoop's LocalJobRunner on the local file
    system (docs/planning.md, "SQOOP actions"), run by ``hadoop_emulator.sqoop``. Sqoop
    writes and compiles the table's record class under ``work`` (the job's folder); the map
    tasks load it from ``work/classes``, which is on the class path (it must exist before
    the JVM starts)."""
    classes = str(work / "classes")
    local = ["-D", "mapreduce.framework.name=local", "-fs", "file:///"]
    jvm = [
        "java", *JPMS_OPTS, "-Xmx512m", "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join([classes, classpath]),
        sqoop.MAIN_CLASS, "import", *local, *sqoop.generic_options(job.configuration),
        *sqoop.import_arguments(job.sqoop, job.arguments[-1]), "--outdir", str(work / "src"), "--bindir", classes,
    ]  # fmt: skip
    # Run by the emulator's Sqoop program, which removes the checksum side files Hadoop's
    # local file system writes beside the output once the import succeeded.
    return [sys.executable, _program("hadoop_emulator.sqoop"), job.arguments[-1], "--", *jvm]


OFFLINE_SQOOP = (
    "a SQOOP action reaches its database over the network, and the sandbox of a user's local job has none "
    '(docs/users.md, "What a job can reach"): the operator gives it the machine\'s with PINGO_JOB_NETWORK=true, '
    "where the store and the broker require credentials; or run it on the oozie executor"
)


def _sqoop_missing(classpath: str | None) -> str | None:
    """What this machine lacks to run Sqoop, if anything."""
    if not classpath:
        return ("Sqoop's jars: set PINGO_SQOOP_CLASSPATH (`pingo sqoop-classpath` resolves and prints it), "
                "or run it on a cluster: the oozie executor")  # fmt: skip
    if shutil.which("javac") is None:
        return "a Java 17 JDK on this machine (Sqoop compiles each table's record class: javac not found)"
    if importlib.util.find_spec("hadoop_emulator") is None:
        return "the hadoop_emulator package of Pingo's distribution (its program runs Sqoop's JVM)"
    return None


def _fence_at(job_dir: Path) -> bool:
    """Make the fence in place of the job folder ``job_dir`` (a plain file, made as
    exclusively as the folder is: ``LocalExecutor._fence``). True if the job's folder was
    made first (just now), False if it is fenced, now or before."""
    try:
        os.close(os.open(job_dir, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return job_dir.is_dir()
    return False


class LocalExecutor:
    name = "local"
    supports = frozenset(ActionType)

    def __init__(
        self,
        jobs_dir: Path,
        slots: int = 4,
        spark_master: str | None = None,
        sandbox: Sandbox | None = None,
        env_pass: list[str] | None = None,
        sqoop_classpath: str | None = None,
    ) -> None:
        self.jobs_dir = jobs_dir
        self.sqoop_classpath = sqoop_classpath
        self.sandbox = sandbox  # the jobs of users run in it (docs/users.md, "What a job can reach")
        self.env_pass = tuple(env_pass or ())
        self.slots = slots
        self.spark_master = spark_master or "local[2]"
        self.jobs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self.jobs_dir.chmod(0o700)  # a folder made by an earlier version was open to all
        except OSError as exc:
            log.warning("could not make %s private (mode 0700): %s", self.jobs_dir, exc)
        self._reapers: set[asyncio.Task] = set()
        self._runner: tuple[Path, Path, Path] | None = None  # its socket, lock and log, found once
        self._link: RunnerLink | None = None  # to the runner, kept for many jobs
        self._linking: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def _runner_address(self) -> tuple[Path, Path, Path]:
        if self._runner is None:
            self._runner = await asyncio.to_thread(local_runner.address, self.jobs_dir)
        return self._runner

    def refusals(self, action: ActionSpec, owner: str | None = None) -> list[tuple[str, str]]:
        out = []
        if action.type == ActionType.MAP_REDUCE and not is_streaming(action.mapper):
            # Java classes run on Hadoop's LocalJobRunner, from the Hadoop jars Spark bundles.
            if spark := _spark_missing():
                out.append(("mapper", f"a Java MapReduce job needs Hadoop's MapReduce runtime, which comes with "
                                      f"Spark: {spark} (or run it on a cluster: the oozie executor)"))  # fmt: skip
        elif action.type == ActionType.MAP_REDUCE:
            for field in ("inputFormat", "outputFormat"):
                if getattr(action, field) not in (None, *TEXT_FORMATS):
                    out.append((field, f"a streaming job reads and writes text here ({TEXT_FORMATS[0]}, "
                                       f"{TEXT_FORMATS[1]}); other formats need Java classes"))  # fmt: skip
        elif action.type == ActionType.SPARK and (spark := _spark_missing()):
            out.append(("type", f"SPARK actions need {spark}"))
        elif action.type == ActionType.SQOOP and (missing := _sqoop_missing(self.sqoop_classpath)):
            out.append(("type", f"SQOOP actions need {missing}"))
        elif action.type == ActionType.SQOOP and self._sandboxed_offline(owner):
            out.append(("connect", OFFLINE_SQOOP))
        return out

    def _sandboxed_offline(self, owner: str | None) -> bool:
        """Whether ``owner``'s jobs run in a sandbox with only a loopback of their own."""
        return self.sandbox is not None and self.sandbox.applies(owner) and not self.sandbox.network

    def argv(self, job: JobRequest, job_dir: Path) -> list[str]:
        if job.type == ActionType.SQOOP:
            return sqoop_argv(job, self.sqoop_classpath or "", job_dir)
        if job.type == ActionType.COMMAND_LINE:
            props = [f"-D{k}={v}" for k, v in job.configuration.items()]
            return ["java", *props, "-cp", f"{job.action_folder}/*", job.main_class or "", *job.arguments]
        if job.type == ActionType.MAP_REDUCE:
            return map_reduce_argv(job)
        if job.type == ActionType.SPARK:
            return spark_argv(job, self.spark_master)
        return [*(job.command or []), *job.arguments]

    @staticmethod
    def _secrets(job: JobRequest) -> dict[str, str]:
        """The secret values of a SHELL job's environment: handed to whoever starts the job
        in memory, with the notification URL, never written in its folder."""
        if job.type != ActionType.SHELL:
            return {}
        return {k: job.configuration[k] for k in job.secret_keys if k in job.configuration}

    def _make(self, job: JobRequest, job_dir: Path, prepare: Callable[[], None] | None) -> bytes | None:
        """The caller's ``prepare``, then the job's folder, in one worker thread
        (docs/performance.md, "A chain's hop"): the job's request, encoded, for the
        runner; None if the job exists already."""
        if prepare is not None:
            prepare()
        if (request := self._make_folder(job, job_dir)) is not None:
            return json.dumps(request).encode()
        if job_dir.is_dir():
            return None
        raise JobFenced(f"{job.external_id} was taken back from its submitter (judged lost): no job is started")

    @staticmethod
    def _write_request_file(job_dir: Path, request: bytes) -> None:
        """The job's ``request.json``: read by a supervisor of its own only (the runner
        gets the request in its hand-over)."""
        with os.fdopen(_open_private(job_dir / "request.json"), "wb") as f:
            f.write(request)

    def _make_folder(self, job: JobRequest, job_dir: Path) -> dict[str, Any] | None:
        """Create the job's folder; what its runner or supervisor is to run (its request),
        or None if the job exists already."""
        try:
            job_dir.mkdir(mode=0o700)
        except FileExistsError:
            return None
        env = job_environment(
            job.configuration,
            job.action_id,
            job.type == ActionType.SHELL,
            self.env_pass,
            pingo_code=job.type == ActionType.MAP_REDUCE,
        )
        for key in self._secrets(job):
            env.pop(key, None)
        argv = self.argv(job, job_dir)
        scratch: tuple[Path, ...] = ()
        # Pingo's own program runs the job (the MapReduce and Sqoop engines): its Python
        # environment and package are shown to a sandboxed job wherever they are installed.
        program: tuple[Path, ...] = ()
        if job.type in (ActionType.MAP_REDUCE, ActionType.SQOOP):
            program = (Path(sys.prefix), Path(PROJECT_ROOT) / "hadoop_emulator")
        if job.type == ActionType.SQOOP:
            # Sqoop writes its record class's source and class there (classes is on the class
            # path: made before the JVM starts); a sandbox shows the job these two alone.
            scratch = (job_dir / "src", job_dir / "classes")
            for folder in scratch:
                folder.mkdir(mode=0o700)
        # A Spark job writes where it runs (spark-warehouse, metastore_db): not into its
        # action folder, whose files are part of its lineage hash.
        cwd = (
            str(job_dir)
            if job.type in (ActionType.SPARK, ActionType.MAP_REDUCE, ActionType.SQOOP) or not job.action_folder
            else job.action_folder
        )
        sandboxed = None
        if self.sandbox is not None and self.sandbox.applies(job.owner) and job.arguments:
            # The last argument is the attempt's output (docs/planning.md, "The argument contract").
            try:
                argv, sandboxed = self.sandbox.wrap(
                    argv, cwd, job_dir, job.inputs, job.action_folder, job.arguments[-1], scratch, program
                )
            except BaseException:
                shutil.rmtree(job_dir, ignore_errors=True)  # not a job yet: the submit's retry makes it again
                raise
            cwd = str(job_dir)  # bwrap's own; the job's is inside the sandbox (--chdir)
        request = {
            "argv": argv,
            "cwd": cwd,
            "sandbox": sandboxed,
            "env": env,
            "slots_dir": str(self.jobs_dir / ".slots"),
            "slots": self.slots,
            "external_id": job.external_id,
        }  # no notify_url (it holds the callback secret) nor secret values: they go over the socket or stdin
        return request

    async def submit(self, job: JobRequest, prepare: Callable[[], None] | None = None) -> str:
        job_id = job_name(job.external_id)
        job_dir = self.jobs_dir / job_id
        request = await asyncio.to_thread(self._make, job, job_dir, prepare)
        if request is None:
            return job_id  # submitted before (a retried submit): the same job
        secrets = self._secrets(job)
        if await self._hand_to_runner(job_id, job.notify_url, secrets, request):
            return job_id
        log.warning("the local job runner could not be reached; %s gets a supervisor of its own", job_id)
        await asyncio.to_thread(self._write_request_file, job_dir, request)
        await self._supervise(job_id, job_dir, job.notify_url, secrets)
        return job_id

    async def _hand_to_runner(self, job_id: str, notify_url: str, secrets: dict[str, str], request: bytes) -> bool:
        """Give the job to this host's runner, starting one if none answers. Its request
        (encoded in ``_make``'s worker thread) rides in the hand-over: no ``request.json``,
        a file less per job, which nothing after the hand-over would read
        (docs/performance.md, "The job runner")."""
        head = json.dumps({"job": job_id, "notify": notify_url, "secrets": secrets}).encode()
        message = head[:-1] + b', "request": ' + request + b"}\n"
        deadline = time.monotonic() + RUNNER_WAIT
        started_at = 0.0
        while time.monotonic() < deadline:
            try:
                link = await self._runner_link()
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() - started_at > RUNNER_RESTART:  # none, or one that is stopping
                    await self._start_runner()
                    started_at = time.monotonic()
                await asyncio.sleep(0.02)
                continue
            try:
                reply = await asyncio.wait_for(link.ask(message), RUNNER_WAIT)
            except (ConnectionError, TimeoutError):
                link.close()
                continue  # it stopped as we spoke: the job is not known to it, so ask again
            if reply.startswith(b"ok"):
                return True
            log.error("the local job runner refused %s: %s", job_id, reply.decode(errors="replace").strip())
            return False
        return False

    async def _runner_link(self) -> RunnerLink:
        """The connection to this host's runner, opened if there is none (or it closed)."""
        loop = asyncio.get_running_loop()
        if self._linking is None or self._linking[0] is not loop:
            self._linking, self._link = (loop, asyncio.Lock()), None  # a link is its loop's
        async with self._linking[1]:  # one opens it; those asking meanwhile use it
            if self._link is None or self._link.closed:
                sock, _, _ = await self._runner_address()
                self._link = await RunnerLink.open(sock)
            return self._link

    async def _start_runner(self) -> None:
        _, _, log_path = await self._runner_address()
        err = await asyncio.to_thread(os.open, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shared.executors.local_runner", str(self.jobs_dir),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=err,
                start_new_session=True, cwd=PROJECT_ROOT, env=_without_settings(),
            )  # fmt: skip
        finally:
            os.close(err)
        self._reap(proc)

    def _reap(self, proc: asyncio.subprocess.Process) -> None:
        task = asyncio.create_task(proc.wait())  # reaps it, so it leaves no zombie
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)

    async def _supervise(self, job_id: str, job_dir: Path, notify_url: str, secrets: dict[str, str]) -> None:
        """A supervisor process of its own for one job: the fallback when no runner answers."""
        err = await asyncio.to_thread(_open_private, job_dir / "supervisor.log")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shared.executors.local_job", str(job_dir),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=err,
                start_new_session=True, cwd=PROJECT_ROOT, env=_without_settings(),
            )  # fmt: skip
        finally:
            os.close(err)
        assert proc.stdin is not None
        try:
            # The URL, then the secret values (one JSON line): local_job.read_handover.
            proc.stdin.write(notify_url.encode("utf-8", "replace") + b"\n" + json.dumps(secrets).encode() + b"\n")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the supervisor is gone already; its job reads as failed when its heartbeat is missed
        finally:
            proc.stdin.close()
        self._reap(proc)

    def job_id(self, external_id: str) -> str | None:
        return job_name(external_id)  # its folder's: known before the folder is made

    async def find(self, external_id: str) -> str | None:
        return await asyncio.to_thread(self._find, external_id)

    async def fence(self, external_id: str) -> str | None:
        return await asyncio.to_thread(self._fence, external_id)

    def _fence(self, external_id: str) -> str | None:
        """A job is its folder, made by one exclusive ``mkdir``: a plain file made in its
        place, as exclusively, is the fence. Whichever is made first wins, so a submitter
        stalled past its lease either made its job (found here, and recorded) or finds
        the fence and starts nothing."""
        if (found := self._find(external_id)) is not None:
            return found
        path = self.jobs_dir / job_name(external_id)
        return path.name if _fence_at(path) else None

    def _find(self, external_id: str) -> str | None:
        job_id = job_name(external_id)
        if (self.jobs_dir / job_id).is_dir():
            return job_id
        # A job submitted by an earlier version: its name may be another id's, so check whose it is.
        legacy = _legacy_job_name(external_id)
        try:
            request = json.loads((self.jobs_dir / legacy / "request.json").read_text())
        except (OSError, ValueError):
            return None
        return legacy if request.get("external_id") == external_id else None

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
                        error=f"the local job runner stopped (no heartbeat for {age:.0f}s)",
                    )  # fmt: skip
        return JobStatus(
            state=state, error=st.get("error"), started_at=st.get("started_at"), ended_at=st.get("ended_at")
        )

    async def kill(self, job_id: str) -> None:
        """Ask the supervisor to stop the job; it watches for this file while the job waits
        or runs. A job not made yet (its id was recorded with the claim, before its submit)
        is fenced instead, so it never starts (``_fence``)."""
        await asyncio.to_thread(self._kill, self.jobs_dir / job_id)

    def _kill(self, job_dir: Path) -> None:
        if job_dir.is_dir() or _fence_at(job_dir):
            (job_dir / "kill").touch(0o600)

    async def logs(
        self, job_id: str, stream: LogStream, tail: int | None = None, follow: bool = False
    ) -> AsyncIterator[bytes]:
        """The job folder's ``stdout.log`` or ``stderr.log``, read from the shared jobs
        folder (so any process that sees it can serve it); gone with the folder."""
        job_dir = self.jobs_dir / job_id
        if not await asyncio.to_thread(job_dir.is_dir):
            raise LogsGone(f"the logs of job {job_id} were removed (job retention)")
        return self._read_log(job_id, job_dir / f"{stream}.log", tail, follow)

    async def _ended(self, job_id: str) -> bool:
        return (await self.status(job_id)).state not in (JobState.PREP, JobState.RUNNING)

    async def _read_log(self, job_id: str, path: Path, tail: int | None, follow: bool) -> AsyncIterator[bytes]:
        f: BinaryIO | None = None
        while f is None:  # the file is made when the job starts; a waiting job has none yet
            try:
                f = await asyncio.to_thread(path.open, "rb")
            except FileNotFoundError:
                if not follow or await self._ended(job_id):
                    return
                await asyncio.sleep(FOLLOW_INTERVAL)
        try:
            if tail is not None:
                # The last lines of what is written now; a followed log goes on from there.
                size = await asyncio.to_thread(lambda: os.fstat(f.fileno()).st_size)
                lines, left = LineTail(tail), size
                while left > 0 and (chunk := await asyncio.to_thread(f.read, min(LOG_CHUNK, left))):
                    lines.feed(chunk)
                    left -= len(chunk)
                if text := lines.text():
                    yield text
            while True:
                # Whether it had ended is asked before reading: what it wrote last is then read.
                ended = follow and await self._ended(job_id)
                chunk = await asyncio.to_thread(f.read, LOG_CHUNK)
                if chunk:
                    yield chunk
                elif not follow or ended:
                    return
                else:
                    await asyncio.sleep(FOLLOW_INTERVAL)
        finally:
            await asyncio.to_thread(f.close)

    async def prune(self, ended_before: float, keep: set[str]) -> int:
        return await asyncio.to_thread(self._prune, ended_before, keep)

    def _prune(self, ended_before: float, keep: set[str]) -> int:
        removed = 0
        for job_dir in self.jobs_dir.iterdir():
            if job_dir.name.startswith(".") or job_dir.name in keep:
                continue  # the runner's slots and socket folders, and jobs of live attempts
            if not job_dir.is_dir():  # a fence (``_fence``): kept as long as a job would be
                if (fenced_at := _mtime(job_dir)) is not None and fenced_at < ended_before:
                    job_dir.unlink(missing_ok=True)
                    removed += 1
                continue
            status = self._status(job_dir.name)
            if status.state in (JobState.PREP, JobState.RUNNING, JobState.UNKNOWN):
                continue  # waiting or running: never pruned
            # A job whose supervisor died has no end time: it ended at its last heartbeat.
            ended_at = status.ended_at or _mtime(job_dir / "heartbeat") or _mtime(job_dir)
            if ended_at is not None and ended_at < ended_before:
                shutil.rmtree(job_dir, ignore_errors=True)
                removed += 1
        return removed

    async def close(self) -> None:
        # Jobs outlive this process on purpose; just stop reaping.
        for t in list(self._reapers):
            t.cancel()
        if self._link is not None:
            self._link.close()
