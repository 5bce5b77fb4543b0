"""Apache Oozie 5.2.1 itself (``real_hadoop``), on Java 17 against the session's real mini
cluster (pingo/minicluster/oozie_server.py; docs/hadoop-protocol.md, "Apache Oozie on this
machine"). Pingo's Oozie client submits a workflow the way Pingo's Oozie executor does (the
app under Pingo's folder, ``user.name`` Pingo, ``doAs`` the owner, an external id, a
notification URL): an fs action in the server, a shell action as a real YARN application
whose launcher calls back to ``/callback``, and a streaming map-reduce action (the
launcher, then the MapReduce job it submits, read back from the JobHistoryServer); Oozie
tells Pingo the workflow's end on its notification URL. A running workflow is killed.
Pingo's executor runs shell, java (a user's jar), streaming and sqoop actions."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web

from pingo.minicluster.classpath import Unavailable, java_home, resolve_classpath
from pingo.minicluster.cluster import MiniCluster
from pingo.minicluster.oozie_server import OozieServer
from pingo.ports import free_ports
from shared.executors.base import JobRequest, JobState, JobStatus
from shared.executors.oozie import OozieExecutor
from shared.hadoop.oozie import TERMINAL, Oozie
from shared.hadoop.webhdfs import WebHdfs
from shared.workflow_spec import ActionType
from tests.support.postgres import USER as POSTGRES_USER
from tests.support.postgres import postgres_server
from tests.support.workflows import ROOT

pytestmark = pytest.mark.real_hadoop
JOB_TIMEOUT = 240.0
OWNER = "alice"  # in a group Pingo may act for (tests/support/hadoop_targets.py)

WORKFLOW = """<workflow-app xmlns="uri:oozie:workflow:1.0" name="pingo-hello">
  <start to="mkdir"/>
  <action name="mkdir">
    <fs><mkdir path="${nameNode}${made}"/></fs>
    <ok to="hello"/><error to="fail"/>
  </action>
  <action name="hello">
    <shell xmlns="uri:oozie:shell-action:1.0">
      <resource-manager>${jobTracker}</resource-manager>
      <name-node>${nameNode}</name-node>
      <exec>echo</exec><argument>greeting=hello</argument>
      <capture-output/>
    </shell>
    <ok to="count"/><error to="fail"/>
  </action>
  <action name="count">
    <map-reduce>
      <job-tracker>${jobTracker}</job-tracker>
      <name-node>${nameNode}</name-node>
      <streaming><mapper>cat</mapper><reducer>wc -l</reducer></streaming>
      <configuration>
        <property><name>mapred.input.dir</name><value>${input}</value></property>
        <property><name>mapred.output.dir</name><value>${output}</value></property>
      </configuration>
    </map-reduce>
    <ok to="end"/><error to="fail"/>
  </action>
  <kill name="fail"><message>failed [${wf:errorMessage(wf:lastErrorNode())}]</message></kill>
  <end name="end"/>
</workflow-app>
"""


def clients(cluster: MiniCluster, oozie_url: str) -> tuple[WebHdfs, Oozie]:
    """WebHDFS and Oozie as Pingo's HDFS user, once the owner's home is made: Oozie stages
    each launcher under it, as the owner."""
    cluster.webhdfs("PUT", f"/user/{OWNER}", "MKDIRS")
    cluster.webhdfs("PUT", f"/user/{OWNER}", "SETOWNER", owner=OWNER)
    return WebHdfs(cluster.webhdfs_url, cluster.hdfs_user), Oozie(oozie_url, cluster.hdfs_user)


def job_properties(cluster: MiniCluster, app: str, external_id: str) -> dict[str, str]:
    """What every submission of these tests names: its application, the cluster, its id."""
    return {
        "user.name": cluster.hdfs_user,
        "oozie.wf.application.path": f"{cluster.name_node}{app}",
        "nameNode": cluster.name_node,
        "jobTracker": cluster.resource_manager,
        "oozie.wf.external.id": external_id,
    }


async def job_ended(executor: OozieExecutor, job_id: str) -> JobStatus:
    """A job's status as Pingo's executor reads it, once it ended (or after JOB_TIMEOUT), polled every 2 s."""
    started = time.monotonic()
    status = await executor.status(job_id)
    while status.state in (JobState.PREP, JobState.RUNNING) and time.monotonic() - started < JOB_TIMEOUT:
        await asyncio.sleep(2)
        status = await executor.status(job_id)
    return status


async def ended(oozie: Oozie, job_id: str) -> str:
    """The workflow's status once it ended (or as it is after JOB_TIMEOUT), polled every 2 s."""
    started = time.monotonic()
    status = await oozie.status(job_id)
    while status not in TERMINAL and time.monotonic() - started < JOB_TIMEOUT:
        await asyncio.sleep(2)
        status = await oozie.status(job_id)
    return status


