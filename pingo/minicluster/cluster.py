"""One real Apache Hadoop mini cluster: ``MiniHadoopClusterManager`` (what ``mapred
minicluster`` runs) in a JVM of its own, with a NameNode serving WebHDFS, a DataNode, a
YARN ResourceManager and NodeManager and the MapReduce JobHistoryServer, every port private
(picked free on 127.0.0.1), its data in a work folder. docs/hadoop-protocol.md, "The real
mini cluster", says why each setting is there."""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pingo.minicluster.classpath import Unavailable, java_home, resolve_classpath
from pingo.ports import free_ports, listening
from shared.hadoop.configuration import configuration_xml, read_configuration
from shared.hadoop.jvm import JPMS_OPTS

MAIN_CLASS = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"
HEALTH_POLL = 0.5
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# What MiniYARNCluster logs once every NodeManager has registered with the ResourceManager.
NODES_UP = "All Node Managers connected in MiniYARNCluster"


@dataclass
class Ports:
    namenode: int
    namenode_http: int
    rm: int
    rm_scheduler: int
    rm_tracker: int
    rm_admin: int
    rm_web: int
    jhs: int
    jhs_web: int
    jhs_admin: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(*free_ports(10))


@dataclass
class MiniCluster:
    """``work`` holds the cluster's data, logs and written configuration (``conf/``).
    ``hdfs_user`` gets ``hdfs_root`` (owned by it) and may act for any user through
    ``doas`` unless ``proxy_groups`` narrows it; ``groups`` maps users to their HDFS groups
    (Hadoop's static mapping), for permission checks of users the machine does not have."""

    work: Path
    hdfs_user: str = "pingo"
    hdfs_root: str = "/pingo"
    heap: str = "1g"
    proxy_groups: str = "*"
    groups: dict[str, list[str]] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    ports: Ports | None = None
    started_in: float = 0.0
    conf: dict[str, str] = field(default_factory=dict)

    # -- what Pingo needs ------------------------------------------------------------
    @property
    def webhdfs_url(self) -> str:
        return f"http://127.0.0.1:{self._ports.namenode_http}"

    @property
    def name_node(self) -> str:
        return self.conf.get("fs.defaultFS") or f"hdfs://127.0.0.1:{self._ports.namenode}"

    @property
    def resource_manager(self) -> str:
        return self.conf.get("yarn.resourcemanager.address") or f"127.0.0.1:{self._ports.rm}"

    @property
    def rm_web_url(self) -> str:
        return f"http://127.0.0.1:{self._ports.rm_web}"

    @property
    def history_web_url(self) -> str:
        return f"http://127.0.0.1:{self._ports.jhs_web}"

    @property
    def conf_dir(self) -> Path:
        return self.work / "conf"

    @property
    def superuser(self) -> str:
        """HDFS's superuser: whoever started the NameNode."""
        return getpass.getuser()

    def settings(self) -> dict[str, str]:
        """Pingo's settings for this cluster (docs/operations.md, "Settings")."""
        return {
            "PINGO_STORAGE": "webhdfs",
            "PINGO_WEBHDFS_URL": self.webhdfs_url,
            "PINGO_NAME_NODE": self.name_node,
            "PINGO_JOB_TRACKER": self.resource_manager,
            "PINGO_HDFS_USER": self.hdfs_user,
            "PINGO_HDFS_ROOT": self.hdfs_root,
        }

    @property
    def _ports(self) -> Ports:
        if self.ports is None:
            raise RuntimeError("the mini cluster is not started")
        return self.ports

    # -- starting and stopping -------------------------------------------------------
    def argv(self, classpath: list[str]) -> list[str]:
        p = self._ports
        host = "127.0.0.1"
        # Containers (MapReduce application masters, tasks, streaming) run on this machine:
        # the cluster's own jars, by absolute path, are their Hadoop.
        jars = ",".join(classpath)
        mapping = ";".join([f"{u}={','.join(g)}" for u, g in self.groups.items()] + ["dr.who="])
        conf = {
            # Fixed ports, all private: MiniHadoopClusterManager turns fixed ports on and would
            # otherwise bind Hadoop's defaults (8088, 19888, ...) on every interface.
            "yarn.resourcemanager.scheduler.address": f"{host}:{p.rm_scheduler}",
            "yarn.resourcemanager.resource-tracker.address": f"{host}:{p.rm_tracker}",
            "yarn.resourcemanager.admin.address": f"{host}:{p.rm_admin}",
            "yarn.resourcemanager.webapp.address": f"{host}:{p.rm_web}",
            "yarn.nodemanager.webapp.address": f"{host}:0",
            "mapreduce.jobhistory.webapp.address": f"{host}:{p.jhs_web}",
            "mapreduce.jobhistory.admin.address": f"{host}:{p.jhs_admin}",
            # Pingo acts for its users through doas (docs/users.md, "On Hadoop").
            f"hadoop.proxyuser.{self.hdfs_user}.hosts": "*",
            f"hadoop.proxyuser.{self.hdfs_user}.groups": self.proxy_groups,
            "hadoop.user.group.static.mapping.overrides": mapping,
            "dfs.permissions.enabled": "true",
            "mapreduce.framework.name": "yarn",
            # A staging folder other than the default: MiniMRYarnCluster replaces the default
            # value (/tmp/hadoop-yarn/staging itself too) by one private to its copy of the
            # configuration, where its JobHistoryServer then looks, and a finished job that a
            # client outside the cluster's JVM submitted (Oozie's) is "Unable to find job".
            "yarn.app.mapreduce.am.staging-dir": "/tmp/hadoop-yarn/pingo-staging",
            "yarn.application.classpath": jars,
            "mapreduce.application.classpath": jars,
            # Java 17 containers: MapReduce's own --add-opens (off by default since 3.4).
            "mapreduce.jvm.add-opens-as-default": "true",
            "yarn.minicluster.yarn.nodemanager.resource.memory-mb": "8192",
            "yarn.scheduler.minimum-allocation-mb": "256",
            "yarn.scheduler.capacity.maximum-am-resource-percent": "0.5",
            "yarn.app.mapreduce.am.resource.mb": "512",
            "yarn.app.mapreduce.am.command-opts": "-Xmx384m -XX:TieredStopAtLevel=1",
            "mapreduce.map.memory.mb": "512",
            "mapreduce.reduce.memory.mb": "512",
            "mapreduce.map.java.opts": "-Xmx384m -XX:TieredStopAtLevel=1",
            "mapreduce.reduce.java.opts": "-Xmx384m -XX:TieredStopAtLevel=1",
            # The NodeManager refuses containers on a disk over 90 % full by default.
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99.9",
            **self.extra,
        }
        # Hadoop's group mapping is one per JVM, made from the configuration files on the
        # classpath before any -D is read: the static groups go into a core-site.xml there.
        site = self.work / "etc"
        site.mkdir(parents=True, exist_ok=True)
        (site / "core-site.xml").write_bytes(configuration_xml({"hadoop.user.group.static.mapping.overrides": mapping}))
        classpath = [str(site), *classpath]
        java = str(java_home() / "bin" / "java")
        jvm = [java, *JPMS_OPTS, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dtest.build.data={self.work / 'dfs'}", f"-Dhadoop.log.dir={self.work / 'logs'}",
               f"-Djava.io.tmpdir={self.work / 'tmp'}", "-cp", os.pathsep.join(classpath), MAIN_CLASS]  # fmt: skip
        args = ["-format", "-datanodes", "1", "-nodemanagers", "1",
                "-nnport", str(p.namenode), "-nnhttpport", str(p.namenode_http),
                "-rmport", str(p.rm), "-jhsport", str(p.jhs),
                "-writeConfig", str(self.conf_dir / "core-site.xml")]  # fmt: skip
        for key, value in conf.items():
            args += ["-D", f"{key}={value}"]
        return jvm + args

    def start(self, timeout: float = 240.0, progress: bool = False) -> None:
        """Resolve the jars, start the JVM and wait until the cluster is healthy: WebHDFS
        answers, the ResourceManager has an active NodeManager, the JobHistoryServer
        answers. A port taken meanwhile is retried once with other ports."""
        classpath = resolve_classpath(progress=progress)
        t0 = time.monotonic()
        for attempt in (1, 2):
            self.ports = Ports.pick()
            for sub in ("run", "conf", "logs", "tmp"):
                (self.work / sub).mkdir(parents=True, exist_ok=True)
            (self.conf_dir / "core-site.xml").unlink(missing_ok=True)
            log = open(self.work / "cluster.log", "ab")
            env = {**os.environ, "JAVA_HOME": str(java_home())}  # containers start with $JAVA_HOME/bin/java
            # Its own session: stop() ends the JVM and whatever it started, nothing else.
            self.process = subprocess.Popen(self.argv(classpath), cwd=self.work / "run", env=env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, preexec_fn=_die_with_parent)  # fmt: skip
            log.close()
            try:
                self._wait_healthy(t0 + timeout)
                break
            except Unavailable:
                port_taken = "Address already in use" in self.log_tail(200)
                self.stop()
                if attempt == 2 or not port_taken:
                    raise
        self._prepare_root()
        self._client_conf()
        self._spark_conf()
        self.started_in = time.monotonic() - t0

    def _wait_healthy(self, deadline: float) -> None:
        written = self.conf_dir / "core-site.xml"
        # The configuration is written once MiniYARNCluster has seen its NodeManager
        # register and the JobHistoryServer has started. The daemons' REST services cannot
        # say so: in one JVM their web apps share Guice's static filter and only one of them
        # serves /ws/v1 (docs/hadoop-protocol.md, "The real mini cluster").
        checks = [
            ("WebHDFS", lambda: self._get_json(f"{self.webhdfs_url}/webhdfs/v1/?op=GETFILESTATUS") is not None),
            ("a NodeManager", lambda: NODES_UP in self.log_tail(2000)),
            ("the ResourceManager", lambda: listening(self._ports.rm)),
            ("the JobHistoryServer", lambda: listening(self._ports.jhs)),
        ]
        waiting = "its configuration"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise Unavailable(f"the mini cluster exited (code {code}) while waiting for {waiting}; "
                                  f"{self.work / 'cluster.log'} ends:\n{self.log_tail(30)}")  # fmt: skip
            if not self.conf and written.is_file():
                try:
                    self.conf = read_configuration(written)
                except ET.ParseError:
                    pass  # still being written
            if self.conf:
                pending = [name for name, ok in checks if not ok()]
                if not pending:
                    return
                waiting = ", ".join(pending)
            time.sleep(HEALTH_POLL)
        raise Unavailable(f"the mini cluster was not healthy in time (waiting for {waiting}); "
                          f"{self.work / 'cluster.log'} ends:\n{self.log_tail(30)}")  # fmt: skip

    @staticmethod
    def _get_json(url: str) -> dict | None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}),
                                        timeout=5) as resp:  # fmt: skip
                return json.load(resp)
        except (OSError, ValueError):
            return None

    def webhdfs(self, method: str, path: str, op: str, user: str | None = None, **params: str) -> dict:
        """One WebHDFS request (no body) as ``user`` (default: the superuser)."""
        query = urllib.parse.urlencode({"op": op, "user.name": user or self.superuser, **params})
        request = urllib.request.Request(f"{self.webhdfs_url}/webhdfs/v1{path}?{query}", method=method)
        with urllib.request.urlopen(request, timeout=30) as resp:
            body = resp.read()
        return json.loads(body) if body else {}

    def _prepare_root(self) -> None:
        """Pingo's root, owned by Pingo's HDFS user: the NameNode's root is the superuser's.
        And the user's home, as a cluster's administrator makes it: Spark on YARN stages an
        application's files in ``/user/<user>/.sparkStaging``."""
        for folder in (self.hdfs_root, f"/user/{self.hdfs_user}"):
            self.webhdfs("PUT", folder, "MKDIRS")
            self.webhdfs("PUT", folder, "SETOWNER", owner=self.hdfs_user)

    def _client_conf(self) -> None:
        """The written configuration as every site file a Hadoop client reads: a client
        loads yarn-default.xml and mapred-default.xml after core-site.xml, so the
        ResourceManager's address and ``mapreduce.framework.name=yarn`` in core-site.xml
        alone would be overridden by the defaults (0.0.0.0:8032, local)."""
        written = (self.conf_dir / "core-site.xml").read_text()
        for name in ("hdfs-site.xml", "yarn-site.xml", "mapred-site.xml"):
            (self.conf_dir / name).write_text(written)

    def client_env(self) -> dict[str, str]:
        """The environment of a Hadoop or Spark client on this cluster (``spark-submit
        --master yarn``): its configuration, and the user it acts as."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "SPARK_CONF_DIR": str(self.conf_dir),
                "HADOOP_USER_NAME": self.hdfs_user}  # fmt: skip

    def _spark_conf(self) -> None:
        """``spark-defaults.conf`` for ``spark-submit --master yarn`` (pingo[spark]'s Spark),
        beside the Hadoop configuration (docs/hadoop-protocol.md, "Spark on YARN")."""
        spark = importlib.util.find_spec("pyspark")
        if spark is None or spark.origin is None:
            return
        jars = Path(spark.origin).parent / "jars"
        defaults = {
            # The containers are on this machine: Spark's jars by path, not uploaded (460 MB).
            "spark.yarn.jars": f"local:{jars}/*",
            # Spark brings its own (shaded) Hadoop client; the cluster's jars would clash with it.
            "spark.yarn.populateHadoopClasspath": "false",
            # The written configuration names a class of Hadoop's test jars, which Spark lacks.
            "spark.hadoop.net.topology.node.switch.mapping.impl": "org.apache.hadoop.net.ScriptBasedMapping",
            "spark.yarn.am.memory": "512m",
            "spark.driver.memory": "512m",
            "spark.executor.memory": "512m",
            "spark.executor.instances": "1",
            "spark.executor.cores": "1",
            # A PySpark driver in the application master (cluster mode) runs on this Python.
            "spark.yarn.appMasterEnv.PYSPARK_PYTHON": sys.executable,
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        }
        text = "".join(f"{key} {value}\n" for key, value in defaults.items())
        (self.conf_dir / "spark-defaults.conf").write_text(text)

    def client_argv(self, main_class: str, *args: str, heap: str = "512m", jars: Sequence[str] = ()) -> list[str]:
        """A Hadoop client JVM on this cluster (``hadoop jar`` without the scripts): its
        configuration first on the class path, then ``jars`` (a tool's, which win over the
        cluster's versions), then the cluster's jars. Run it with ``HADOOP_USER_NAME`` set to
        the user it acts as."""
        classpath = [str(self.conf_dir), *jars, *resolve_classpath(progress=False)]
        java = str(java_home() / "bin" / "java")
        return [java, *JPMS_OPTS, f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join(classpath),
                main_class, *args]  # fmt: skip

    def rss(self) -> int:
        """The cluster JVM's resident memory in bytes (0 once it is gone)."""
        return resident_bytes(self.process)

    def log_tail(self, lines: int) -> str:
        try:
            return "\n".join((self.work / "cluster.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM to the cluster's process group, SIGKILL after ``grace`` seconds."""
        proc, self.process = self.process, None
        stop_group(proc, grace)


def stop_group(proc: subprocess.Popen | None, grace: float) -> None:
    """SIGTERM to a JVM's process group, SIGKILL after ``grace`` seconds (nothing if gone)."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)


def resident_bytes(process: subprocess.Popen | None) -> int:
    """A process's resident memory in bytes, from /proc (0 once it is gone)."""
    if process is None:
        return 0
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _die_with_parent() -> None:
    """In the child before exec: Linux sends it SIGTERM when the process that started it
    ends, however it ends (a killed test run, a closed terminal), so no cluster outlives
    its owner holding ports and memory."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
