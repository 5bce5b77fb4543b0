"""Oozie executor: each action attempt is a one-action Oozie workflow.

Its ``workflow.xml`` (schema ``uri:oozie:workflow:0.5``; ``<java>`` for COMMAND_LINE,
``<shell>`` for SHELL, ``<map-reduce>`` for MAP_REDUCE, ``<spark>`` for SPARK, ``<sqoop>``
for SQOOP) is written
over WebHDFS to an application path of its own, then
submitted with ``oozie.wf.external.id`` = the attempt's external id and the workflow
notification URL pointing at the callback service (with the action's secret).
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import AsyncIterator, Callable
from email.utils import parsedate_to_datetime
from xml.etree import ElementTree as ET

from shared.executors.base import FOLLOW_INTERVAL, JobRequest, JobState, JobStatus, LogsGone, LogStream
from shared.executors.log_tail import LineTail
from shared.hadoop.mapreduce import job_properties
from shared.hadoop.oozie import TERMINAL, Oozie, OozieError
from shared.hadoop.sqoop import import_arguments
from shared.hadoop.streaming import join_args
from shared.hadoop.webhdfs import WebHdfs
from shared.storage.names import path_name
from shared.workflow_spec import ActionSpec, ActionType, is_streaming

log = logging.getLogger(__name__)
WF_NS = "uri:oozie:workflow:0.5"
SHELL_NS = "uri:oozie:shell-action:0.3"
SPARK_NS = "uri:oozie:spark-action:0.2"
# The newest 0.x of Oozie 5.2.1's sqoop-action schemas (0.2 to 0.4, and 1.0), like the
# other actions' 0.x schemas (tests/data/oozie/README.md).
SQOOP_NS = "uri:oozie:sqoop-action:0.4"
NODE = "pingo-action"
# Oozie serves a job's log whole on every request: a followed log is asked for again this
# often (the log streamer filters the server's log files each time, so not faster).
OOZIE_FOLLOW_INTERVAL = max(FOLLOW_INTERVAL, 1.0)
# Which Oozie log stands for each stream: Oozie keeps no separate standard output and error
# of the launcher; its job log holds the job's lines, its error log the ERROR lines
# (docs/api.md, "Action logs").
SHOW = {"stdout": "log", "stderr": "errorlog"}


async def _prepend(head: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if head:
        yield head
    async for chunk in rest:
        yield chunk


def _epoch(rfc822: str | None) -> float | None:
    return parsedate_to_datetime(rfc822).timestamp() if rfc822 else None


class OozieExecutor:
    name = "oozie"
    supports = frozenset(ActionType)

    def __init__(
        self, oozie: Oozie, hdfs: WebHdfs, name_node: str, job_tracker: str, queue: str, apps_root: str,
        spark_master: str | None = None,
    ) -> None:  # fmt: skip
        self.spark_master = spark_master or "yarn"
        self.oozie = oozie
        self.hdfs = hdfs
        self.name_node = name_node.rstrip("/")
        self.job_tracker = job_tracker
        self.queue = queue
        self.apps_root = apps_root

    def hdfs_uri(self, path: str) -> str:
        return f"{self.name_node}{path}"

    def refusals(self, action: ActionSpec, owner: str | None = None) -> list[tuple[str, str]]:
        out = []
        if action.type == ActionType.MAP_REDUCE:
            for field in ("mapper", "reducer"):
                side = getattr(action, field)
                if is_streaming(side):
                    try:
                        join_args(side)
                    except ValueError as exc:
                        out.append((field, str(exc)))
        elif action.type == ActionType.SPARK:
            # Oozie passes them as one line and splits it at each "--option" (docs/hadoop-protocol.md).
            opts = action.sparkOpts or []
            if opts and not opts[0].startswith("--"):
                out.append(("sparkOpts", "on Oozie, sparkOpts must start with an option (--...)"))
            values = [*(o for o in opts if not o.startswith("--")), *(p.value for p in action.configurationParameters)]
            for value in values:
                if " --" in f" {value}" or '"' in value:
                    out.append(("sparkOpts", f"Oozie's spark-opts line cannot carry the value {value!r} "
                                             "(it holds ' --' or a double quote)"))  # fmt: skip
        return out

    async def _shipped(self, body: ET.Element, folder: str | None, skip: str | None = None) -> None:
        """The folder's files, shipped into the action's working directory (``<file>``)."""
        if not folder:
            return
        for st in await self.hdfs.list(folder):
            if st["type"] == "FILE" and st["pathSuffix"] != skip:
                path = posixpath.join(folder, st["pathSuffix"])
                ET.SubElement(body, "file").text = f"{self.hdfs_uri(path)}#{st['pathSuffix']}"

    @staticmethod
    def _configuration(body: ET.Element, settings: dict[str, str]) -> None:
        conf = ET.SubElement(body, "configuration")
        for k, v in settings.items():
            prop = ET.SubElement(conf, "property")
            ET.SubElement(prop, "name").text = k
            ET.SubElement(prop, "value").text = v

    async def _map_reduce(self, body: ET.Element, job: JobRequest) -> None:
        """``<map-reduce>``: inputs and output are job properties, not arguments; a streaming
        job's commands go in ``<streaming>`` and its folder's files are shipped; a Java job's
        classes are properties and its jars come from ``oozie.libpath`` (docs/hadoop-protocol.md)."""
        streaming = is_streaming(job.mapper)
        if streaming:
            stream = ET.SubElement(body, "streaming")
            ET.SubElement(stream, "mapper").text = join_args(job.mapper)  # type: ignore[arg-type]
            if job.reducer is not None:
                ET.SubElement(stream, "reducer").text = join_args(job.reducer)  # type: ignore[arg-type]
        self._configuration(body, {"mapred.job.queue.name": "${queueName}", **job_properties(job)})
        if streaming:
            await self._shipped(body, job.action_folder)

    async def _spark(self, body: ET.Element, job: JobRequest) -> None:
        """``<spark>`` (``uri:oozie:spark-action:0.2``): the application is the folder's file,
        the folder's other files are shipped beside it; Spark properties are ``--conf``."""
        self._configuration(body, {"mapred.job.queue.name": "${queueName}"})
        ET.SubElement(body, "master").text = self.spark_master
        ET.SubElement(body, "mode").text = "cluster"
        ET.SubElement(body, "name").text = job.name
        if job.main_class:
            ET.SubElement(body, "class").text = job.main_class
        app = posixpath.join(job.action_folder or "/", job.application or "")
        ET.SubElement(body, "jar").text = self.hdfs_uri(app)
        opts = [*(f"--conf {k}={v}" for k, v in job.configuration.items()), *job.spark_opts]
        if opts:
            ET.SubElement(body, "spark-opts").text = " ".join(opts)
        for arg in job.arguments:
            ET.SubElement(body, "arg").text = arg
        await self._shipped(body, job.action_folder, skip=job.application)

    def _sqoop(self, body: ET.Element, job: JobRequest) -> None:
        """``<sqoop>`` (``uri:oozie:sqoop-action:0.4``): Hadoop properties in ``<configuration>``,
        ``import`` and its options one ``<arg>`` each (a ``<command>`` line would be split at
        spaces, a query's among them); Sqoop's jars come from Oozie's share lib."""
        self._configuration(body, {"mapred.job.queue.name": "${queueName}", **job.configuration})
        for arg in ["import", *import_arguments(job.sqoop, job.arguments[-1])]:
            ET.SubElement(body, "arg").text = arg

    async def workflow_xml(self, job: JobRequest) -> bytes:
        app = ET.Element("workflow-app", {"xmlns": WF_NS, "name": path_name(f"pingo-{job.name}")})
        ET.SubElement(app, "start", {"to": NODE})
        action = ET.SubElement(app, "action", {"name": NODE})
        if job.type == ActionType.COMMAND_LINE:
            body = ET.SubElement(action, "java")
        elif job.type == ActionType.MAP_REDUCE:
            body = ET.SubElement(action, "map-reduce")
        elif job.type == ActionType.SPARK:
            body = ET.SubElement(action, "spark", {"xmlns": SPARK_NS})
        elif job.type == ActionType.SQOOP:
            body = ET.SubElement(action, "sqoop", {"xmlns": SQOOP_NS})
        else:
            body = ET.SubElement(action, "shell", {"xmlns": SHELL_NS})
        ET.SubElement(body, "job-tracker").text = "${jobTracker}"
        ET.SubElement(body, "name-node").text = "${nameNode}"
        if job.type == ActionType.MAP_REDUCE:
            await self._map_reduce(body, job)
        elif job.type == ActionType.SPARK:
            await self._spark(body, job)
        elif job.type == ActionType.SQOOP:
            self._sqoop(body, job)
        else:
            settings = {"mapred.job.queue.name": "${queueName}"}
            if job.type == ActionType.COMMAND_LINE:
                settings.update(job.configuration)
            self._configuration(body, settings)
        if job.type == ActionType.COMMAND_LINE:
            ET.SubElement(body, "main-class").text = job.main_class
            # As with the local executor, configurationParameters are Java system properties.
            for k, v in job.configuration.items():
                ET.SubElement(body, "java-opt").text = f"-D{k}={v}"
            for arg in job.arguments:
                ET.SubElement(body, "arg").text = arg
        elif job.type == ActionType.SHELL:
            command = job.command or []
            ET.SubElement(body, "exec").text = command[0]
            for arg in [*command[1:], *job.arguments]:
                ET.SubElement(body, "argument").text = arg
            for k, v in job.configuration.items():
                ET.SubElement(body, "env-var").text = f"{k}={v}"
            await self._shipped(body, job.action_folder)
        ET.SubElement(action, "ok", {"to": "end"})
        ET.SubElement(action, "error", {"to": "fail"})
        kill = ET.SubElement(app, "kill", {"name": "fail"})
        ET.SubElement(kill, "message").text = "Action failed, error message[${wf:errorMessage(wf:lastErrorNode())}]"
        ET.SubElement(app, "end", {"name": "end"})
        return ET.tostring(app, encoding="utf-8", xml_declaration=True)

    async def submit(self, job: JobRequest, prepare: Callable[[], None] | None = None) -> str:
        if prepare is not None:
            await asyncio.to_thread(prepare)
        if existing := await self.oozie.find(job.external_id):
            return existing  # submitted before (the submitter died before recording it)
        app_dir = posixpath.join(self.apps_root, path_name(job.external_id))
        await self.hdfs.mkdirs(app_dir)
        await self.hdfs.create(posixpath.join(app_dir, "workflow.xml"), await self.workflow_xml(job), overwrite=True)
        properties = {
            "user.name": self.oozie.user,
            "oozie.wf.application.path": self.hdfs_uri(app_dir),
            "nameNode": self.name_node,
            "jobTracker": self.job_tracker,
            "queueName": self.queue,
            "oozie.wf.external.id": job.external_id,
            "oozie.wf.workflow.notification.url": job.notify_url,
        }
        if job.type in (ActionType.COMMAND_LINE, ActionType.MAP_REDUCE) and job.action_folder:
            properties["oozie.libpath"] = self.hdfs_uri(job.action_folder)
        if job.type in (ActionType.MAP_REDUCE, ActionType.SPARK, ActionType.SQOOP):
            # Hadoop streaming's, Spark's and Sqoop's jars come from Oozie's share lib.
            properties["oozie.use.system.libpath"] = "true"
        return await self.oozie.submit(properties, job.external_id, do_as=job.owner)

    def job_id(self, external_id: str) -> str | None:
        return None  # Oozie makes a job's id when it accepts the job

    async def find(self, external_id: str) -> str | None:
        return await self.oozie.find(external_id)

    async def fence(self, external_id: str) -> str | None:
        # Oozie cannot reserve an external id: a submitter stalled past its lease may still
        # start its job after this, and is then left to stop it when it cannot record it.
        return await self.oozie.find(external_id)

    async def status(self, job_id: str) -> JobStatus:
        try:
            status = await self.oozie.status(job_id)
        except OozieError as exc:
            # show=info says E0604 for an unknown or purged job, v2 show=status E0605.
            if exc.code in ("E0604", "E0605"):
                return JobStatus(state=JobState.UNKNOWN, error=exc.message)
            raise
        if status == "PREP":
            return JobStatus(state=JobState.PREP)
        if status in ("RUNNING", "SUSPENDED"):
            # SUSPENDED is not terminal (it may be an automatic suspension): keep polling.
            return JobStatus(state=JobState.RUNNING, error="suspended by Oozie" if status == "SUSPENDED" else None)
        if status not in TERMINAL:
            return JobStatus(state=JobState.RUNNING)
        info = await self.oozie.info(job_id)
        node = next((a for a in info.get("actions", []) if a.get("name") == NODE), {})
        started, ended = _epoch(node.get("startTime") or info.get("startTime")), _epoch(info.get("endTime"))
        if status == "SUCCEEDED":
            return JobStatus(state=JobState.SUCCEEDED, started_at=started, ended_at=ended)
        if node.get("status") in ("ERROR", "FAILED") or status == "FAILED":
            # A failed java/shell action ends the job KILLED through the kill node: a failure for Pingo.
            error = f"{node.get('errorCode') or 'FAILED'}: {node.get('errorMessage') or 'the Oozie job failed'}"
            return JobStatus(state=JobState.FAILED, error=error, started_at=started, ended_at=ended)
        return JobStatus(state=JobState.KILLED, error="killed in Oozie", started_at=started, ended_at=ended)

    async def kill(self, job_id: str) -> None:
        await self.oozie.kill(job_id)

    async def logs(
        self, job_id: str, stream: LogStream, tail: int | None = None, follow: bool = False
    ) -> AsyncIterator[bytes]:
        try:
            first = self.oozie.log(job_id, SHOW[stream])  # type: ignore[arg-type]
            head = await anext(first, b"")
        except OozieError as exc:
            if exc.code in ("E0604", "E0605"):
                raise LogsGone(f"Oozie no longer has job {job_id} (purged): {exc.message}") from exc
            raise
        return self._read_log(job_id, stream, head, first, tail, follow)

    async def _ended(self, job_id: str) -> bool:
        return (await self.status(job_id)).state not in (JobState.PREP, JobState.RUNNING)

    async def _read_log(
        self, job_id: str, stream: LogStream, head: bytes, rest: AsyncIterator[bytes], tail: int | None, follow: bool
    ) -> AsyncIterator[bytes]:
        sent = 0  # bytes of the log already sent: a followed log is read again from its start
        lines = LineTail(tail) if tail is not None else None
        chunks: AsyncIterator[bytes] | None = _prepend(head, rest)
        while True:
            ended = follow and await self._ended(job_id)
            seen = 0
            if chunks is None:
                chunks = self.oozie.log(job_id, SHOW[stream])  # type: ignore[arg-type]
            async for chunk in chunks:
                new = chunk[max(0, sent - seen) :]
                seen += len(chunk)
                if not new:
                    continue
                sent += len(new)
                if lines is not None:
                    lines.feed(new)
                else:
                    yield new
            chunks = None
            if lines is not None:
                if text := lines.text():
                    yield text
                lines = None
            if not follow or ended:
                return
            await asyncio.sleep(OOZIE_FOLLOW_INTERVAL)

    async def prune(self, ended_before: float, keep: set[str]) -> int:
        return 0  # Oozie purges its own jobs (oozie.service.PurgeService)

    async def close(self) -> None:
        await self.oozie.close()
        await self.hdfs.close()