async def test_a_workflow_submitted_by_pingos_client_runs_on_real_oozie_and_yarn(real_oozie: OozieServer) -> None:
    cluster = real_oozie.cluster
    external_id = f"real-oozie-{uuid.uuid4().hex[:8]}"
    app = f"{cluster.hdfs_root}/oozie-apps/{external_id}"
    made = f"/user/{OWNER}/{external_id}"
    output = f"/user/{OWNER}/{external_id}-count"
    fs, oozie = clients(cluster, real_oozie.url)
    notified: list[dict[str, str]] = []
    runner, notify_url = await _notification_listener(notified)
    try:
        await fs.mkdirs(app)
        await fs.create(f"{app}/workflow.xml", WORKFLOW.encode())
        await fs.create(f"{app}/input/lines.txt", b"one\ntwo\nthree\n")
        assert 2 in await oozie.versions()
        properties = {
            **job_properties(cluster, app, external_id),
            "oozie.use.system.libpath": "true",  # Oozie's streaming main, as Pingo's map-reduce actions
            "oozie.wf.workflow.notification.url": f"{notify_url}?id=$jobId&status=$status",
            "made": made,
            "input": f"{app}/input",
            "output": output,
        }
        job_id = await oozie.submit(properties, external_id, do_as=OWNER)
        assert job_id.endswith("-W")
        assert await oozie.find(external_id) == job_id  # a repeated submission finds it
        status = await ended(oozie, job_id)
        info = await oozie.info(job_id)
        errors = [(a["name"], a["status"], a["errorCode"], a["errorMessage"]) for a in info["actions"]]
        assert status == "SUCCEEDED", errors
        assert info["user"] == OWNER  # doAs: the job is the owner's, not Pingo's
        actions = {a["name"]: a for a in info["actions"]}
        assert actions["mkdir"]["status"] == "OK"
        assert actions["hello"]["status"] == "OK"
        assert actions["hello"]["externalId"].startswith("application_")  # a real YARN application
        assert "greeting=hello" in actions["hello"]["data"]  # capture-output, read back by Oozie
        assert actions["count"]["status"] == "OK"
        assert actions["count"]["externalId"].startswith("job_")  # the MapReduce job, not its launcher
        assert (await fs.status(made))["owner"] == OWNER  # the fs action ran as the owner
        assert (await fs.open(f"{output}/part-00000")).split() == [b"3"]
        deadline = time.monotonic() + 30
        while not any(n["status"] == "SUCCEEDED" for n in notified) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert {"id": job_id, "status": "SUCCEEDED"} in notified
        # The launchers called back: Oozie's CallbackServlet logs each callback it serves.
        assert f"callback for action [{job_id}@hello]" in (real_oozie.work / "logs" / "oozie.log").read_text()
    finally:
        await oozie.close()
        await fs.close()
        await runner.cleanup()


SLEEPER = """<workflow-app xmlns="uri:oozie:workflow:1.0" name="pingo-sleeper">
  <start to="sleep"/>
  <action name="sleep">
    <shell xmlns="uri:oozie:shell-action:1.0">
      <resource-manager>${jobTracker}</resource-manager>
      <name-node>${nameNode}</name-node>
      <exec>sleep</exec><argument>600</argument>
    </shell>
    <ok to="end"/><error to="fail"/>
  </action>
  <kill name="fail"><message>failed</message></kill>
  <end name="end"/>
</workflow-app>
"""


