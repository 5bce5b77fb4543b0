"""Conformance of the Hadoop emulator (``hadoop_emulator``, ``pingo emulate-hadoop``) to the
protocol in docs/hadoop-protocol.md and the surface in docs/emulator.md: status codes,
headers, JSON key sets, the CREATE redirect, false-not-error semantics, the external-id
lookup, show=status v1 vs v2, silent no-ops, the notification retry rule, every fault knob,
and java and shell actions that really run.

Every test starts its own emulator in process on free ports. Waits poll with deadlines.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from hadoop_emulator import start_emulator
from hadoop_emulator.server import Emulator

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"
TERMINAL = {"SUCCEEDED", "KILLED", "FAILED"}
# Every key WorkflowJobBean / WorkflowActionBean.toJSONObject emits (docs/hadoop-protocol.md, "Job information").
JOB_KEYS = {
    "id", "appName", "appPath", "externalId", "parentId", "conf", "status", "lastModTime", "createdTime",
    "startTime", "endTime", "user", "group", "acl", "run", "consoleUrl", "actions", "toString",
}  # fmt: skip
ACTION_KEYS = {
    "id", "name", "type", "conf", "status", "retries", "startTime", "endTime", "transition", "data", "stats",
    "externalChildIDs", "externalId", "externalStatus", "trackerUri", "consoleUrl", "errorCode", "errorMessage",
    "toString", "userRetryInterval", "userRetryCount", "userRetryMax", "cred",
}  # fmt: skip
FILE_STATUS_KEYS = {
    "accessTime", "blockSize", "childrenNum", "fileId", "group", "length", "modificationTime", "owner",
    "pathSuffix", "permission", "replication", "storagePolicy", "type",
}  # fmt: skip
RFC822 = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                    r"\d\d:\d\d:\d\d GMT")  # fmt: skip
JOB_ID = re.compile(r"\d{7}-\d{15}-oozie-oozi-W")
XML = {"Content-Type": "application/xml;charset=UTF-8"}


# -- fixtures and helpers -------------------------------------------------------------
@pytest.fixture
async def emu(tmp_path: Path) -> AsyncIterator[Emulator]:
    e = await start_emulator(tmp_path / "hdfs", faults={"notification_retry_delay": 0.1})
    try:
        yield e
    finally:
        await e.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class Receiver:
    """A notification endpoint: records every GET; answers ``codes`` in turn, then ``default``."""

    def __init__(self) -> None:
        self.hits: list[tuple[float, str]] = []
        self.codes: list[int] = []
        self.default = 200
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits.append((time.time(), request.raw_path))
        return web.Response(status=self.codes.pop(0) if self.codes else self.default, text="ok")

    def paths(self, prefix: str = "") -> list[str]:
        return [p for _, p in self.hits if p.startswith(prefix)]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_get("/{tail:.*}", rec.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rec.url = f"http://127.0.0.1:{port}"
    try:
        yield rec
    finally:
        await runner.cleanup()


@pytest.fixture(scope="session")
def synth_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/jobs/java/Synth.java compiled into a jar."""
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.fail("javac and jar are needed to build the java action")
    d = tmp_path_factory.mktemp("java")
    subprocess.run(["javac", "-d", str(d / "classes"), str(JOBS / "java" / "Synth.java")], check=True)
    subprocess.run(["jar", "cf", str(d / "synth.jar"), "-C", str(d / "classes"), "."], check=True)
    return d / "synth.jar"


async def eventually(check: Callable[[], Awaitable[Any] | Any], timeout: float = 15.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.02)


def base(emu: Emulator) -> str:
    return emu.oozie_url.removesuffix("/oozie")


def put_hdfs(emu: Emulator, path: str, data: bytes | str) -> None:
    """Set up a file in the namespace directly on disk."""
    local = emu.namespace.local(path)
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(data.encode() if isinstance(data, str) else data)


def workflow(action: str, name: str = "wf", kill_message: str | None = None) -> str:
    message = kill_message or "Action failed, error message[${wf:errorMessage(wf:lastErrorNode())}]"
    return f"""<?xml version='1.0' encoding='utf-8'?>
<workflow-app xmlns="uri:oozie:workflow:0.5" name="{name}">
  <start to="node"/>
  <action name="node">
    {action}
    <ok to="end"/>
    <error to="fail"/>
  </action>
  <kill name="fail"><message>{message}</message></kill>
  <end name="end"/>
</workflow-app>
"""


def shell(exec_: str, *args: str, files: tuple[str, ...] = (), env: tuple[str, ...] = (), extra: str = "") -> str:
    parts = [f"<exec>{escape(exec_)}</exec>"]
    parts += [f"<argument>{escape(a)}</argument>" for a in args]
    parts += [f"<env-var>{escape(e)}</env-var>" for e in env]
    parts += [f"<file>{escape(f)}</file>" for f in files]
    return (
        '<shell xmlns="uri:oozie:shell-action:0.3"><job-tracker>${jobTracker}</job-tracker>'
        f"<name-node>${{nameNode}}</name-node>{extra}{''.join(parts)}</shell>"
    )


def java(main: str, *args: str, opts: str = "", extra: str = "") -> str:
    body = f"<main-class>{main}</main-class>"
    if opts:
        body += f"<java-opts>{escape(opts)}</java-opts>"
    body += "".join(f"<arg>{escape(a)}</arg>" for a in args)
    return f"<java><job-tracker>${{jobTracker}}</job-tracker><name-node>${{nameNode}}</name-node>{extra}{body}</java>"


