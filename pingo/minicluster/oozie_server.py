"""A real Apache Oozie 5.2.1 server (``EmbeddedOozieServer``: Jetty, the REST servlets and
``/callback``) in a JVM of its own on Java 17, against a running :class:`MiniCluster`: Derby
as its database, created on first start, and the ``oozie`` sharelib (the launcher) uploaded
over WebHDFS. docs/hadoop-protocol.md, "Apache Oozie on this machine", says why each
setting is there."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from pingo.minicluster.classpath import OOZIE_POM, SQOOP_POM, Unavailable, java_home, resolve_classpath
from pingo.minicluster.cluster import JPMS_OPTS, MiniCluster, _die_with_parent, resident_bytes, stop_group
from pingo.ports import free_ports
from shared.hadoop.configuration import configuration_xml

OOZIE_VERSION = "5.2.1"
MAIN_CLASS = "org.apache.oozie.server.EmbeddedOozieServer"
LAUNCHER_JAR = f"oozie-sharelib-oozie-{OOZIE_VERSION}.jar"
STREAMING_JAR = f"oozie-sharelib-streaming-{OOZIE_VERSION}.jar"
SQOOP_JAR = f"oozie-sharelib-sqoop-{OOZIE_VERSION}.jar"
HEALTH_POLL = 0.5
# Oozie's own log4j 1 appender: the server log, and the job logs (show=log) Oozie's log
# streamer reads back from it. The streamer serves them only from an hourly or daily rolling
# appender (a plain FileAppender answers every show=log "Log streaming disabled!!"), whose
# rotation it must know to find a period's files: docs/hadoop-protocol.md, "Job logs".
LOG4J = """\
log4j.rootLogger=INFO, oozie
log4j.appender.oozie=org.apache.log4j.DailyRollingFileAppender
log4j.appender.oozie.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.oozie.File=${oozie.log.dir}/oozie.log
log4j.appender.oozie.Append=true
log4j.appender.oozie.layout=org.apache.log4j.PatternLayout
log4j.appender.oozie.layout.ConversionPattern=%d{ISO8601} %5p %c{1}:%L - SERVER[${oozie.instance.id}] %m%n
log4j.logger.openjpa=WARN
"""


def resolve_oozie_classpath(progress: bool = True) -> list[str]:
    """Oozie's jars (``oozie/pom.xml``), resolved once into ``~/.m2`` (about 60 MB beyond the mini cluster's)."""
    return resolve_classpath(progress=progress, pom=OOZIE_POM, name=f"oozie-{OOZIE_VERSION}")


@dataclass
class OozieServer:
    """``work`` holds Oozie's home (configuration, Derby, logs). The server acts on Hadoop
    as ``cluster.hdfs_user`` (the JVM's ``HADOOP_USER_NAME``): the cluster already lets that
    user act for others (``doas``), as Oozie does for every job's owner. Its own
    ``ProxyUserService`` lets ``proxy_user`` submit for anyone (``doAs``)."""

    work: Path
    cluster: MiniCluster
    proxy_user: str = "pingo"
    heap: str = "512m"
    extra: dict[str, str] = field(default_factory=dict)  # more oozie-site.xml settings
    process: subprocess.Popen | None = None
    port: int = 0
    started_in: float = 0.0

    @property
    def url(self) -> str:
        """Oozie's base URL (``PINGO_OOZIE_URL``), also where launchers call back."""
        return f"http://127.0.0.1:{self.port}/oozie"

    @property
    def user(self) -> str:
        return self.cluster.hdfs_user

    @property
    def sharelib(self) -> str:
        return f"/user/{self.user}/share/lib"

    def site(self) -> dict[str, str]:
        return {
            # Derby under oozie.data.dir, its schema created on first start (what
            # `ooziedb.sh create` would do).
            "oozie.service.JPAService.create.db.schema": "true",
            "oozie.service.HadoopAccessorService.hadoop.configurations": f"*={self.cluster.conf_dir}",
            "oozie.base.url": self.url,
            "oozie.http.hostname": "127.0.0.1",
            "oozie.http.port": str(self.port),
            "oozie.service.WorkflowAppService.system.libpath": self.sharelib,
            f"oozie.service.ProxyUserService.proxyuser.{self.proxy_user}.hosts": "*",
            f"oozie.service.ProxyUserService.proxyuser.{self.proxy_user}.groups": "*",
            # A lost callback costs 5 s, not the default 10 minutes.
            "oozie.service.ActionCheckerService.action.check.delay": "5",
            "oozie.service.ActionCheckerService.action.check.interval": "5",
            # Launcher AMs of 512 MB fit the cluster's containers (the default is 2 GB).
            "oozie.launcher.default.memory.mb": "512",
            **self.extra,
        }

    def start(self, timeout: float = 120.0) -> None:
        classpath = resolve_oozie_classpath(progress=False)
        t0 = time.monotonic()
        self.port = free_ports(1)[0]
        self._write_home()
        self._upload_sharelib(classpath)
        # EmbeddedOozieServer needs a classpath resource /webapp/ (its web root); the REST
        # servlets are mapped in code, so an empty folder serves.
        webroot = self.work / "webroot"
        (webroot / "webapp").mkdir(parents=True, exist_ok=True)
        home = self.work
        java = str(java_home() / "bin" / "java")
        argv = [java, *JPMS_OPTS, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Doozie.home.dir={home}", f"-Doozie.config.dir={home / 'conf'}", f"-Doozie.data.dir={home / 'data'}",
                f"-Doozie.log.dir={home / 'logs'}", "-Doozie.config.file=oozie-site.xml",
                "-Doozie.log4j.file=oozie-log4j.properties", "-Doozie.instance.id=pingo-test",
                f"-Djava.io.tmpdir={home / 'tmp'}", "-cp", os.pathsep.join([str(webroot), *classpath]),
                MAIN_CLASS]  # fmt: skip
        env = {**os.environ, "JAVA_HOME": str(java_home()), "HADOOP_USER_NAME": self.user}
        with open(self.work / "oozie.out", "ab") as log:
            self.process = subprocess.Popen(argv, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            preexec_fn=_die_with_parent)  # fmt: skip
        try:
            self._wait_healthy(t0 + timeout)
        except Unavailable:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0

    def _write_home(self) -> None:
        for sub in ("conf/action-conf", "data", "logs", "tmp"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        (self.work / "conf" / "oozie-site.xml").write_bytes(configuration_xml(self.site()))
        (self.work / "conf" / "oozie-log4j.properties").write_text(LOG4J)

    def _upload_sharelib(self, classpath: list[str]) -> None:
        """The sharelibs in a ``lib_<timestamp>`` folder, as ``oozie-setup.sh sharelib create``
        lays them out: ``oozie`` (the launcher, which every YARN action needs),
        ``mapreduce-streaming`` (Oozie's streaming main and the cluster's own
        ``hadoop-streaming``) and ``sqoop`` (Oozie's sqoop main, Sqoop 1.4.7 and the jars it
        is pinned with, the PostgreSQL driver: ``SQOOP_POM``)."""
        jars = {Path(j).name: Path(j) for j in [*classpath, *resolve_classpath(progress=False)]}
        streaming = next((n for n in jars if n.startswith("hadoop-streaming-")), None)
        missing = [n for n in (LAUNCHER_JAR, STREAMING_JAR, streaming, SQOOP_JAR) if n is None or n not in jars]
        if missing:
            raise Unavailable(f"{missing} are not among the jars of {OOZIE_POM} and the mini cluster")
        home = f"/user/{self.user}"
        self.cluster.webhdfs("PUT", home, "MKDIRS")
        self.cluster.webhdfs("PUT", home, "SETOWNER", owner=self.user)
        lib = f"{self.sharelib}/lib_20000101000000"
        for folder, name in (("oozie", LAUNCHER_JAR), ("mapreduce-streaming", STREAMING_JAR),
                             ("mapreduce-streaming", streaming), ("sqoop", SQOOP_JAR)):  # fmt: skip
            self._put(f"{lib}/{folder}/{name}", jars[name].read_bytes(), self.user)
        for jar in map(Path, resolve_classpath(progress=False, pom=SQOOP_POM, name="sqoop-1.4.7")):
            self._put(f"{lib}/sqoop/{jar.name}", jar.read_bytes(), self.user)

    def _put(self, path: str, data: bytes, user: str) -> None:
        """WebHDFS CREATE as ``user``: the NameNode's 307, then the data to the DataNode."""
        query = urllib.parse.urlencode({"op": "CREATE", "overwrite": "true", "user.name": user})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            opener.open(urllib.request.Request(f"{self.cluster.webhdfs_url}/webhdfs/v1{path}?{query}", method="PUT"))
            raise Unavailable(f"WebHDFS CREATE {path} did not redirect to a DataNode")
        except urllib.error.HTTPError as redirect:
            if redirect.code != 307:
                raise
            location = redirect.headers["Location"]
        with urllib.request.urlopen(urllib.request.Request(location, data=data, method="PUT"), timeout=60):
            pass

    def _wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise Unavailable(f"Oozie exited (code {code}); {self.work / 'oozie.out'} ends:\n{self.log_tail(30)}")
            try:
                with urllib.request.urlopen(f"{self.url}/v2/admin/status", timeout=5) as resp:
                    if json.load(resp).get("systemMode") == "NORMAL":
                        return
            except (OSError, ValueError):
                pass
            time.sleep(HEALTH_POLL)
        raise Unavailable(f"Oozie did not answer in time; {self.work / 'oozie.out'} ends:\n{self.log_tail(30)}")

    def log_tail(self, lines: int) -> str:
        try:
            return "\n".join((self.work / "oozie.out").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def rss(self) -> int:
        """Oozie's resident memory in bytes (0 once it is gone)."""
        return resident_bytes(self.process)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, SIGKILL after ``grace`` seconds: Oozie's shutdown hook can wait on its
        services for longer, and its Derby is thrown away with the work folder."""
        proc, self.process = self.process, None
        stop_group(proc, grace)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """WebHDFS's 307 is read, not followed: the data goes to the DataNode it names."""

    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None