async def test_a_running_workflow_killed_by_pingos_client_ends_killed_on_real_oozie(real_oozie: OozieServer) -> None:
    cluster = real_oozie.cluster
    external_id = f"real-oozie-{uuid.uuid4().hex[:8]}"
    app = f"{cluster.hdfs_root}/oozie-apps/{external_id}"
    fs, oozie = clients(cluster, real_oozie.url)
    try:
        await fs.mkdirs(app)
        await fs.create(f"{app}/workflow.xml", SLEEPER.encode())
        properties = job_properties(cluster, app, external_id)
        job_id = await oozie.submit(properties, external_id, do_as=OWNER)
        started = time.monotonic()
        action: dict = {}
        while time.monotonic() - started < JOB_TIMEOUT:
            action = next(a for a in (await oozie.info(job_id))["actions"] if a["name"] == "sleep")
            if action["status"] == "RUNNING" and (action["externalId"] or "").startswith("application_"):
                break
            await asyncio.sleep(1)
        assert action.get("status") == "RUNNING", action  # the launcher runs on YARN
        await oozie.kill(job_id)
        assert await oozie.status(job_id) == "KILLED"
        action = next(a for a in (await oozie.info(job_id))["actions"] if a["name"] == "sleep")
        assert action["status"] == "KILLED"
    finally:
        await oozie.close()
        await fs.close()


# A user's java action (COMMAND_LINE): Hadoop's FileSystem, as a job on a cluster uses it,
# writes the system property its configurationParameters set into its output folder.
HELLO_JAVA = """package org.example;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
public class Hello {
  public static void main(String[] args) throws Exception {
    Path out = new Path(args[args.length - 1]);
    try (FSDataOutputStream s = out.getFileSystem(new Configuration()).create(new Path(out, "part-00000"))) {
      s.write((System.getProperty("greeting") + " from " + args[0] + "\\n").getBytes("UTF-8"));
    }
  }
}
"""


def users_jar(folder: Path) -> Path:
    """HELLO_JAVA compiled against the cluster's Hadoop jars, in a jar of its own."""
    source = folder / "src" / "org" / "example" / "Hello.java"
    source.parent.mkdir(parents=True)
    source.write_text(HELLO_JAVA)
    classpath = os.pathsep.join(resolve_classpath(progress=False))
    bin_ = java_home() / "bin"
    subprocess.run([str(bin_ / "javac"), "-cp", classpath, "-d", str(folder / "classes"), str(source)], check=True)
    jar = folder / "hello.jar"
    subprocess.run([str(bin_ / "jar"), "cf", str(jar), "-C", str(folder / "classes"), "."], check=True)
    return jar


def executor_on(real_oozie: OozieServer) -> tuple[WebHdfs, OozieExecutor]:
    """Pingo's own Oozie executor on the real Oozie and its cluster, and the cluster's WebHDFS client."""
    cluster = real_oozie.cluster
    fs, oozie = clients(cluster, real_oozie.url)
    return fs, OozieExecutor(oozie, fs, cluster.name_node, cluster.resource_manager, "default",
                             f"{cluster.hdfs_root}/oozie-apps")  # fmt: skip