def conf_xml(props: dict[str, str]) -> str:
    rows = "".join(f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>" for k, v in props.items())
    return f"<?xml version='1.0' encoding='UTF-8'?><configuration>{rows}</configuration>"


def app_props(emu: Emulator, app: str, **extra: str) -> dict[str, str]:
    return {
        "user.name": "svc",
        "oozie.wf.application.path": f"hdfs://namenode.example:8020{app}",
        "nameNode": emu.hdfs_uri,
        "jobTracker": "rm.example:8032",
        "queueName": "default",
        **extra,
    }


async def submit(
    http: aiohttp.ClientSession, emu: Emulator, props: dict[str, str], start: bool = True, user: str | None = "svc"
) -> aiohttp.ClientResponse:
    params = {"action": "start"} if start else {}
    if user:
        params["user.name"] = user
    resp = await http.post(f"{emu.oozie_url}/v1/jobs", params=params, data=conf_xml(props), headers=XML)
    await resp.read()
    return resp


async def run_app(
    http: aiohttp.ClientSession, emu: Emulator, app: str, action: str, start: bool = True, **extra: str
) -> str:
    """Write ``<app>/workflow.xml`` around ``action`` and submit it; the job id."""
    put_hdfs(emu, f"{app}/workflow.xml", workflow(action))
    resp = await submit(http, emu, app_props(emu, app, **extra), start=start)
    assert resp.status == 201, await resp.text()
    return (await resp.json())["id"]


async def status(http: aiohttp.ClientSession, emu: Emulator, job_id: str) -> str:
    async with http.get(f"{emu.oozie_url}/v2/job/{job_id}", params={"show": "status"}) as resp:
        assert resp.status == 200
        return (await resp.json())["status"]


async def info(http: aiohttp.ClientSession, emu: Emulator, job_id: str, version: int = 1) -> dict[str, Any]:
    async with http.get(f"{emu.oozie_url}/v{version}/job/{job_id}", params={"show": "info"}) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def wait_status(http: aiohttp.ClientSession, emu: Emulator, job_id: str, wanted: set[str] = TERMINAL) -> str:
    async def check() -> str | None:
        s = await status(http, emu, job_id)
        return s if s in wanted else None

    return await eventually(check, what=f"{job_id} in {wanted}")


def node(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in job["actions"] if a["name"] == name)


async def assert_oozie_error(resp: aiohttp.ClientResponse, status_: int, code: str, text: str | None = None) -> str:
    """The error headers, and the 5.x JSON body; the message."""
    assert resp.status == status_, (resp.status, await resp.text())
    assert resp.headers["oozie-error-code"] == code
    message = resp.headers["oozie-error-message"]
    assert message.startswith(f"{code}: ")
    if text is not None:
        assert text in message, message
    body = await resp.json()
    assert set(body) == {"httpStatusCode", "errorMessage"}
    assert body["httpStatusCode"] == status_
    return message


async def remote_exception(resp: aiohttp.ClientResponse, status_: int, exception: str) -> str:
    assert resp.status == status_, (resp.status, await resp.text())
    body = await resp.json(content_type=None)
    assert set(body) == {"RemoteException"}
    assert set(body["RemoteException"]) == {"exception", "javaClassName", "message"}
    assert body["RemoteException"]["exception"] == exception
    assert body["RemoteException"]["javaClassName"].endswith("." + exception)
    return body["RemoteException"]["message"]


async def faults(http: aiohttp.ClientSession, emu: Emulator, **patch: Any) -> dict[str, Any]:
    async with http.put(f"{base(emu)}/emulator/faults", json=patch) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def stats(http: aiohttp.ClientSession, emu: Emulator) -> dict[str, Any]:
    async with http.get(f"{base(emu)}/emulator/stats") as resp:
        assert resp.status == 200
        return await resp.json()


def wf_url(rec: Receiver) -> str:
    return f"{rec.url}/wf?id=$jobId&status=$status&parent=$parentId"


# -- Oozie: routing and the error model -----------------------------------------------
async def test_versions_and_bad_methods(emu: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{emu.oozie_url}/versions") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == 'application/json; charset="UTF-8"'
        assert await resp.json() == [0, 1, 2]
    async with http.post(f"{emu.oozie_url}/versions") as resp:
        await assert_oozie_error(resp, 400, "E0301")
    async with http.delete(f"{emu.oozie_url}/v1/jobs") as resp:
        await assert_oozie_error(resp, 400, "E0301", "Invalid resource")
    async with http.post(f"{emu.oozie_url}/v2/job/0000000-000000000000000-oozie-oozi-W") as resp:
        await assert_oozie_error(resp, 400, "E0301")
    async with http.put(f"{emu.oozie_url}/v1/job/0000000-000000000000000-oozie-oozi-W") as resp:
        await assert_oozie_error(resp, 400, "E0305", "Missing parameter [action]")
    async with http.put(f"{emu.oozie_url}/v1/job/x-W", params={"action": "explode"}) as resp:
        await assert_oozie_error(resp, 400, "E0303", "Invalid parameter value, [action] = [explode]")
    async with http.get(f"{emu.oozie_url}/v1/job/x-W", params={"show": "everything"}) as resp:
        await assert_oozie_error(resp, 400, "E0303", "[show] = [everything]")
    missing = "0000042-200101000000000-oozie-oozi-W"
    for version in (1, 2):
        async with http.get(f"{emu.oozie_url}/v{version}/job/{missing}", params={"show": "info"}) as resp:
            message = await assert_oozie_error(resp, 400, "E0604")
            assert message == f"E0604: Job does not exist [{missing}]"
    # v2 show=status reads the job through a query whose missing row is E0605 (DagEngine.getJobStatus).
    async with http.get(f"{emu.oozie_url}/v2/job/{missing}", params={"show": "status"}) as resp:
        await assert_oozie_error(resp, 400, "E0605")


async def test_submit_checks_in_order(emu: Emulator, http: aiohttp.ClientSession) -> None:
    url = f"{emu.oozie_url}/v1/jobs"
    props = app_props(emu, "/apps/a")
    # Content type first.
    async with http.post(url, data=conf_xml(props).encode(), skip_auto_headers=["Content-Type"]) as resp:
        await assert_oozie_error(resp, 400, "E0300", "Invalid content-type [null]")
    async with http.post(url, data=conf_xml(props), headers={"Content-Type": "text/plain"}) as resp:
        await assert_oozie_error(resp, 400, "E0300", "Invalid content-type [text/plain]")
    # Malformed XML, or another root: a 500 without the Oozie headers.
    for body in ("<configuration><property>", "<conf/>"):
        async with http.post(url, data=body, headers=XML) as resp:
            assert resp.status == 500
            assert "oozie-error-code" not in resp.headers
    # No application path.
    resp = await submit(http, emu, {"user.name": "svc"})
    await assert_oozie_error(resp, 400, "E0302")
    # No user at all.
    resp = await submit(http, emu, {"oozie.wf.application.path": "/apps/a"}, user=None)
    await assert_oozie_error(resp, 400, "E0401", "Missing configuration property [user.name]")
    # The app dir, then workflow.xml, must exist in the emulated HDFS: 401.
    resp = await submit(http, emu, props)
    await assert_oozie_error(resp, 401, "E0504", "App directory [hdfs://namenode.example:8020/apps/a] does not exist")
    emu.namespace.local("/apps/a").mkdir(parents=True)
    resp = await submit(http, emu, props)
    await assert_oozie_error(resp, 401, "E0505", "App definition [hdfs://namenode.example:8020/apps/a/workflow.xml]")
    put_hdfs(emu, "/apps/a/workflow.xml", workflow(shell("true")))
    resp = await submit(http, emu, props, start=False)
    assert resp.status == 201
    body = await resp.json()
    assert set(body) == {"id"} and JOB_ID.fullmatch(body["id"])
    # Unknown submit action.
    async with http.post(url, params={"action": "go"}, data=conf_xml(props), headers=XML) as resp:
        await assert_oozie_error(resp, 400, "E0303")


async def test_query_user_overrides_conf_and_app_path_forms(emu: Emulator, http: aiohttp.ClientSession) -> None:
    put_hdfs(emu, "/apps/u/workflow.xml", workflow(shell("true")))
    put_hdfs(emu, "/apps/u/other.xml", workflow(shell("true"), name="other"))
    props = {**app_props(emu, "/apps/u"), "user.name": "alice"}
    resp = await submit(http, emu, props, start=False, user="bob")
    job = await info(http, emu, (await resp.json())["id"])
    assert job["user"] == "bob"
    conf = {p.findtext("name"): p.findtext("value") for p in ET.fromstring(job["conf"]).iter("property")}
    assert conf["user.name"] == "bob"
    # A plain path, and an app path naming the .xml file itself.
    for path, name in (("/apps/u", "wf"), ("hdfs://elsewhere:9000/apps/u/other.xml", "other")):
        resp = await submit(http, emu, {**props, "oozie.wf.application.path": path}, start=False)
        assert resp.status == 201
        assert (await info(http, emu, (await resp.json())["id"]))["appName"] == name


async def test_prep_start_and_synchronous_running(emu: Emulator, http: aiohttp.ClientSession) -> None:
    await faults(http, emu, hang_actions="^sleepy")
    job_id = await run_app(http, emu, "/apps/p", shell("sleepy"), start=False)
    job = await info(http, emu, job_id)
    assert job["status"] == "PREP" and job["actions"] == [] and job["startTime"] is None
    async with http.put(f"{emu.oozie_url}/v2/job/{job_id}", params={"action": "start"}) as resp:
        assert resp.status == 200 and await resp.read() == b""
    # Started synchronously: RUNNING as soon as the PUT returns, :start: done, the action created.
    job = await info(http, emu, job_id)
    assert job["status"] == "RUNNING"
    start = node(job, ":start:")
    assert (start["type"], start["status"], start["transition"]) == (":START:", "OK", "node")
    assert node(job, "node")["status"] in ("PREP", "RUNNING")
    async with http.put(f"{emu.oozie_url}/v2/job/{job_id}", params={"action": "start"}) as resp:
        await assert_oozie_error(resp, 400, "E0801", f"Workflow already running, workflow [{job_id}]")
    # POST ?action=start: RUNNING right after the 201.
    started = await run_app(http, emu, "/apps/p2", shell("sleepy"))
    assert await status(http, emu, started) == "RUNNING"


async def test_external_id_lookup(emu: Emulator, http: aiohttp.ClientSession) -> None:
    put_hdfs(emu, "/apps/e/workflow.xml", workflow(shell("true")))
    props = app_props(emu, "/apps/e", **{"oozie.wf.external.id": "req-42"})
    first = (await (await submit(http, emu, props, start=False)).json())["id"]
    async with http.get(f"{emu.oozie_url}/v1/jobs", params={"external-id": "req-42", "jobtype": "wf"}) as resp:
        assert resp.status == 200 and await resp.json() == {"id": first}
    async with http.get(f"{emu.oozie_url}/v1/jobs", params={"external-id": "nope"}) as resp:
        assert resp.status == 200 and await resp.json() == {"id": ""}
    assert (await info(http, emu, first))["externalId"] == "req-42"
    # No uniqueness check at submit; the lookup returns the newest.
    second = (await (await submit(http, emu, props, start=False)).json())["id"]
    async with http.get(f"{emu.oozie_url}/v2/jobs", params={"external-id": "req-42"}) as resp:
        assert await resp.json() == {"id": second}
    assert (await stats(http, emu))["submissions"] == {"req-42": 2}


async def test_job_logs_are_text_and_the_error_log_is_v2_only(emu: Emulator, http: aiohttp.ClientSession) -> None:
    """As Oozie's servlets: show=log on v1 and v2, show=errorlog and show=auditlog on v2 only
    (v1 answers E0302 whether or not the job exists), all as text/plain; charset="UTF-8"."""
    job_id = await run_app(http, emu, "/apps/logs", shell("sh", "-c", "echo to-out; echo to-err >&2"))
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"
    for version, show in ((1, "log"), (2, "log"), (2, "errorlog"), (2, "auditlog")):
        async with http.get(f"{emu.oozie_url}/v{version}/job/{job_id}", params={"show": show}) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"] == 'text/plain; charset="UTF-8"'
            text = await resp.text()
        assert ("to-err" in text) == (show != "auditlog") and ("to-out" in text) == (show == "log"), (show, text)
    for show in ("errorlog", "auditlog"):
        for job in (job_id, "0000099-000000000000000-oozie-oozi-W"):
            async with http.get(f"{emu.oozie_url}/v1/job/{job}", params={"show": show}) as resp:
                await assert_oozie_error(resp, 400, "E0302", "Invalid parameter [Not supported in v1]")


async def test_show_status_v2_only_and_info_shape(emu: Emulator, http: aiohttp.ClientSession) -> None:
    job_id = await run_app(http, emu, "/apps/s", shell("true"))
    async with http.get(f"{emu.oozie_url}/v1/job/{job_id}", params={"show": "status"}) as resp:
        await assert_oozie_error(resp, 400, "E0302", "Invalid parameter [Not supported in this version]")
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"
    async with http.get(f"{emu.oozie_url}/v2/job/{job_id}", params={"show": "status"}) as resp:
        assert await resp.json() == {"status": "SUCCEEDED"}
    for version in (1, 2):
        job = await info(http, emu, job_id, version)
        assert set(job) == JOB_KEYS
        assert [a["name"] for a in job["actions"]] == [":start:", "node", "end"]
        assert [a["type"] for a in job["actions"]] == [":START:", "shell", ":END:"]
        for a in job["actions"]:
            assert set(a) == ACTION_KEYS
            assert a["id"] == f"{job_id}@{a['name']}"
            assert RFC822.fullmatch(a["startTime"]) and RFC822.fullmatch(a["endTime"])
        for key in ("createdTime", "startTime", "endTime", "lastModTime"):
            assert RFC822.fullmatch(job[key]), job[key]
        assert job["toString"] == f"Workflow id[{job_id}] status[SUCCEEDED]"
        assert ET.fromstring(job["conf"]).tag == "configuration"
        assert job["run"] == 0 and job["parentId"] is None and job["appPath"].endswith("/apps/s")
        action = node(job, "node")
        assert (action["status"], action["externalStatus"], action["transition"]) == ("OK", "SUCCEEDED", "end")
        assert re.fullmatch(r"application_\d{13}_\d{4}", action["externalId"])
        assert action["trackerUri"] == "rm.example:8032" and action["errorCode"] is None
        end = node(job, "end")
        assert (end["status"], end["externalId"], end["externalStatus"], end["transition"]) == ("OK", "-", "OK", None)
    # One action by its id; an unknown node of a known job.
    async with http.get(f"{emu.oozie_url}/v1/job/{job_id}@node", params={"show": "info"}) as resp:
        assert set(await resp.json()) == ACTION_KEYS
    async with http.get(f"{emu.oozie_url}/v1/job/{job_id}@nothere") as resp:
        await assert_oozie_error(resp, 400, "E0605")
    async with http.get(f"{emu.oozie_url}/v1/job/{job_id}", params={"show": "definition"}) as resp:
        assert resp.status == 200 and "<workflow-app" in await resp.text()


# -- actions that run -----------------------------------------------------------------
async def test_shell_action_runs_with_exactly_its_arguments(
    emu: Emulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    put_hdfs(emu, "/apps/sh/synth.py", (JOBS / "synth.py").read_bytes())
    exec_log = tmp_path / "exec.log"
    label = "a label & <tags> with  spaces"
    action = shell(
        "synth.py", label, "0", "1", "/data/out",
        files=("synth.py",), env=(f"PINGO_EXEC_LOG={exec_log}", "EXTRA=x=y"),
    )  # fmt: skip
    job_id = await run_app(http, emu, "/apps/sh", action)
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"
    # The job wrote its output into the namespace through PINGO_EMULATOR_HDFS_ROOT.
    assert (emu.root / "data/out/_lineage").read_text() == f"{label}\n"
    assert (emu.root / "data/out/part-00000").stat().st_size == 1024
    # OOZIE_JOB_ID and the env-var entries reached the process.
    assert exec_log.read_text() == f"{job_id} {label}\n"
    work = emu.work_dir / job_id / "node-1"
    assert (work / "argv").read_text().splitlines() == [str(work / "synth.py"), label, "0", "1", "/data/out"]
    action_conf = ET.parse(work / "action.xml").getroot()
    assert action_conf.tag == "configuration"
    assert not str(emu.work_dir).startswith(str(emu.root))  # working dirs are outside the namespace
    assert (await stats(http, emu))["executions"] == {job_id: 1}


async def test_prepare_runs_before_the_action(emu: Emulator, http: aiohttp.ClientSession) -> None:
    put_hdfs(emu, "/out/old/part-00000", b"stale")
    prepare = '<prepare><delete path="${nameNode}/out/old"/><mkdir path="${nameNode}/out/new"/></prepare>'
    job_id = await run_app(http, emu, "/apps/pr", shell("true", extra=prepare))
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"
    assert not (emu.root / "out/old").exists() and (emu.root / "out/new").is_dir()


async def test_shell_exit_n_ends_killed_through_the_kill_node(emu: Emulator, http: aiohttp.ClientSession) -> None:
    put_hdfs(emu, "/apps/f/synth.py", (JOBS / "synth.py").read_bytes())
    # synth.py exits 3 when an input has no part-00000.
    job_id = await run_app(
        http, emu, "/apps/f", shell("synth.py", "x", "0", "1", "/missing", "/out", files=("/apps/f/synth.py#synth.py",))
    )
    assert await wait_status(http, emu, job_id) == "KILLED"
    job = await info(http, emu, job_id)
    action = node(job, "node")
    assert action["status"] == "ERROR"
    # As Apache Oozie 5.2.1 answers: ShellMain's launcher exits 1 whatever the command's code.
    assert action["errorCode"] == "1"
    assert action["errorMessage"] == "Main Class [org.apache.oozie.action.hadoop.ShellMain], exit code [1]"
    assert action["transition"] == "fail" and action["externalStatus"] == "FAILED/KILLED"
    kill = node(job, "fail")
    assert (kill["type"], kill["status"], kill["errorCode"]) == (":KILL:", "OK", "E0729")
    assert kill["errorMessage"] == f"Action failed, error message[{action['errorMessage']}]"
    assert [a["name"] for a in job["actions"]] == [":start:", "node", "fail"]
    # The launcher's stderr is in the job log, and the command's own exit code.
    async with http.get(f"{emu.oozie_url}/v1/job/{job_id}", params={"show": "log"}) as resp:
        log = await resp.text()
    assert "has no part-00000" in log and "exited with code 3" in log


async def test_java_action_from_lib_and_libpath(emu: Emulator, http: aiohttp.ClientSession, synth_jar: Path) -> None:
    put_hdfs(emu, "/apps/j1/lib/synth.jar", synth_jar.read_bytes())
    put_hdfs(emu, "/shared/jars/synth.jar", synth_jar.read_bytes())
    main = "org.pingo.examples.Synth"
    jobs = {
        "lib": await run_app(http, emu, "/apps/j1", java(main, "from lib", "/in/a", "/out/j1",
                                                          opts="-Dpingo.greeting=hello -Xmx64m")),
        "libpath": await run_app(http, emu, "/apps/j2", java(main, "from libpath", "/out/j2"),
                                 **{"oozie.libpath": "hdfs://nn:8020/shared/jars"}),
        "exit2": await run_app(http, emu, "/apps/j3", java(main, "only-one-arg"),
                               **{"oozie.libpath": "/shared/jars"}),
    }  # fmt: skip
    done = {k: await wait_status(http, emu, v) for k, v in jobs.items()}
    assert done == {"lib": "SUCCEEDED", "libpath": "SUCCEEDED", "exit2": "KILLED"}
    assert (emu.root / "out/j1/part-00000").read_text() == "from lib\nhello\n/in/a\n"
    assert (emu.root / "out/j2/part-00000").read_text() == "from libpath\n-\n"
    failed = node(await info(http, emu, jobs["exit2"]), "node")
    assert (failed["status"], failed["errorCode"]) == ("ERROR", "2")
    assert failed["errorMessage"] == f"Main Class [{main}], exit code [2]"
    assert failed["type"] == "java" and failed["transition"] == "fail"


def map_reduce(mapper: str, inputs: str, output: str, reducer: str | None = None, files: tuple[str, ...] = ()) -> str:
    stream = f"<mapper>{escape(mapper)}</mapper>" + (f"<reducer>{escape(reducer)}</reducer>" if reducer else "")
    props = conf_xml({"mapred.input.dir": inputs, "mapred.output.dir": output}).split("?>", 1)[1]
    return (
        "<map-reduce><job-tracker>${jobTracker}</job-tracker><name-node>${nameNode}</name-node>"
        f"<streaming>{stream}</streaming>{props}{''.join(f'<file>{escape(f)}</file>' for f in files)}</map-reduce>"
    )


async def test_streaming_map_reduce_actions(emu: Emulator, http: aiohttp.ClientSession) -> None:
    """A <map-reduce> with <streaming>: the mapper line split as Hadoop streaming splits it
    (a quoted space is one argument), hidden inputs skipped, the records sorted by key; a
    failing task fails the action as StreamingMain; the output folder is made as the job's user."""
    put_hdfs(emu, "/data/in/a.txt", "pear tree\napple pie\npear jam\n")
    put_hdfs(emu, "/data/in/_SUCCESS", "")
    put_hdfs(emu, "/data/in/.a.txt.crc", "not words")
    jobs = {
        "cut": await run_app(http, emu, "/apps/mr1", map_reduce("cut -d ' ' -f 1", "/data/in", "/out/mr1")),
        "fails": await run_app(http, emu, "/apps/mr2", map_reduce("false", "/data/in", "/out/mr2")),
    }
    done = {k: await wait_status(http, emu, v) for k, v in jobs.items()}
    assert done == {"cut": "SUCCEEDED", "fails": "KILLED"}
    assert (emu.root / "out/mr1/part-00000").read_text() == "apple\t\npear\t\npear\t\n"
    assert (emu.root / "out/mr1/_SUCCESS").is_file()
    # Named by the MapReduce job the launcher submitted, as Apache Oozie 5.2.1 names it.
    assert re.fullmatch(r"job_\d{13}_\d{4}", node(await info(http, emu, jobs["cut"]), "node")["externalId"])
    failed = node(await info(http, emu, jobs["fails"]), "node")
    assert (failed["status"], failed["errorCode"], failed["type"]) == ("ERROR", "1", "map-reduce")
    assert failed["errorMessage"] == "Main Class [org.apache.oozie.action.hadoop.StreamingMain], exit code [1]"
    # With HDFS permissions checked, an output where the job's user may not write is refused.
    await faults(http, emu, hdfs_permissions=True)
    emu.namespace.mkdirs("/projects/bio", "bob")
    job = await run_app(http, emu, "/apps/mr3", map_reduce("cat", "/data/in", "/projects/bio/out"))
    assert await wait_status(http, emu, job) == "KILLED"
    refused = node(await info(http, emu, job), "node")
    assert refused["errorCode"] == "JA009" and "Permission denied: user=svc, access=WRITE" in refused["errorMessage"]
    assert not (emu.root / "projects/bio/out").exists()


async def test_kill_terminates_the_process_and_other_silent_noops(
    emu: Emulator, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    job_id = await run_app(http, emu, "/apps/k", shell("sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"))
    pid = int(await eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the pid"))
    assert await status(http, emu, job_id) == "RUNNING"
    # Suspend and resume work on a running job; resume of a running job is a silent no-op.
    for act, expected in (("resume", "RUNNING"), ("suspend", "SUSPENDED"), ("suspend", "SUSPENDED"),
                          ("resume", "RUNNING")):  # fmt: skip
        async with http.put(f"{emu.oozie_url}/v1/job/{job_id}", params={"action": act}) as resp:
            assert resp.status == 200
        assert await status(http, emu, job_id) == expected
    async with http.put(f"{emu.oozie_url}/v2/job/{job_id}", params={"action": "kill"}) as resp:
        assert resp.status == 200
    job = await info(http, emu, job_id)
    assert job["status"] == "KILLED" and job["endTime"] is not None
    assert (node(job, "node")["status"], node(job, "node")["externalStatus"]) == ("KILLED", "KILLED")

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    await eventually(gone, what="the action process to end")
    # Kill, suspend, resume, start on a terminal job: 200 and nothing changes.
    before = await info(http, emu, job_id)
    for act in ("kill", "suspend", "resume", "start"):
        async with http.put(f"{emu.oozie_url}/v2/job/{job_id}", params={"action": act}) as resp:
            assert resp.status == 200, act
    assert await info(http, emu, job_id) == before
    # Kill of an unknown job: 400.
    async with http.put(f"{emu.oozie_url}/v2/job/0000099-000000000000000-oozie-oozi-W", params={"action": "kill"}) as r:
        assert r.status == 400 and r.headers["oozie-error-code"] in ("E0604", "E0605")


async def test_suspend_of_prep_is_a_noop_and_kill_of_prep(emu: Emulator, http: aiohttp.ClientSession) -> None:
    job_id = await run_app(http, emu, "/apps/np", shell("true"), start=False)
    for act in ("suspend", "resume"):
        async with http.put(f"{emu.oozie_url}/v1/job/{job_id}", params={"action": act}) as resp:
            assert resp.status == 200
        assert await status(http, emu, job_id) == "PREP"
    async with http.put(f"{emu.oozie_url}/v1/job/{job_id}", params={"action": "kill"}) as resp:
        assert resp.status == 200
    assert await status(http, emu, job_id) == "KILLED"


# -- listing --------------------------------------------------------------------------
async def test_jobs_listing_and_strict_filters(emu: Emulator, http: aiohttp.ClientSession) -> None:
    put_hdfs(emu, "/apps/l/workflow.xml", workflow(shell("true"), name="listed"))
    ids = []
    for user in ("ann", "bob", "ann"):
        resp = await submit(http, emu, app_props(emu, "/apps/l"), start=False, user=user)
        ids.append((await resp.json())["id"])
    async with http.get(f"{emu.oozie_url}/v1/jobs") as resp:
        body = await resp.json()
    assert set(body) == {"workflows", "total", "offset", "len"}
    assert (body["total"], body["offset"], body["len"]) == (3, 1, 50)
    assert [w["id"] for w in body["workflows"]] == ids[::-1]  # newest first
    for w in body["workflows"]:
        assert set(w) == JOB_KEYS
        assert w["appPath"] is None and w["conf"] is None and w["actions"] == []
        assert w["appName"] == "listed" and w["status"] == "PREP"
    async with http.get(f"{emu.oozie_url}/v1/jobs", params={"offset": "2", "len": "1"}) as resp:
        page = await resp.json()
    assert (page["total"], page["offset"], page["len"], [w["id"] for w in page["workflows"]]) == (3, 2, 1, [ids[1]])
    cases = {
        "user=ann": {ids[0], ids[2]},
        "user=ann;user=bob": set(ids),
        "user=bob;status=PREP": {ids[1]},
        "USER=bob;status=RUNNING": set(),
        "name=listed;id=" + ids[0]: {ids[0]},
    }
    for flt, expected in cases.items():
        async with http.get(f"{emu.oozie_url}/v2/jobs", params={"filter": flt}) as resp:
            assert resp.status == 200, flt
            assert {w["id"] for w in (await resp.json())["workflows"]} == expected, flt
    for bad in ("status=running", "colour=red", "user", "user=a=b"):
        async with http.get(f"{emu.oozie_url}/v1/jobs", params={"filter": bad}) as resp:
            await assert_oozie_error(resp, 400, "E0420", f"Invalid jobs filter [{bad}]")
    async with http.get(f"{emu.oozie_url}/v1/jobs", params={"len": "many"}) as resp:
        await assert_oozie_error(resp, 400, "E1603")
    async with http.get(f"{emu.oozie_url}/v1/jobs", params={"jobtype": "coordinator"}) as resp:
        assert set(await resp.json()) == {"coordinatorjobs", "total", "offset", "len"}


# -- workflow definitions -------------------------------------------------------------
async def test_workflow_schema_errors(emu: Emulator, http: aiohttp.ClientSession) -> None:
    wrong = {
        "no main-class": java("", "x").replace("<main-class></main-class>", ""),
        "arg before main-class": "<java><job-tracker>a</job-tracker><arg>x</arg><main-class>M</main-class></java>",
        "no exec": '<shell xmlns="uri:oozie:shell-action:0.3"><argument>x</argument></shell>',
        "java-opts and java-opt": "<java><main-class>M</main-class><java-opts>-Da=1</java-opts>"
        "<java-opt>-Db=2</java-opt></java>",
        "streaming after configuration": "<map-reduce><configuration><property><name>a</name><value>1</value>"
        "</property></configuration><streaming><mapper>cat</mapper></streaming></map-reduce>",
        "reducer before mapper": "<map-reduce><streaming><reducer>wc</reducer><mapper>cat</mapper></streaming>"
        "</map-reduce>",
        "spark without jar": '<spark xmlns="uri:oozie:spark-action:0.2"><master>yarn</master><name>n</name></spark>',
        "spark name before master": '<spark xmlns="uri:oozie:spark-action:0.2"><name>n</name><master>yarn</master>'
        "<jar>a.py</jar></spark>",
    }
    for i, (why, action) in enumerate(wrong.items()):
        put_hdfs(emu, f"/apps/bad{i}/workflow.xml", workflow(action))
        resp = await submit(http, emu, app_props(emu, f"/apps/bad{i}"))
        assert resp.status == 400, why
        await assert_oozie_error(resp, 400, "E0701", "XML schema error, ")
    # A type the emulator does not run (Oozie runs pig with its share lib).
    put_hdfs(emu, "/apps/pig/workflow.xml", workflow("<pig><job-tracker>a</job-tracker><script>x.pig</script></pig>"))
    await assert_oozie_error(await submit(http, emu, app_props(emu, "/apps/pig")), 400, "E0723")
    put_hdfs(emu, "/apps/tr/workflow.xml", workflow(shell("true")).replace('<ok to="end"/>', '<ok to="nowhere"/>'))
    await assert_oozie_error(await submit(http, emu, app_props(emu, "/apps/tr")), 400, "E0708")
    put_hdfs(emu, "/apps/mal/workflow.xml", "<workflow-app")
    await assert_oozie_error(await submit(http, emu, app_props(emu, "/apps/mal")), 400, "E0701")
    assert emu.engine.jobs == {}


async def test_runtime_failures_undefined_variable_disallowed_property_missing_file(
    emu: Emulator, http: aiohttp.ClientSession
) -> None:
    undefined = await run_app(http, emu, "/apps/u1", shell("echo", "${notDefined}"))
    disallowed = await run_app(
        http,
        emu,
        "/apps/u2",
        shell(
            "true", extra="<configuration><property><name>user.name</name><value>x</value></property></configuration>"
        ),
    )
    missing = await run_app(http, emu, "/apps/u3", shell("run.sh", files=("run.sh",)))
    assert await wait_status(http, emu, undefined) == "FAILED"
    a = node(await info(http, emu, undefined), "node")
    assert (a["status"], a["errorCode"], a["errorMessage"]) == ("FAILED", "EL_ERROR", "variable [notDefined] cannot be "
                                                                "resolved")  # fmt: skip
    assert await wait_status(http, emu, disallowed) == "FAILED"
    assert node(await info(http, emu, disallowed), "node")["errorCode"] == "JA010"
    assert await wait_status(http, emu, missing) == "KILLED"
    a = node(await info(http, emu, missing), "node")
    assert (a["status"], a["errorCode"]) == ("ERROR", "JA008")
    assert "/apps/u3/run.sh" in a["errorMessage"]
    assert (await stats(http, emu))["executions"] == {}


async def test_rerun_failed_nodes(emu: Emulator, http: aiohttp.ClientSession) -> None:
    await faults(http, emu, fail_actions="flaky")
    props = app_props(emu, "/apps/r")
    job_id = await run_app(http, emu, "/apps/r", shell("echo", "flaky"))
    assert await wait_status(http, emu, job_id) == "KILLED"
    await faults(http, emu, fail_actions=None)
    async with http.put(f"{emu.oozie_url}/v1/job/{job_id}", params={"action": "rerun"},
                        data=conf_xml({**props, "oozie.wf.rerun.failnodes": "true"}), headers=XML) as resp:  # fmt: skip
        assert resp.status == 200, await resp.text()
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"
    assert (await info(http, emu, job_id))["run"] == 1
    async with http.put(f"{emu.oozie_url}/v1/job/{job_id}", params={"action": "rerun"},
                        data=conf_xml({**props, "oozie.wf.rerun.failnodes": "true",
                                       "oozie.wf.rerun.skip.nodes": "node"}), headers=XML) as resp:  # fmt: skip
        await assert_oozie_error(resp, 400, "E0404")


# -- notifications --------------------------------------------------------------------
async def test_notification_tokens_and_action_url(
    emu: Emulator, http: aiohttp.ClientSession, receiver: Receiver
) -> None:
    job_id = await run_app(
        http, emu, "/apps/n", shell("true"),
        **{"oozie.wf.workflow.notification.url": wf_url(receiver),
           "oozie.wf.action.notification.url": f"{receiver.url}/act?id=$jobId&node=$nodeName&status=$status"},
    )  # fmt: skip
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"
    await eventually(lambda: len(receiver.paths("/wf")) == 2 and len(receiver.paths("/act")) == 4)
    # GETs with the tokens replaced as they are (no encoding); the order is not guaranteed.
    assert sorted(receiver.paths("/wf")) == [
        f"/wf?id={job_id}&status=RUNNING&parent=",
        f"/wf?id={job_id}&status=SUCCEEDED&parent=",
    ]
    assert sorted(receiver.paths("/act")) == [
        f"/act?id={job_id}&node=:start:&status=T:node",
        f"/act?id={job_id}&node=end&status=T:null",
        f"/act?id={job_id}&node=node&status=S:RUNNING",
        f"/act?id={job_id}&node=node&status=T:end",
    ]


async def test_notification_retry_rule(emu: Emulator, http: aiohttp.ClientSession, receiver: Receiver) -> None:
    # Two failures (a 500, then a 201: only 200 counts), then a 200: delivered on the 3rd attempt.
    receiver.codes = [500, 201]
    job_id = await run_app(
        http, emu, "/apps/nr", shell("true"), **{"oozie.wf.workflow.notification.url": f"{receiver.url}/only?s=$status"}
    )
    await wait_status(http, emu, job_id)
    await eventually(lambda: emu.stats()["notifications"]["delivered"] == 2, what="2 deliveries")
    s = emu.stats()["notifications"]
    assert (s["sent"], s["failedAttempts"], s["retried"], s["gaveUp"]) == (4, 2, 2, 0)
    # Never a 200: 1 attempt + 3 retries, then given up.
    receiver.default = 503
    job2 = await run_app(
        http,
        emu,
        "/apps/nr2",
        shell("true"),
        **{"oozie.wf.workflow.notification.url": f"{receiver.url}/never?s=$status"},
    )
    await wait_status(http, emu, job2)
    await eventually(lambda: emu.stats()["notifications"]["gaveUp"] == 2, what="2 notifications given up")
    never = receiver.paths("/never")
    assert sorted(never) == sorted(["/never?s=RUNNING"] * 4 + ["/never?s=SUCCEEDED"] * 4)
    await asyncio.sleep(0.3)  # 3 retry delays: nothing more comes
    assert len(receiver.paths("/never")) == 8


async def test_fault_drop_and_duplicate(emu: Emulator, http: aiohttp.ClientSession, receiver: Receiver) -> None:
    await faults(http, emu, drop_next_notifications=1)
    url = {"oozie.wf.workflow.notification.url": wf_url(receiver)}
    job_id = await run_app(http, emu, "/apps/d1", shell("true"), **url)
    await wait_status(http, emu, job_id)
    await eventually(lambda: receiver.paths("/wf"))
    assert receiver.paths("/wf") == [f"/wf?id={job_id}&status=SUCCEEDED&parent="]  # RUNNING was lost
    assert (await faults(http, emu))["drop_next_notifications"] == 0
    await faults(http, emu, drop_notifications=1.0)
    job2 = await run_app(http, emu, "/apps/d2", shell("true"), **url)
    await wait_status(http, emu, job2)
    await faults(http, emu, drop_notifications=0.0, duplicate_notifications=2)
    job3 = await run_app(http, emu, "/apps/d3", shell("true"), **url)
    await wait_status(http, emu, job3)
    await eventually(lambda: len([p for p in receiver.paths("/wf") if job3 in p]) == 6)
    assert not [p for p in receiver.paths("/wf") if job2 in p]
    n = (await stats(http, emu))["notifications"]
    assert (n["dropped"], n["duplicated"]) == (3, 4)


async def test_fault_delay_and_lose_queue(emu: Emulator, http: aiohttp.ClientSession, receiver: Receiver) -> None:
    await faults(http, emu, notification_delay=30)
    job_id = await run_app(
        http, emu, "/apps/q", shell("true"), **{"oozie.wf.workflow.notification.url": wf_url(receiver)}
    )
    await wait_status(http, emu, job_id)
    assert (await stats(http, emu))["notifications"]["pending"] == 2
    assert receiver.hits == []
    async with http.post(f"{base(emu)}/emulator/lose-notifications") as resp:
        assert await resp.json() == {"lost": 2}
    n = (await stats(http, emu))["notifications"]
    assert (n["pending"], n["lost"], n["sent"]) == (0, 2, 0)
    # A short delay: delivered no earlier than the delay after being queued.
    await faults(http, emu, notification_delay=0.3)
    job2 = await run_app(
        http, emu, "/apps/q2", shell("true"), **{"oozie.wf.workflow.notification.url": wf_url(receiver)}
    )
    await eventually(lambda: len(receiver.hits) == 2)
    async with http.get(f"{base(emu)}/emulator/notifications") as resp:
        queued = {r["url"]: r["queuedAt"] for r in await resp.json() if r["jobId"] == job2}
    for at, path in receiver.hits:
        assert at - queued[receiver.url + path] >= 0.29  # a lower bound (timer and clock granularity aside)
    # Lose the queue through the faults endpoint while notifications wait for a retry.
    receiver.default = 500
    await faults(http, emu, notification_delay=0, notification_retry_delay=30)
    job3 = await run_app(
        http, emu, "/apps/q3", shell("true"), **{"oozie.wf.workflow.notification.url": wf_url(receiver)}
    )
    await wait_status(http, emu, job3)
    await eventually(lambda: len([p for _, p in receiver.hits if job3 in p]) == 2)
    body = await faults(http, emu, lose_notification_queue=True)
    assert body["lose_notification_queue"] is False and body["lost"] == 2
    assert (await stats(http, emu))["notifications"]["pending"] == 0


async def test_fault_reorder(emu: Emulator, http: aiohttp.ClientSession, receiver: Receiver) -> None:
    await faults(http, emu, reorder_notifications=True)
    job_id = await run_app(
        http, emu, "/apps/ro", shell("true"), **{"oozie.wf.workflow.notification.url": wf_url(receiver)}
    )
    await wait_status(http, emu, job_id)
    await eventually(lambda: len(receiver.hits) == 2)
    assert [p for _, p in receiver.hits] == [f"/wf?id={job_id}&status=SUCCEEDED&parent=",
                                             f"/wf?id={job_id}&status=RUNNING&parent="]  # fmt: skip


# -- other fault knobs ----------------------------------------------------------------
async def test_fault_status_lag(emu: Emulator, http: aiohttp.ClientSession, tmp_path: Path) -> None:
    await faults(http, emu, status_lag=2.0)
    marker = tmp_path / "done"
    job_id = await run_app(http, emu, "/apps/lag", shell("touch", str(marker)))

    async def exited() -> bool:
        async with http.get(f"{emu.oozie_url}/v1/job/{job_id}", params={"show": "log"}) as resp:
            return "process exited with code 0" in await resp.text()

    await eventually(exited, what="the process to exit")
    assert marker.exists()
    # The process is over, but the status flips only after the lag.
    assert await status(http, emu, job_id) == "RUNNING"
    assert node(await info(http, emu, job_id), "node")["status"] == "RUNNING"
    assert await wait_status(http, emu, job_id) == "SUCCEEDED"


async def test_fault_unavailable_bursts(emu: Emulator, http: aiohttp.ClientSession) -> None:
    await faults(http, emu, http_503_burst_oozie=2, standby_burst_webhdfs=1)
    for _ in range(2):
        async with http.get(f"{emu.oozie_url}/versions") as resp:
            await assert_oozie_error(resp, 503, "E0002", "System is in safe mode")
    async with http.get(f"{emu.oozie_url}/versions") as resp:
        assert resp.status == 200
    async with http.get(f"{emu.namenode_url}/webhdfs/v1/?op=GETFILESTATUS") as resp:
        # Hadoop maps every IOException, StandbyException included, to 403 (ExceptionHandler).
        await remote_exception(resp, 403, "StandbyException")
    async with http.get(f"{emu.namenode_url}/webhdfs/v1/?op=GETFILESTATUS") as resp:
        assert resp.status == 200
    assert (await stats(http, emu))["unavailable"] == {"oozie": 2, "webhdfs": 1}


async def test_fault_fail_and_hang_actions(emu: Emulator, http: aiohttp.ClientSession) -> None:
    await faults(http, emu, fail_actions=r"^echo doomed", fail_exit_code=7, hang_actions=r"stuck$")
    doomed = await run_app(http, emu, "/apps/x1", shell("echo", "doomed", "now"))
    stuck = await run_app(http, emu, "/apps/x2", shell("echo", "stuck"))
    fine = await run_app(http, emu, "/apps/x3", shell("echo", "fine"))
    assert await wait_status(http, emu, doomed) == "KILLED"
    assert node(await info(http, emu, doomed), "node")["errorCode"] == "7"
    assert await wait_status(http, emu, fine) == "SUCCEEDED"
    await eventually(lambda: node_status(emu, stuck) == "RUNNING")
    assert await status(http, emu, stuck) == "RUNNING"
    async with http.put(f"{emu.oozie_url}/v1/job/{stuck}", params={"action": "kill"}) as resp:
        assert resp.status == 200
    assert await status(http, emu, stuck) == "KILLED"
    # Neither the failed nor the hung action started a process.
    assert (await stats(http, emu))["executions"] == {fine: 1}


def node_status(emu: Emulator, job_id: str) -> str | None:
    action = emu.engine.jobs[job_id].action("node")
    return action.status if action else None


async def test_fault_fatal_and_auto_suspend(emu: Emulator, http: aiohttp.ClientSession, receiver: Receiver) -> None:
    await faults(http, emu, fatal_actions="lost", suspend_actions="parked")
    url = {"oozie.wf.workflow.notification.url": wf_url(receiver)}
    lost = await run_app(http, emu, "/apps/y1", shell("echo", "lost"), **url)
    parked = await run_app(http, emu, "/apps/y2", shell("echo", "parked"), **url)
    assert await wait_status(http, emu, lost) == "FAILED"
    a = node(await info(http, emu, lost), "node")
    assert (a["status"], a["errorCode"]) == ("FAILED", "JA017")
    assert await wait_status(http, emu, parked, {"SUSPENDED"}) == "SUSPENDED"
    assert node(await info(http, emu, parked), "node")["status"] == "START_MANUAL"
    await eventually(lambda: len(receiver.hits) == 3)
    assert not [p for p in receiver.paths() if "SUSPENDED" in p]  # an automatic suspension notifies nobody
    await faults(http, emu, suspend_actions=None)
    async with http.put(f"{emu.oozie_url}/v1/job/{parked}", params={"action": "resume"}) as resp:
        assert resp.status == 200
    assert await wait_status(http, emu, parked) == "SUCCEEDED"


async def test_faults_endpoint_validation_and_reset(emu: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{base(emu)}/emulator/faults") as resp:
        initial = await resp.json()
    assert initial["notification_retry_delay"] == 0.1 and initial["status_lag"] == 0
    for bad in ({"drop_notifications": 2}, {"no_such_knob": 1}, {"fail_actions": "("}, {"status_lag": -1}):
        async with http.put(f"{base(emu)}/emulator/faults", json=bad) as resp:
            assert resp.status == 400, bad
    async with http.get(f"{base(emu)}/emulator/faults") as resp:
        assert await resp.json() == initial
    await faults(http, emu, status_lag=3, hang_actions="x")
    async with http.delete(f"{base(emu)}/emulator/faults") as resp:
        assert await resp.json() == initial


# -- WebHDFS --------------------------------------------------------------------------
async def test_create_redirect_shape_and_open(emu: Emulator, http: aiohttp.ClientSession) -> None:
    url = f"{emu.namenode_url}/webhdfs/v1/dir/sub/file.txt"
    async with http.put(url, params={"op": "CREATE", "user.name": "alice", "overwrite": "true", "replication": "2"},
                        allow_redirects=False) as resp:  # fmt: skip
        assert resp.status == 307
        assert resp.headers["Content-Length"] == "0" and await resp.read() == b""
        location = resp.headers["Location"]
    assert location.startswith(f"{emu.datanode_url}/webhdfs/v1/dir/sub/file.txt?")
    query = location.split("?", 1)[1].split("&")
    assert query[:3] == ["op=CREATE", "user.name=alice", "namenoderpcaddress=127.0.0.1:8020"]
    assert query[3:] == sorted(query[3:]) and "overwrite=true" in query and "replication=2" in query
    assert not (emu.root / "dir").exists()  # step 1 creates nothing
    async with http.put(location, data=b"hello world", headers={"Content-Type": "application/octet-stream"}) as resp:
        assert resp.status == 201
        assert resp.headers["Location"] == "hdfs://127.0.0.1:8020/dir/sub/file.txt"  # parents created
    async with http.put(url, params={"op": "CREATE", "noredirect": "true"}, allow_redirects=False) as resp:
        assert resp.status == 200 and set(await resp.json()) == {"Location"}
    async with http.get(url, params={"op": "OPEN"}, allow_redirects=False) as resp:
        assert resp.status == 307 and resp.headers["Location"].startswith(emu.datanode_url)
    async with http.get(url, params={"op": "OPEN"}) as resp:
        assert resp.status == 200 and await resp.read() == b"hello world"
    async with http.get(url, params={"op": "OPEN", "offset": "6", "length": "3"}) as resp:
        assert await resp.read() == b"wor"
    st = (await (await http.get(url, params={"op": "GETFILESTATUS"})).json())["FileStatus"]
    assert (st["owner"], st["length"], st["replication"], st["permission"]) == ("alice", 11, 2, "644")
    async with http.get(f"{emu.namenode_url}/webhdfs/v1/dir/nothing", params={"op": "OPEN"}) as resp:
        assert "File does not exist: /dir/nothing" in await remote_exception(resp, 404, "FileNotFoundException")


async def test_create_conflict_is_found_at_the_datanode(emu: Emulator, http: aiohttp.ClientSession) -> None:
    put_hdfs(emu, "/c/existing", b"old")
    url = f"{emu.namenode_url}/webhdfs/v1/c/existing"
    async with http.put(url, params={"op": "CREATE"}, allow_redirects=False) as resp:  # overwrite defaults to false
        assert resp.status == 307
        location = resp.headers["Location"]
    async with http.put(location, data=b"new") as resp:
        await remote_exception(resp, 403, "FileAlreadyExistsException")
        assert resp.headers["Content-Type"].startswith("application/json")
    assert (emu.root / "c/existing").read_bytes() == b"old"
    async with http.put(url, params={"op": "CREATE", "overwrite": "true"}, data=b"new") as resp:
        assert resp.status == 201  # aiohttp followed the 307 with the body
    assert (emu.root / "c/existing").read_bytes() == b"new"
    async with http.put(f"{emu.namenode_url}/webhdfs/v1/c", params={"op": "CREATE", "overwrite": "true"},
                        data=b"x") as resp:  # fmt: skip
        await remote_exception(resp, 403, "FileAlreadyExistsException")  # a directory


async def test_mkdirs_delete_false_not_error(emu: Emulator, http: aiohttp.ClientSession) -> None:
    nn = f"{emu.namenode_url}/webhdfs/v1"
    for _ in range(2):  # creates parents; an existing directory is also true
        async with http.put(f"{nn}/m/a/b", params={"op": "MKDIRS", "user.name": "bob"}) as resp:
            assert resp.status == 200 and await resp.json() == {"boolean": True}
    put_hdfs(emu, "/m/file", b"x")
    async with http.put(f"{nn}/m/file", params={"op": "MKDIRS"}) as resp:
        await remote_exception(resp, 403, "FileAlreadyExistsException")
    async with http.put(f"{nn}/m/file/below", params={"op": "MKDIRS"}) as resp:
        await remote_exception(resp, 403, "ParentNotDirectoryException")
    async with http.delete(f"{nn}/m/ghost", params={"op": "DELETE"}) as resp:
        assert resp.status == 200 and await resp.json() == {"boolean": False}
    async with http.delete(f"{nn}/m/a", params={"op": "DELETE"}) as resp:
        assert "/m/a is non empty" in await remote_exception(resp, 403, "PathIsNotEmptyDirectoryException")
    async with http.delete(f"{nn}/m/a", params={"op": "DELETE", "recursive": "true"}) as resp:
        assert await resp.json() == {"boolean": True}
    assert not (emu.root / "m/a").exists()
    async with http.delete(f"{nn}/m/file", params={"op": "DELETE"}) as resp:
        assert await resp.json() == {"boolean": True}


async def test_rename_old_semantics(emu: Emulator, http: aiohttp.ClientSession) -> None:
    nn = f"{emu.namenode_url}/webhdfs/v1"
    put_hdfs(emu, "/r/src", b"1")
    put_hdfs(emu, "/r/other", b"2")
    emu.namespace.local("/r/into").mkdir()

    async def rename(src: str, dst: str) -> Any:
        async with http.put(f"{nn}{src}", params={"op": "RENAME", "destination": dst}) as resp:
            assert resp.status == 200, await resp.text()
            return (await resp.json())["boolean"]

    assert await rename("/r/ghost", "/r/x") is False  # missing source
    assert await rename("/r/src", "/r/other") is False  # existing file
    assert await rename("/r/src", "/r/no/parent/x") is False  # missing parent
    assert await rename("/r/src", "/r/src") is True
    assert await rename("/r/src", "/r/into") is True  # into the existing directory
    assert (emu.root / "r/into/src").read_bytes() == b"1"
    assert await rename("/r/into/src", "/r/moved") is True
    assert (emu.root / "r/moved").read_bytes() == b"1"
    async with http.put(f"{nn}/r/moved", params={"op": "RENAME", "destination": "relative"}) as resp:
        assert 'Invalid value for webhdfs parameter "destination"' in await remote_exception(
            resp, 400, "IllegalArgumentException"
        )


async def test_status_listing_summary_shapes(emu: Emulator, http: aiohttp.ClientSession) -> None:
    nn = f"{emu.namenode_url}/webhdfs/v1"
    put_hdfs(emu, "/s/b.txt", b"12345")
    put_hdfs(emu, "/s/a/deep.txt", b"123")
    async with http.get(f"{nn}/s", params={"op": "GETFILESTATUS"}) as resp:
        st = (await resp.json())["FileStatus"]
    assert set(st) == FILE_STATUS_KEYS
    assert (st["type"], st["pathSuffix"], st["length"], st["replication"], st["childrenNum"]) == ("DIRECTORY", "", 0,
                                                                                                  0, 2)  # fmt: skip
    assert st["owner"] == "hdfs" and isinstance(st["permission"], str)
    async with http.get(f"{nn}/s", params={"op": "LISTSTATUS"}) as resp:
        entries = (await resp.json())["FileStatuses"]["FileStatus"]
    assert [(e["pathSuffix"], e["type"]) for e in entries] == [("a", "DIRECTORY"), ("b.txt", "FILE")]
    assert all(set(e) == FILE_STATUS_KEYS for e in entries)
    async with http.get(f"{nn}/s/b.txt", params={"op": "LISTSTATUS"}) as resp:
        [one] = (await resp.json())["FileStatuses"]["FileStatus"]
    assert (one["pathSuffix"], one["length"], one["replication"]) == ("", 5, 3)
    async with http.get(f"{nn}/s", params={"op": "GETCONTENTSUMMARY"}) as resp:
        cs = (await resp.json())["ContentSummary"]
    assert {"directoryCount", "fileCount", "length", "quota", "spaceConsumed", "spaceQuota"} <= set(cs)
    assert (cs["directoryCount"], cs["fileCount"], cs["length"], cs["quota"], cs["spaceQuota"]) == (2, 2, 8, -1, -1)
    assert cs["spaceConsumed"] == 8 * 3
    messages = {
        "GETFILESTATUS": "File does not exist: /s/none",
        "LISTSTATUS": "File /s/none does not exist.",
        "GETCONTENTSUMMARY": "File does not exist: /s/none",
    }
    for op, message in messages.items():
        async with http.get(f"{nn}/s/none", params={"op": op}) as resp:
            assert await remote_exception(resp, 404, "FileNotFoundException") == message


async def test_file_checksum(emu: Emulator, http: aiohttp.ClientSession) -> None:
    nn = f"{emu.namenode_url}/webhdfs/v1"
    put_hdfs(emu, "/k/one", b"same")
    put_hdfs(emu, "/k/two", b"same")
    async with http.get(f"{nn}/k/one", params={"op": "GETFILECHECKSUM"}, allow_redirects=False) as resp:
        assert resp.status == 307 and resp.headers["Location"].startswith(emu.datanode_url)

    async def checksum(path: str) -> dict[str, Any]:
        async with http.get(f"{nn}{path}", params={"op": "GETFILECHECKSUM"}) as resp:
            assert resp.status == 200
            body = await resp.json()
            assert set(body) == {"FileChecksum"} and set(body["FileChecksum"]) == {"algorithm", "bytes", "length"}
            return body["FileChecksum"]

    one = await checksum("/k/one")
    assert one["algorithm"] == "MD5-of-0MD5-of-512CRC32C" and one["length"] == 28
    assert re.fullmatch(r"00000200" + "0" * 16 + r"[0-9a-f]{32}" + "0" * 8, one["bytes"])  # as Hadoop 3.4 sends it
    assert await checksum("/k/two") == one
    put_hdfs(emu, "/k/two", b"different")
    assert (await checksum("/k/two"))["bytes"] != one["bytes"]
    async with http.get(f"{nn}/k", params={"op": "GETFILECHECKSUM"}) as resp:
        assert await remote_exception(resp, 404, "FileNotFoundException") == "Path is not a file: /k"
    # An empty file (a _SUCCESS marker) has no block: HDFS answers a fixed checksum for it.
    put_hdfs(emu, "/k/_SUCCESS", b"")
    assert await checksum("/k/_SUCCESS") == {
        "algorithm": "MD5-of-0MD5-of-0CRC32",
        "bytes": "00000000" + "0" * 16 + "70bc8f4b72a86921468bf8e8441dce51" + "00000000",
        "length": 28,
    }


async def test_op_validation_paths_and_users(emu: Emulator, http: aiohttp.ClientSession, tmp_path: Path) -> None:
    nn = f"{emu.namenode_url}/webhdfs/v1"
    async with http.get(f"{nn}/", params={"op": "getfilestatus"}) as resp:  # case-insensitive
        assert resp.status == 200
    for method, op in (("GET", "FROBNICATE"), ("GET", "MKDIRS"), ("PUT", "OPEN"), ("DELETE", "LISTSTATUS")):
        async with http.request(method, f"{nn}/x", params={"op": op}) as resp:
            message = await remote_exception(resp, 400, "IllegalArgumentException")
            assert message.startswith('Invalid value for webhdfs parameter "op": ')
    async with http.delete(f"{nn}/x", params={"op": "DELETE", "recursive": "maybe"}) as resp:
        await remote_exception(resp, 400, "IllegalArgumentException")
    # Paths never leave the root.
    for raw in ("/webhdfs/v1/a/../../escape?op=MKDIRS", "/webhdfs/v1/a/%2E%2E/%2E%2E/escape?op=MKDIRS"):
        async with http.put(URL(f"{emu.namenode_url}{raw}", encoded=True)) as resp:
            assert resp.status == 400
            assert (await resp.json())["RemoteException"]["exception"] == "InvalidPathException"
    assert not (tmp_path / "escape").exists() and not (emu.root / "escape").exists()
    # Owner: the user.name, else dr.who.
    async with http.put(f"{nn}/owned/anon", params={"op": "MKDIRS"}) as resp:
        assert resp.status == 200
    async with http.put(f"{nn}/owned/carol", params={"op": "MKDIRS", "user.name": "carol"}) as resp:
        assert resp.status == 200
    async with http.get(f"{nn}/owned", params={"op": "LISTSTATUS"}) as resp:
        owners = {e["pathSuffix"]: e["owner"] for e in (await resp.json())["FileStatuses"]["FileStatus"]}
    assert owners == {"anon": "dr.who", "carol": "carol"}
    # Permission errors and CSRF protection as modes.
    await faults(http, emu, webhdfs_deny_anonymous_writes=True, webhdfs_require_xsrf=True)
    async with http.put(f"{nn}/owned/x", params={"op": "MKDIRS"}, headers={"X-XSRF-HEADER": "y"}) as resp:
        await remote_exception(resp, 403, "AccessControlException")
    async with http.put(f"{nn}/owned/x", params={"op": "MKDIRS", "user.name": "carol"}) as resp:
        assert resp.status == 400
    async with http.put(f"{nn}/owned/x", params={"op": "MKDIRS", "user.name": "carol"},
                        headers={"X-XSRF-HEADER": "y"}) as resp:  # fmt: skip
        assert resp.status == 200


# -- the command line -----------------------------------------------------------------
async def test_cli_emulate_hadoop(tmp_path: Path) -> None:
    from tests.support.net import free_port

    ports = [free_port() for _ in range(3)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pingo.cli", "emulate-hadoop", "--root", str(tmp_path / "hdfs"),
        "--oozie-port", str(ports[0]), "--namenode-port", str(ports[1]), "--datanode-port", str(ports[2]),
        "--status-lag", "1.5", "--reorder-notifications", "--log-level", "WARNING",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode() for _ in range(4)]
        assert lines[0].strip() == f"oozie:    http://127.0.0.1:{ports[0]}/oozie"
        assert f"http://127.0.0.1:{ports[1]}" in lines[1] and f"http://127.0.0.1:{ports[2]}" in lines[2]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{ports[0]}/oozie/versions") as resp:
                assert await resp.json() == [0, 1, 2]
            async with http.get(f"http://127.0.0.1:{ports[0]}/emulator/faults") as resp:
                body = await resp.json()
            assert body["status_lag"] == 1.5 and body["reorder_notifications"] is True
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_stop_ends_running_actions(tmp_path: Path) -> None:
    emu = await start_emulator(tmp_path / "hdfs")
    pid_file = tmp_path / "pid"
    async with aiohttp.ClientSession() as http:
        await run_app(http, emu, "/apps/st", shell("sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"))
        pid = int(await eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the pid"))
    await emu.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
