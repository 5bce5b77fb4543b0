"""Runs one java or shell action as a local subprocess, in a fresh working directory
outside the HDFS namespace, the way a YARN launcher container would:

- every ``<file>`` (``path#name``; relative paths are under the app dir) is copied into
  the working directory and made executable; every ``<archive>`` is unpacked there;
- java: ``java -cp <jars> [java-opts] -Doozie.action.conf.xml=... <main-class> <arg>...``
  where the jars are ``<app>/lib/*.jar``, the ``*.jar`` of every ``oozie.libpath`` entry
  and shipped ``.jar`` files;
- shell: ``<exec> <argument>...`` (``./<exec>`` if a shipped file has that name, else
  from PATH), with the ``env-var`` entries added;
- map-reduce with ``<streaming>``: the streaming engine (:mod:`.streaming`) on the inputs and
  output of the job properties (``mapred.input.dir``, ``mapred.output.dir``), tasks in the
  working directory; a Java MapReduce job (no ``<streaming>``) by Hadoop's LocalJobRunner
  (:mod:`.mapreduce`, with pyspark's Hadoop jars), its classes from the java action's jars;
- spark: ``spark-submit`` in local mode on the namespace (:meth:`ActionRunner._spark_argv`);
- sqoop: Apache Sqoop's own ``Sqoop`` class with Hadoop's LocalJobRunner on the namespace,
  its jars (the sharelib's stand-in) from ``SQOOP_CLASSPATH`` (:meth:`ActionRunner._sqoop_argv`);
- environment: the emulator's less its ``PINGO_`` variables (a container does not get its
  submitter's settings or credentials, which an emulator started beside Pingo holds), plus
  ``PINGO_EMULATOR_HDFS_ROOT``, ``OOZIE_JOB_ID`` and ``OOZIE_ACTION_CONF_XML`` (the action
  configuration written as ``action.xml``), and ``USER`` and ``LOGNAME`` the job's user, as
  YARN sets them in a container (a job writing over WebHDFS as ``$USER`` writes as its owner);
- stdout and stderr go to files ``stdout`` and ``stderr`` in the working directory.

Always argv lists, never a shell. The process gets its own process group so a kill
reaches its children too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hadoop_emulator import mapreduce, sqoop
from hadoop_emulator.hadoop_conf import to_xml
from hadoop_emulator.hdfs import HdfsError, Namespace
from hadoop_emulator.permissions import ALL, WRITE, Checker
from hadoop_emulator.streaming import split_args
from hadoop_emulator.workflow_xml import ActionSpec

KILL_GRACE = 5.0
# The module openings Hadoop's launch scripts give Java 17 (hadoop-functions.sh), which the
# LocalJobRunner needs: the list of shared/hadoop/jvm.py (the emulator imports nothing of Pingo's).
JPMS_OPTS = ["-XX:+IgnoreUnrecognizedVMOptions"] + [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.io", "java.lang", "java.lang.reflect", "java.math", "java.net", "java.text", "java.util",
                    "java.util.concurrent", "java.util.zip", "sun.security.util", "sun.security.x509")
]  # fmt: skip
MAX_OUTPUT = 2048


@dataclass
class Outcome:
    exit_code: int | None = None  # None: the launcher failed before or instead of the program
    error_code: str | None = None
    error_message: str | None = None
    data: str | None = None
    started: bool = False  # whether a process was actually started

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.error_code is None


_SPARK_OPTION = re.compile(r"\s*--[a-zA-Z0-9.]+[\-a-zA-Z0-9.]*=?")


def split_spark_opts(opts: str) -> list[str]:
    """``<spark-opts>`` as Oozie's SparkMain splits it: at each ``--option`` (an ``=`` right
    after it is dropped); the text between two options is one value, kept whole (spaces
    included), unquoted when entirely in double quotes. Text before the first option is dropped."""
    out: list[str] = []
    start = 0
    for m in _SPARK_OPTION.finditer(opts):
        if start > 0 and (value := opts[start : m.start()].strip()):
            out.append(_unquote(value))
        out.append(m.group(0).strip().replace("=", ""))
        start = m.end()
    if value := opts[start:].strip():
        out.append(_unquote(value))
    return out


def _unquote(value: str) -> str:
    at_ends = re.fullmatch(r'([a-zA-Z0-9.]+=)?".+"', value, re.S)
    in_between = re.fullmatch(r'([a-zA-Z0-9.]+=)?".*".*"', value, re.S)
    return value.replace('"', "") if at_ends and not in_between else value


def _java(env: dict[str, str]) -> str:
    """$JAVA_HOME/bin/java, else java on PATH (as a YARN container finds it)."""
    java_home = env.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else None
    if not java or not os.access(java, os.X_OK):
        java = shutil.which("java", path=env.get("PATH"))
    if java is None:
        raise OSError('Cannot run program "java": error=2, No such file or directory')
    return java


def _spark_submit(env: dict[str, str]) -> str | None:
    """spark-submit from $SPARK_HOME/bin, beside this Python (pyspark's), or on PATH."""
    bins = [os.path.join(env["SPARK_HOME"], "bin")] if env.get("SPARK_HOME") else []
    return shutil.which(
        "spark-submit", path=os.pathsep.join([*bins, os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    )


def hdfs_ref(path: str, app_dir: str) -> str:
    """A ``<file>``/``<archive>``/libpath reference as an absolute HDFS path or URI."""
    if "://" in path or path.startswith("/"):
        return path
    return f"{app_dir.rstrip('/')}/{path}"


class ActionRunner:
    def __init__(
        self,
        spec: ActionSpec,
        *,
        namespace: Namespace,
        workdir: Path,
        app_dir: str,
        libpaths: list[str],
        job_id: str,
        action_id: str,
        action_conf: dict[str, str],
        checker: Checker | None = None,
    ) -> None:
        self.spec = spec
        self.ns = namespace
        self.workdir = workdir
        self.app_dir = app_dir
        self.libpaths = libpaths
        self.job_id = job_id
        self.action_id = action_id
        self.action_conf = action_conf
        self.checker = checker
        self.proc: asyncio.subprocess.Process | None = None
        self.killed = False

    # -- preparation ------------------------------------------------------------------
    def _prepare(self, user: str) -> None:
        """``<prepare>``: delete (recursively, a missing path is fine) and mkdir, in order,
        as the job's user."""
        caller = self.checker.caller(user) if self.checker else None
        for kind, path in self.spec.prepare:
            if self.checker and caller:
                norm = self.ns.normalize(path)
                if kind == "delete":
                    self.checker.check(caller, norm, parent=WRITE, sub=ALL)
                elif self.ns.exists(norm):
                    self.checker.check(caller, norm)
                else:
                    self.checker.check(caller, norm, ancestor=WRITE)
            if kind == "delete":
                self.ns.delete(path, recursive=True)
            else:
                self.ns.mkdirs(path, user)

    def _claim(self, user: str, since: float) -> None:
        """What the job wrote is its user's: the process writes to disk, not through the
        NameNode, so the paths among its arguments (a MapReduce job's output) are given
        their owner afterwards."""
        paths = [*self.spec.args, *([self._mr_output()] if self.spec.type == "map-reduce" else [])]
        for arg in paths:
            if arg.startswith("/") or arg.startswith("hdfs://"):
                self.ns.claim(arg, user, since)

    def _conf(self, *names: str) -> str:
        return next((self.spec.configuration[n] for n in names if self.spec.configuration.get(n)), "")

    def _mr_inputs(self) -> list[str]:
        raw = self._conf("mapreduce.input.fileinputformat.inputdir", "mapred.input.dir")
        return [p.strip() for p in raw.split(",") if p.strip()]

    def _mr_output(self) -> str:
        return self._conf("mapreduce.output.fileoutputformat.outputdir", "mapred.output.dir")

    def _check_output(self, user: str) -> None:
        """A MapReduce job's output folder is made through the NameNode (FileOutputFormat):
        as its user, and refused where that user may not write."""
        if self.checker is None or self.spec.type != "map-reduce" or not self._mr_output():
            return
        caller = self.checker.caller(user)
        if caller is not None:
            self.checker.check(caller, self.ns.normalize(self._mr_output()), ancestor=WRITE)

    def _localize(self) -> list[Path]:
        """Copy files and unpack archives into the working directory; the shipped jars."""
        jars = []
        for entry, archive in [(f, False) for f in self.spec.files] + [(a, True) for a in self.spec.archives]:
            path, _, name = entry.partition("#")
            ref = hdfs_ref(path, self.app_dir)
            try:
                local = self.ns.local(ref)
            except HdfsError as exc:
                raise FileNotFoundError(exc.message) from None
            if not local.exists():
                raise FileNotFoundError(f"File does not exist: {ref}")
            target = self.workdir / (name or local.name)
            if archive:
                fmt = "zip" if local.suffix in (".jar", ".zip") else None
                shutil.unpack_archive(local, target, fmt)
            elif local.is_dir():
                shutil.copytree(local, target)
            else:
                shutil.copyfile(local, target)
                target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                if target.suffix == ".jar":
                    jars.append(target)
        return jars

    def _classpath(self, shipped: list[Path]) -> list[str]:
        entries = [str(self.workdir)]
        dirs = [hdfs_ref("lib", self.app_dir), *self.libpaths]
        for d in dirs:
            try:
                local = self.ns.local(d)
            except HdfsError:
                continue
            if local.is_dir():
                entries.extend(str(j) for j in sorted(local.glob("*.jar")))
            elif local.suffix == ".jar" and local.is_file():
                entries.append(str(local))
        entries.extend(str(j) for j in shipped)
        return entries

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
        env["PINGO_EMULATOR_HDFS_ROOT"] = str(self.ns.root)
        env["OOZIE_JOB_ID"] = self.job_id
        env["OOZIE_ACTION_CONF_XML"] = str(self.workdir / "action.xml")
        env["PWD"] = str(self.workdir)
        env["USER"] = env["LOGNAME"] = self.action_conf.get("user.name", "dr.who")
        entries = {"shell": self.spec.env_vars, "map-reduce": self.spec.stream_env}.get(self.spec.type, [])
        for entry in entries:
            key, _, value = entry.partition("=")
            if key:
                env[key] = value
        return env

    def _namespace_fs(self) -> dict[str, str]:
        """Hadoop file system settings under which ``/a/b`` and ``hdfs://…/a/b`` are the
        namespace's ``<root>/a/b``: a view file system whose every path falls back to the root."""
        return {
            "fs.defaultFS": "viewfs://emulator/",
            "fs.viewfs.mounttable.emulator.linkFallback": self.ns.root.as_uri(),
            "fs.hdfs.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystem",
        }

    def _java_map_reduce_argv(self, env: dict[str, str], shipped: list[Path]) -> list[str]:
        """A map-reduce action without ``<streaming>``: Hadoop's LocalJobRunner runs its
        classes (:mod:`hadoop_emulator.mapreduce`), the jars of the app's lib folder, of
        ``oozie.libpath`` and shipped ones on its class path, its paths in the namespace."""
        submit = _spark_submit(env)
        if submit is None:
            raise OSError(
                "no Java MapReduce runtime: the emulator runs Java map-reduce actions with the Hadoop jars of "
                "pyspark (pip install 'pingo[spark]')"
            )
        conf = {**self.spec.configuration, **self._namespace_fs()}
        return mapreduce.argv(submit, self._classpath(shipped), conf)

    def _streaming_argv(self) -> list[str]:
        """A map-reduce action with ``<streaming>``, run by the emulator's streaming engine
        (:mod:`hadoop_emulator.streaming`) on the namespace's files."""
        spec = self.spec
        assert spec.mapper is not None
        argv = [sys.executable, "-m", "hadoop_emulator.streaming", "--mapper", json.dumps(split_args(spec.mapper))]
        if spec.reducer:
            argv += ["--reducer", json.dumps(split_args(spec.reducer))]
        for path in self._mr_inputs():
            argv += ["--input", str(self.ns.local(path))]
        argv += ["--output", str(self.ns.local(self._mr_output())), "--workdir", str(self.workdir)]
        for k, v in spec.configuration.items():
            argv += ["--conf", f"{k}={v}"]
        return argv

    def _spark_argv(self, env: dict[str, str]) -> list[str]:
        """A spark action, by ``spark-submit`` in local mode (the emulator has no YARN: a
        ``yarn`` master runs as ``local[2]``). The Hadoop file system Spark sees is the
        namespace: ``/a/b`` and ``hdfs://.../a/b`` are ``<root>/a/b`` (a view file system
        whose every path falls back to the root folder)."""
        spec = self.spec
        submit = _spark_submit(env)
        if submit is None:
            raise OSError('Cannot run program "spark-submit": error=2, No such file or directory')
        master = spec.master or "local[2]"
        if master.startswith("yarn"):
            master = "local[2]"
        argv = [submit, "--master", master, "--deploy-mode", "client", "--name", spec.app_name or "Spark"]
        for k, v in self._namespace_fs().items():
            argv += ["--conf", f"spark.hadoop.{k}={v}"]
        if spec.app_class:
            argv += ["--class", spec.app_class]
        argv += split_spark_opts(spec.spark_opts or "")
        return [*argv, str(self.ns.local(spec.jar or "")), *spec.args]

    def _sqoop_argv(self, env: dict[str, str]) -> list[str]:
        """A sqoop action: ``org.apache.sqoop.Sqoop`` with the action's arguments, its tool's
        name first, then the Hadoop settings as generic ``-D`` options (Oozie's SqoopMain
        hands them over as the job's configuration): the LocalJobRunner (the emulator has
        no YARN) on the namespace's view file system. Sqoop compiles the table's record
        class into the working directory, which is on the class path (the LocalJobRunner
        does not load the job's jar)."""
        jars = env.get("SQOOP_CLASSPATH")
        if not jars:
            raise OSError("no Sqoop sharelib: the emulator runs sqoop actions with the jars of SQOOP_CLASSPATH "
                          "(pingo sqoop-classpath prints them)")  # fmt: skip
        java = _java(env)
        tool, *args = self.spec.args or [""]
        conf = {**self.spec.configuration, **self._namespace_fs(), "mapreduce.framework.name": "local"}
        classes = self.workdir / "classes"
        classes.mkdir(exist_ok=True)
        jvm = [
            java, *JPMS_OPTS, "-cp", os.pathsep.join([str(classes), jars]), "org.apache.sqoop.Sqoop", tool,
            *(a for k, v in conf.items() for a in ("-D", f"{k}={v}")), *args,
            "--outdir", str(self.workdir / "src"), "--bindir", str(classes),
        ]  # fmt: skip
        target = args[args.index("--target-dir") + 1] if "--target-dir" in args[:-1] else ""
        # Its output's checksum side files are removed once it succeeded (hadoop_emulator.sqoop).
        return sqoop.argv(str(self.ns.local(target)) if target else str(self.workdir), jvm)

    def _argv(self, env: dict[str, str], shipped: list[Path]) -> list[str]:
        spec = self.spec
        if spec.type == "map-reduce" and not self._mr_output():
            raise OSError("Output directory not set in JobConf.")
        if spec.type == "map-reduce":
            return self._streaming_argv() if spec.mapper else self._java_map_reduce_argv(env, shipped)
        if spec.type == "spark":
            return self._spark_argv(env)
        if spec.type == "sqoop":
            return self._sqoop_argv(env)
        if spec.type == "java":
            return [
                _java(env),
                "-cp",
                os.pathsep.join(self._classpath(shipped)),
                *spec.java_opts,
                f"-Doozie.action.conf.xml={self.workdir / 'action.xml'}",
                f"-Doozie.job.id={self.job_id}",
                f"-Doozie.action.id={self.action_id}",
                f"-Doozie.action.output.properties={self.workdir / 'output.properties'}",
                spec.main_class,
                *spec.args,
            ]
        exe = spec.exec or ""
        if "/" in exe:
            program = exe if os.path.isabs(exe) else str(self.workdir / exe)
        elif (self.workdir / exe).is_file():
            program = str(self.workdir / exe)
        else:
            found = shutil.which(exe, path=env.get("PATH"))
            if found is None:
                raise OSError(f'Cannot run program "{exe}": error=2, No such file or directory')
            program = found
        return [program, *spec.args]

    def _open_logs(self) -> tuple[BinaryIO, BinaryIO]:
        return open(self.workdir / "stdout", "wb"), open(self.workdir / "stderr", "wb")

    # -- running ----------------------------------------------------------------------
    async def run(self, on_start: Callable[[], None] | None = None) -> Outcome:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        try:
            self._prepare(self.action_conf.get("user.name", "dr.who"))
            self._check_output(self.action_conf.get("user.name", "dr.who"))
        except HdfsError as exc:
            return Outcome(error_code="JA009", error_message=exc.message)
        try:
            shipped = self._localize()
        except FileNotFoundError as exc:
            return Outcome(error_code="JA008", error_message=str(exc).strip("'\""))
        except (OSError, shutil.ReadError) as exc:
            return Outcome(error_code="JA009", error_message=str(exc))
        (self.workdir / "action.xml").write_text(to_xml(self.action_conf))
        env = self._env()
        try:
            argv = self._argv(env, shipped)
        except OSError as exc:
            return Outcome(error_code="JA018", error_message=str(exc))
        (self.workdir / "argv").write_text("\n".join(argv) + "\n")
        out, err = self._open_logs()
        since = time.time()
        with out, err:
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *argv,
                    cwd=self.workdir,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as exc:
                return Outcome(error_code="JA018", error_message=f'Cannot run program "{argv[0]}": {exc}')
            if on_start is not None:
                on_start()
            try:
                code = await self.proc.wait()
            except asyncio.CancelledError:
                self.kill()
                raise
        self._claim(self.action_conf.get("user.name", "dr.who"), since)
        outcome = Outcome(exit_code=code, started=True)
        if code < 0:
            outcome.exit_code = None
            outcome.error_code = "JA018"
            outcome.error_message = f"Launcher process terminated by signal {-code}"
        if self.spec.capture_output and outcome.ok:
            source = self.workdir / ("stdout" if self.spec.type == "shell" else "output.properties")
            text = source.read_text(errors="replace") if source.exists() else ""
            if len(text) > MAX_OUTPUT:
                outcome.error_code = "JA018"
                outcome.error_message = f"Output data exceeds its limit [{MAX_OUTPUT}]"
            else:
                outcome.data = text
        return outcome

    def kill(self) -> None:
        """SIGTERM to the action's process group, SIGKILL after a grace period."""
        self.killed = True
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)

        def force() -> None:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)

        asyncio.get_running_loop().call_later(KILL_GRACE, force)

    async def reap(self, grace: float = KILL_GRACE) -> None:
        """After :meth:`kill`: wait for the process to end, SIGKILL it after ``grace``."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