async def test_pingos_oozie_executor_runs_shell_and_java_actions_on_real_oozie_and_reads_their_end(
    real_oozie: OozieServer, tmp_path: Path
) -> None:
    """Pingo's own Oozie executor (shared/executors/oozie.py) writes the workflow, submits
    it and reads the end of a SHELL action that succeeds and of one that fails, and of a
    COMMAND_LINE action running a user's jar from its action folder (``oozie.libpath``),
    all at once."""
    cluster = real_oozie.cluster
    fs, executor = executor_on(real_oozie)
    run = uuid.uuid4().hex[:8]
    folder, output = f"{cluster.hdfs_root}/actions/hello-{run}", f"/user/{OWNER}/hello-{run}"
    try:
        await fs.create(f"{folder}/hello.jar", users_jar(tmp_path).read_bytes())
        jobs = {}
        for name, command in (("greets", ["sh", "-c", "echo hello"]), ("fails", ["sh", "-c", "exit 3"])):
            external_id = f"real-executor-{name}-{uuid.uuid4().hex[:8]}"
            jobs[name] = JobRequest(action_id=f"a-{name}", external_id=external_id, type=ActionType.SHELL, name=name,
                             action_folder=None, main_class=None, command=command, arguments=[], configuration={},
                             notify_url="http://127.0.0.1:9/unheard", owner=OWNER)  # fmt: skip
        jobs["java"] = JobRequest(action_id="a-java", external_id=f"real-executor-java-{run}",
                                  type=ActionType.COMMAND_LINE, name="hello", action_folder=folder,
                                  main_class="org.example.Hello", command=None,
                                  arguments=["alice's jar", f"{cluster.name_node}{output}"],
                                  configuration={"greeting": "hello"}, notify_url="http://127.0.0.1:9/unheard",
                                  owner=OWNER)  # fmt: skip
        ids = {}
        for name, job in jobs.items():
            ids[name] = await executor.submit(job)
            assert await executor.submit(job) == ids[name]  # a repeated submit finds the job it made
        ends = {}
        started = time.monotonic()
        for name, job_id in ids.items():
            status = await executor.status(job_id)
            while status.state in (JobState.PREP, JobState.RUNNING) and time.monotonic() - started < JOB_TIMEOUT:
                await asyncio.sleep(2)
                status = await executor.status(job_id)
            ends[name] = status
        assert ends["greets"].state == JobState.SUCCEEDED, ends["greets"]
        assert ends["greets"].started_at and ends["greets"].ended_at
        assert ends["fails"].state == JobState.FAILED, ends["fails"]
        # Real Oozie reports the launcher's exit code, 1, not the command's (docs/hadoop-protocol.md).
        assert ends["fails"].error == "1: Main Class [org.apache.oozie.action.hadoop.ShellMain], exit code [1]"
        assert ends["java"].state == JobState.SUCCEEDED, ends["java"]
        assert await fs.open(f"{output}/part-00000") == b"hello from alice's jar\n"
        assert (await fs.status(f"{output}/part-00000"))["owner"] == OWNER
    finally:
        await executor.close()  # and its clients


async def test_pingos_oozie_executor_runs_a_streaming_word_count_on_real_oozie(real_oozie: OozieServer) -> None:
    """A MAP_REDUCE streaming action as Pingo writes it: ``python3 mapper.py`` and
    ``python3 reducer.py`` shipped from the action's folder (``<file>``), inputs and output
    as job properties, Oozie's streaming sharelib; its counts are the words of the input."""
    cluster = real_oozie.cluster
    fs, executor = executor_on(real_oozie)
    wordcount = ROOT / "examples" / "wordcount"
    run = uuid.uuid4().hex[:8]
    folder, books, output = (
        f"{cluster.hdfs_root}/actions/wc-{run}",
        f"{cluster.hdfs_root}/books-{run}",
        f"/user/{OWNER}/wc-{run}",
    )
    try:
        for name in ("mapper.py", "reducer.py"):
            await fs.create(f"{folder}/{name}", (wordcount / name).read_bytes())
        texts = sorted(wordcount.glob("*.txt"))
        for text in texts:
            await fs.create(f"{books}/{text.name}", text.read_bytes())
        job = JobRequest(action_id="a-wc", external_id=f"real-executor-wc-{run}", type=ActionType.MAP_REDUCE,
                         name="wordcount", action_folder=folder, main_class=None, command=None,
                         arguments=[books, output], configuration={"mapreduce.job.reduces": "1"},
                         notify_url="http://127.0.0.1:9/unheard", owner=OWNER,
                         mapper=["python3", "mapper.py"], reducer=["python3", "reducer.py"])  # fmt: skip
        job_id = await executor.submit(job)
        status = await job_ended(executor, job_id)
        assert status.state == JobState.SUCCEEDED, status
        counted = {}
        for line in (await fs.open(f"{output}/part-00000")).decode().splitlines():
            word, count = line.split("\t")
            counted[word] = int(count)
        words = Counter(w for t in texts for w in re.findall(r"[a-z]+(?:'[a-z]+)*", t.read_text().lower()))
        assert counted == dict(words)
    finally:
        await executor.close()  # and its clients


async def test_with_every_callback_lost_real_oozie_still_learns_a_shell_actions_end(
    real_hadoop_cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Launchers call back to a port nobody listens on: Oozie's own check of running
    actions (every 5 s here) ends the workflow, and Pingo's client reads it by polling."""
    lost = f"http://127.0.0.1:{free_ports(1)[0]}/oozie/callback"
    server = OozieServer(tmp_path_factory.mktemp("oozie-lost"), real_hadoop_cluster,
                         extra={"oozie.service.CallbackService.base.url": lost})  # fmt: skip
    try:
        server.start()
    except Unavailable as exc:
        pytest.fail(f"Apache Oozie could not start: {exc}")
    cluster = real_hadoop_cluster
    external_id = f"real-oozie-lost-{uuid.uuid4().hex[:8]}"
    app = f"{cluster.hdfs_root}/oozie-apps/{external_id}"
    fs, oozie = clients(cluster, server.url)
    try:
        await fs.mkdirs(app)
        await fs.create(f"{app}/workflow.xml", WORKFLOW.replace('<ok to="count"/>', '<ok to="end"/>').encode())
        properties = {
            **job_properties(cluster, app, external_id),
            "made": f"/user/{OWNER}/{external_id}",
        }
        job_id = await oozie.submit(properties, external_id, do_as=OWNER)
        status = await ended(oozie, job_id)
        info = await oozie.info(job_id)
        assert status == "SUCCEEDED", [(a["name"], a["status"], a["errorMessage"]) for a in info["actions"]]
        hello = next(a for a in info["actions"] if a["name"] == "hello")
        assert "greeting=hello" in hello["data"]
        callbacks = (server.work / "logs" / "oozie.log").read_text(errors="replace").count("CallbackServlet")
        assert callbacks == 0
    finally:
        await oozie.close()
        await fs.close()
        server.stop()


async def _notification_listener(into: list[dict[str, str]]) -> tuple[web.AppRunner, str]:
    """Where Oozie sends the workflow's notifications (GET, as Pingo's callback service gets them)."""

    async def notification(request: web.Request) -> web.Response:
        into.append(dict(request.query))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/notify", notification)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_ports(1)[0]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/notify"


async def test_pingos_oozie_executor_runs_a_sqoop_import_on_real_oozie(real_oozie: OozieServer) -> None:
    """A SQOOP action as Pingo writes it (``<sqoop>``, its arguments one ``<arg>`` each, the
    password file on HDFS) on Oozie's sqoop sharelib: Sqoop 1.4.7 imports a PostgreSQL
    table as a MapReduce job on YARN, as the action's owner."""
    cluster = real_oozie.cluster
    fs, executor = executor_on(real_oozie)
    run = uuid.uuid4().hex[:8]
    output, password = f"/user/{OWNER}/cities-{run}", f"{cluster.hdfs_root}/db-{run}.password"
    try:
        with postgres_server() as db:
            db.sql("CREATE TABLE cities (id int PRIMARY KEY, name text); INSERT INTO cities VALUES (1, 'Lyon'), "
                   "(2, 'Nantes');")  # fmt: skip
            await fs.create(password, b"unused: the tests' PostgreSQL trusts its users")
            job = JobRequest(action_id="a-sqoop", external_id=f"real-executor-sqoop-{run}", type=ActionType.SQOOP,
                             name="cities", action_folder=None, main_class=None, command=None, arguments=[output],
                             configuration={"mapreduce.job.name": f"cities-{run}"}, owner=OWNER,
                             notify_url="http://127.0.0.1:9/unheard",
                             sqoop={"connect": db.jdbc_url, "table": "cities", "username": POSTGRES_USER,
                                    "passwordFile": password})  # fmt: skip
            job_id = await executor.submit(job)
            started = time.monotonic()
            status = await job_ended(executor, job_id)
            print(f"\nSqoop import through real Oozie: {time.monotonic() - started:.0f} s")
        assert status.state == JobState.SUCCEEDED, status
        assert (await fs.open(f"{output}/part-m-00000")).decode().splitlines() == ["1,Lyon", "2,Nantes"]
    finally:
        await executor.close()  # and its clients
