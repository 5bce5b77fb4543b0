"""The workflow engine: submission checks, the job and action lifecycles and the
notifications they raise (docs/hadoop-protocol.md: "Job and action states", "Managing a job",
"Notifications"; docs/emulator.md: "Oozie").

A job walks ``start -> action -> ... -> end | kill``. Starting is synchronous (the job is
RUNNING when ``start`` returns; its first action is PREP and starts in a task, as in
Oozie). An action that exits 0 takes its ``ok`` transition; exit n takes ``error`` with
errorCode "n"; reaching a kill node ends the job KILLED, the end node SUCCEEDED.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hadoop_emulator import el
from hadoop_emulator.faults import Faults
from hadoop_emulator.hadoop_conf import ConfError, parse_configuration, resolve_configuration, to_xml
from hadoop_emulator.hdfs import HdfsError, Namespace
from hadoop_emulator.jobs import TERMINAL, Action, Job
from hadoop_emulator.notifications import Notifier
from hadoop_emulator.permissions import Checker
from hadoop_emulator.runner import ActionRunner, Outcome, hdfs_ref
from hadoop_emulator.workflow_xml import (
    DISALLOWED_PROPERTIES,
    ActionDef,
    ActionSpec,
    EndDef,
    KillDef,
    WorkflowDef,
    WorkflowError,
    check_parameters,
    parse_workflow,
    resolve_action,
)

log = logging.getLogger("hadoop_emulator.engine")

APP_PATH_KEYS = ("oozie.wf.application.path", "oozie.coord.application.path", "oozie.bundle.application.path")
WORKFLOW_URL = "oozie.wf.workflow.notification.url"
ACTION_URL = "oozie.wf.action.notification.url"
SYSTEM_ID = "oozie-oozi"  # oozie.system.id "oozie-${user.name}" truncated to 10 characters


class OozieError(Exception):
    """An error the web services answer with ``oozie-error-code``/``oozie-error-message``."""

    def __init__(self, status: int, code: str, text: str) -> None:
        super().__init__(f"{code}: {text}")
        self.status = status
        self.code = code
        self.message = f"{code}: {text}"


class Engine:
    def __init__(
        self,
        *,
        namespace: Namespace,
        notifier: Notifier,
        faults: Callable[[], Faults],
        work_root: Path,
        base_url: str,
        hdfs_uri: str,
    ) -> None:
        self.ns = namespace
        self.notifier = notifier
        self._faults = faults
        self.work_root = work_root
        self.base_url = base_url
        self.hdfs_uri = hdfs_uri.rstrip("/")
        self.jobs: dict[str, Job] = {}
        self._counter = 0
        now = time.time()
        self.start_stamp = time.strftime("%y%m%d%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"
        self.cluster_ts = int(now * 1000)
        self._app_counter = 0
        self._runners: dict[str, ActionRunner] = {}
        self.submissions: Counter[str] = Counter()
        self.executions: Counter[str] = Counter()
        self.submitted = 0

    @property
    def faults(self) -> Faults:
        return self._faults()

    # -- submission -------------------------------------------------------------------
    def _app_location(self, raw: str) -> tuple[str, str, str, str]:
        """(app dir, workflow file, shown dir, shown file) for ``oozie.wf.application.path``."""
        try:
            norm = self.ns.normalize(raw)
        except HdfsError as exc:
            raise OozieError(400, "E0711", f"Invalid application URI [{raw}], {exc.message}") from None
        shown = raw.rstrip("/") or "/"
        if norm.endswith(".xml"):
            return norm.rsplit("/", 1)[0] or "/", norm, shown.rsplit("/", 1)[0], shown
        return norm, f"{norm.rstrip('/')}/workflow.xml", shown, f"{shown}/workflow.xml"

    def _load_app(self, conf: dict[str, str]) -> tuple[str, str, str, WorkflowDef, dict[str, str]]:
        """Check the app path (E0504/E0505/E0506), read config-default.xml and parse workflow.xml."""
        raw = conf["oozie.wf.application.path"]
        app_dir, wf_file, shown_dir, shown_file = self._app_location(raw)
        if not self.ns.is_dir(app_dir):
            raise OozieError(401, "E0504", f"App directory [{shown_dir}] does not exist")
        if not self.ns.exists(wf_file):
            raise OozieError(401, "E0505", f"App definition [{shown_file}] does not exist")
        if not self.ns.is_file(wf_file):
            raise OozieError(401, "E0506", f"App definition [{shown_file}] is not a file")
        defaults: dict[str, str] = {}
        default_file = f"{app_dir.rstrip('/')}/config-default.xml"
        if self.ns.is_file(default_file):
            try:
                defaults = parse_configuration(self.ns.local(default_file).read_bytes())
            except ConfError as exc:
                raise OozieError(400, "E0710", f"Could not read the workflow definition, {exc}") from None
            if "user.name" in defaults:
                raise OozieError(400, "E0804", "Disallowed default property [user.name]")
        raw_definition = self.ns.local(wf_file).read_bytes()
        definition = raw_definition.decode("utf-8", errors="replace")
        try:
            wf = parse_workflow(raw_definition)
        except WorkflowError as exc:
            raise OozieError(400, exc.code, exc.message.split(": ", 1)[1]) from None
        app_path = raw if "://" in raw else f"{self.hdfs_uri}{self.ns.normalize(raw)}"
        return app_dir, app_path, definition, wf, defaults

    def submit(self, props: dict[str, str], query_user: str | None, start: bool, dryrun: bool = False) -> Job | None:
        conf = dict(props)
        if query_user:
            # The request user overrides the conf (docs/hadoop-protocol.md, "Identity and errors").
            conf["user.name"] = query_user
        present = [k for k in APP_PATH_KEYS if conf.get(k)]
        if len(present) != 1:
            raise OozieError(
                400, "E0302", f"Invalid parameter [exactly one of {', '.join(APP_PATH_KEYS)} must be specified]"
            )
        if present[0] != "oozie.wf.application.path":
            raise OozieError(400, "E0302", f"Invalid parameter [{present[0]}: the emulator runs workflow jobs only]")
        user = conf.get("user.name")
        if not user:
            raise OozieError(400, "E0401", "Missing configuration property [user.name]")
        app_dir, app_path, definition, wf, defaults = self._load_app(conf)
        mr_user = conf.get("mapreduce.job.user.name")
        if mr_user is not None and mr_user != user:
            raise OozieError(400, "E0303", f"Invalid parameter value, [mapreduce.job.user.name] = [{mr_user}]")
        conf = resolve_configuration({**defaults, **conf})
        for name, default in wf.parameters.items():
            if default is not None and name not in conf:
                conf[name] = default
        try:
            check_parameters(wf, conf)
        except WorkflowError as exc:
            raise OozieError(400, exc.code, exc.message.split(": ", 1)[1]) from None
        if dryrun:
            return None
        job_id = f"{self._counter:07d}-{self.start_stamp}-{SYSTEM_ID}-W"
        self._counter += 1
        app_name = wf.name
        if el.has_el(app_name):
            try:
                app_name = el.evaluate(app_name, conf)
            except el.ELError:
                pass
        job = Job(
            id=job_id,
            app_name=app_name,
            app_path=app_path,
            app_dir=app_dir,
            conf=conf,
            conf_xml=to_xml(conf),
            user=user,
            definition=definition,
            workflow=wf,
            console_url=f"{self.base_url}?job={job_id}",
            external_id=conf.get("oozie.wf.external.id") or None,
            group=conf.get("group.name"),
            acl=conf.get("oozie.job.acl"),
        )
        self.jobs[job_id] = job
        self.submitted += 1
        if job.external_id:
            self.submissions[job.external_id] += 1
        self._log(job, f"submitted by {user}, app path {app_path}")
        if start:
            self.start(job)
        return job

    def find_external(self, external_id: str) -> str:
        """The newest job with this external id, or ``""``."""
        found = ""
        for job in self.jobs.values():
            if job.external_id == external_id:
                found = job.id
        return found

    # -- lifecycle --------------------------------------------------------------------
    def _log(self, job: Job, message: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        job.log.append(f"{stamp} INFO emulator JOB[{job.id}] {message}")

    def _notify_job(self, job: Job) -> None:
        self.notifier.notify_job(job.conf.get(WORKFLOW_URL), job.id, job.status, job.parent_id)

    def _notify_action(self, job: Job, action: Action) -> None:
        # "T:<transition>" once OK/ERROR/KILLED (a null transition reads "null", as in Java), else "S:<status>".
        if action.status in ("OK", "ERROR", "KILLED"):
            token = f"T:{'null' if action.transition is None else action.transition}"
        else:
            token = f"S:{action.status}"
        self.notifier.notify_action(job.conf.get(ACTION_URL), job.id, action.name, token)

    def _control(self, job: Job, name: str, type_: str, transition: str | None, conf: str | None = None) -> Action:
        now = time.time()
        action = Action(
            id=f"{job.id}@{name}",
            name=name,
            type=type_,
            conf=conf,
            status="OK",
            start_time=now,
            end_time=now,
            transition=transition,
            external_id="-",
            external_status="OK",
            tracker_uri="-",
            console_url="-",
        )
        self._replace_action(job, action)
        return action

    @staticmethod
    def _replace_action(job: Job, action: Action) -> None:
        job.actions = [a for a in job.actions if a.name != action.name]
        job.actions.append(action)

    def start(self, job: Job) -> None:
        """PREP -> RUNNING, synchronously; the first action starts in a task."""
        job.status = "RUNNING"
        job.start_time = time.time()
        job.end_time = None
        job.touch()
        self._log(job, "started")
        start = self._control(job, ":start:", ":START:", job.workflow.start_to)
        self._notify_action(job, start)
        self._notify_job(job)
        self._enter(job, job.workflow.start_to)

    def _enter(self, job: Job, name: str) -> None:
        node = job.workflow.nodes[name]
        job.touch()
        if isinstance(node, ActionDef):
            if name in job.skip_nodes and (prev := job.action(name)) is not None and prev.status == "OK":
                self._log(job, f"action {name} skipped (rerun)")
                self._enter(job, prev.transition or node.ok_to)
                return
            action = Action(
                id=f"{job.id}@{name}",
                name=name,
                type=node.type,
                conf=node.xml(),
                user_retry_max=node.retry_max,
                user_retry_interval=node.retry_interval,
                cred=node.cred,
            )
            self._replace_action(job, action)
            self._spawn_action(job, action, node)
        elif isinstance(node, KillDef):
            message = self._kill_message(job, node)
            action = self._control(job, name, ":KILL:", None, conf=node.message)
            action.error_code = "E0729"
            action.error_message = message
            self._finish(job, "KILLED", action)
        elif isinstance(node, EndDef):
            action = self._control(job, name, ":END:", None)
            self._finish(job, "SUCCEEDED", action)

    def _finish(self, job: Job, status: str, node_action: Action) -> None:
        self._kill_actions(job)
        job.status = status
        job.end_time = time.time()
        job.touch()
        self._log(job, f"reached node {node_action.name}: {status}")
        self._notify_action(job, node_action)
        self._notify_job(job)

    def _kill_message(self, job: Job, node: KillDef) -> str:
        try:
            return el.evaluate(node.message, job.conf, self._functions(job))
        except el.ELError:
            return node.message

    def _spawn_action(self, job: Job, action: Action, node: ActionDef) -> None:
        action.task = asyncio.get_running_loop().create_task(self._run_action(job, action, node))

    def _functions(self, job: Job) -> dict[str, el.Function]:
        def last_error_node() -> str:
            for a in reversed(job.actions):
                if a.status in ("ERROR", "FAILED") and not a.type.startswith(":"):
                    return a.name
            return ""

        def field(name: str, attr: str) -> str:
            a = job.action(str(name))
            return (getattr(a, attr) or "") if a is not None else ""

        return {
            "wf:id": lambda: job.id,
            "wf:name": lambda: job.app_name,
            "wf:appPath": lambda: job.app_path,
            "wf:conf": lambda n: job.conf.get(str(n), ""),
            "wf:user": lambda: job.user,
            "wf:group": lambda: job.group or "",
            "wf:run": lambda: job.run,
            "wf:callback": lambda s="": f"{self.base_url}/callback?id={quote(job.id)}&status={s}",
            "wf:transition": lambda n: field(n, "transition"),
            "wf:lastErrorNode": last_error_node,
            "wf:errorCode": lambda n: field(n, "error_code"),
            "wf:errorMessage": lambda n: field(n, "error_message"),
            "wf:actionExternalId": lambda n: field(n, "external_id"),
            "wf:actionTrackerUri": lambda n: field(n, "tracker_uri"),
            "wf:actionExternalStatus": lambda n: field(n, "external_status"),
            "timestamp": lambda: time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
            "concat": lambda a, b: f"{a or ''}{b or ''}",
            "trim": lambda s: str(s or "").strip(),
            "urlEncode": lambda s: quote(str(s or ""), safe=""),
            "firstNotNull": lambda a, b: a if a not in (None, "") else b,
        }

    def _resolve(self, job: Job, node: ActionDef) -> ActionSpec:
        functions = self._functions(job)

        def read_conf(path: str) -> dict[str, str]:
            ref = hdfs_ref(path, job.app_dir)
            local = self.ns.local(ref)
            if not local.is_file():
                raise FileNotFoundError(f"File does not exist: {ref}")
            return parse_configuration(local.read_bytes())

        return resolve_action(node, job.workflow, lambda text: el.evaluate(text, job.conf, functions), read_conf)

    def _app_id(self) -> str:
        self._app_counter += 1
        return f"application_{self.cluster_ts}_{self._app_counter:04d}"

    async def _run_action(self, job: Job, action: Action, node: ActionDef) -> None:
        await asyncio.sleep(0)  # the submit/start response goes out first, with the action PREP
        if job.status != "RUNNING" or action.status != "PREP":
            return  # suspended before it started (resume starts it) or killed
        action.attempt += 1
        try:
            spec = self._resolve(job, node)
        except el.ELError as exc:
            self._fail_job(job, action, "EL_ERROR", str(exc))
            return
        except WorkflowError as exc:
            self._fail_job(job, action, exc.code, exc.message)
            return
        except (FileNotFoundError, HdfsError, ConfError) as exc:
            spec = None
            launch_error: Outcome | None = Outcome(error_code="JA008", error_message=str(exc))
        else:
            launch_error = None
            action.conf = spec.xml
            for prop in DISALLOWED_PROPERTIES:
                if prop in spec.configuration:
                    self._fail_job(
                        job, action, "JA010", f"Property [{prop}] not allowed in action [{node.name}] configuration"
                    )
                    return
        faults = self.faults
        command = spec.command() if spec is not None else ""
        if spec is not None and Faults.matches(faults.suspend_actions, command):
            # A non-transient start error: START_MANUAL, and the job is suspended without a notification.
            action.status = "START_MANUAL"
            action.error_code = "JA009"
            action.error_message = "Cannot initialize Cluster (fault injected by the emulator)"
            job.status = "SUSPENDED"
            job.touch()
            self._log(job, f"action {action.name} START_MANUAL; job suspended automatically")
            return
        app_id = self._start(job, action, spec)
        fatal = False
        if launch_error is not None:
            outcome = launch_error
        elif Faults.matches(faults.fatal_actions, command):
            fatal = True
            outcome = Outcome()
        elif Faults.matches(faults.fail_actions, command):
            outcome = Outcome(exit_code=faults.fail_exit_code)
        elif Faults.matches(faults.hang_actions, command):
            await asyncio.Event().wait()  # until the job is killed (the task is cancelled)
            return
        else:
            assert spec is not None
            outcome = await self._execute(job, action, spec)
        lag = self.faults.status_lag
        if lag > 0:
            await asyncio.sleep(lag)
        if job.status in TERMINAL or action.status != "RUNNING":
            return
        if fatal:
            self._fail_job(
                job,
                action,
                "JA017",
                f"Could not lookup launched hadoop Job ID [{app_id}] which was associated with action "
                f"[{action.id}].  Failing this action!",
            )
            return
        self._as_oozie_says(action, spec, outcome)
        self._action_done(job, action, node, outcome)

    def _as_oozie_says(self, action: Action, spec: ActionSpec | None, outcome: Outcome) -> None:
        """What Apache Oozie 5.2.1 names and says of an action that ran: the MapReduce job
        a map-reduce or sqoop launcher submitted, and a failure's ``Main Class`` message."""
        if outcome.started and spec is not None and spec.type == "map-reduce":
            # The launcher submitted a MapReduce job, an application of its own: Apache
            # Oozie 5.2.1 then names the action by that job (docs/hadoop-protocol.md).
            action.external_id = "job_" + self._app_id().removeprefix("application_")
        elif outcome.ok and spec is not None and spec.type == "sqoop":
            # Sqoop's import is a MapReduce job the launcher submitted: Apache Oozie 5.2.1
            # keeps the launcher's id and names the job as the action's child.
            action.external_child_ids = "job_" + self._app_id().removeprefix("application_")
        if not outcome.ok and outcome.error_message is None:
            main = spec.main_class if spec is not None else ""
            code = outcome.exit_code
            if outcome.started and spec is not None and spec.type == "shell" and code:
                # ShellMain fails its launcher with 1 whatever the command's own exit code
                # (the job log keeps that one): Apache Oozie 5.2.1 answers errorCode 1
                # (docs/hadoop-protocol.md, "The emulator and the real servers").
                code = 1
                outcome.error_code = str(code)
            outcome.error_message = f"Main Class [{main}], exit code [{code}]"

    def _start(self, job: Job, action: Action, spec: ActionSpec | None) -> str:
        """The action RUNNING under a new application id (returned), and its callback sent."""
        app_id = self._app_id()
        tracker = spec.job_tracker if spec is not None else ""
        action.status = "RUNNING"
        action.start_time = time.time()
        action.external_id = app_id
        action.external_status = "RUNNING"
        action.tracker_uri = tracker
        rm_host = (tracker.split(":")[0] or "localhost") if tracker else "localhost"
        action.console_url = f"http://{rm_host}:8088/proxy/{app_id}/"
        action.error_code = action.error_message = None
        job.touch()
        self._log(job, f"action {action.name} RUNNING as {app_id}")
        self._notify_action(job, action)
        return app_id

    async def _execute(self, job: Job, action: Action, spec: ActionSpec) -> Outcome:
        libpaths = [hdfs_ref(p.strip(), job.app_dir) for p in job.conf.get("oozie.libpath", "").split(",") if p.strip()]
        action_conf = {
            **spec.configuration,
            "oozie.job.id": job.id,
            "oozie.action.id": action.id,
            "user.name": job.user,
            "mapreduce.job.user.name": job.user,
            "fs.defaultFS": spec.name_node,
            "yarn.resourcemanager.address": spec.job_tracker,
            "oozie.wf.application.path": job.app_path,
        }
        runner = ActionRunner(
            spec,
            namespace=self.ns,
            workdir=self.work_root / job.id / f"{action.name}-{action.attempt}",
            app_dir=job.app_dir,
            libpaths=libpaths,
            job_id=job.id,
            action_id=action.id,
            action_conf=action_conf,
            checker=Checker(self.ns, self._faults),
        )
        self._runners[action.id] = runner

        def started() -> None:
            self.executions[job.id] += 1
            self._log(job, f"action {action.name} process started: {' '.join(spec.command().split()[:1])}")

        try:
            outcome = await runner.run(on_start=started)
        finally:
            self._runners.pop(action.id, None)
        if outcome.started:
            self._log(job, f"action {action.name} process exited with code {outcome.exit_code}")
        return outcome

    def _action_done(self, job: Job, action: Action, node: ActionDef, outcome: Outcome) -> None:
        if job.status == "SUSPENDED":
            action.parked = outcome  # ActionEnd waits for the job to be resumed
            return
        action.end_time = time.time()
        if outcome.ok:
            action.status = "OK"
            action.external_status = "SUCCEEDED"
            action.transition = node.ok_to
            action.data = outcome.data
        else:
            action.status = "ERROR"
            action.external_status = "FAILED/KILLED"
            action.error_code = outcome.error_code or str(outcome.exit_code)
            action.error_message = outcome.error_message
            action.transition = node.error_to
        job.touch()
        self._log(job, f"action {action.name} {action.status}, transition to {action.transition}")
        self._notify_action(job, action)
        self._enter(job, action.transition)

    def _fail_job(self, job: Job, action: Action, code: str, message: str) -> None:
        """``failJob``: the action FAILED and the job FAILED, no error transition."""
        action.status = "FAILED"
        action.error_code = code
        action.error_message = message
        action.end_time = time.time()
        if action.external_status == "RUNNING":
            action.external_status = "FAILED"
        self._notify_action(job, action)
        self._kill_actions(job)
        job.status = "FAILED"
        job.end_time = time.time()
        job.touch()
        self._log(job, f"action {action.name} FAILED ({code}: {message}); job FAILED")
        self._notify_job(job)

    def _kill_actions(self, job: Job) -> None:
        for a in job.actions:
            if a.complete:
                continue
            a.status = "KILLED"
            a.end_time = time.time()
            if a.external_id and a.external_id != "-":
                a.external_status = "KILLED"
            runner = self._runners.get(a.id)
            if runner is not None:
                runner.kill()
            if a.task is not None and not a.task.done() and a.task is not asyncio.current_task():
                a.task.cancel()

    # -- management (docs/hadoop-protocol.md, "Managing a job") -------------------------
    def kill(self, job: Job) -> None:
        if job.status in ("SUCCEEDED", "KILLED"):
            return  # E0725, logged only
        self._kill_actions(job)
        if job.status != "FAILED":
            job.status = "KILLED"
        job.end_time = job.end_time or time.time()
        job.touch()
        self._log(job, f"killed by user; {job.status}")
        self._notify_job(job)

    def suspend(self, job: Job) -> None:
        if job.status != "RUNNING":
            return  # E0727, logged only
        job.status = "SUSPENDED"
        job.touch()
        self._log(job, "suspended by user")
        self._notify_job(job)

    def resume(self, job: Job) -> None:
        if job.status != "SUSPENDED":
            return  # E1100, logged only
        job.status = "RUNNING"
        job.touch()
        self._log(job, "resumed")
        self._notify_job(job)
        for a in list(job.actions):
            node = job.workflow.nodes.get(a.name)
            if not isinstance(node, ActionDef):
                continue
            if a.parked is not None:
                outcome, a.parked = a.parked, None
                self._action_done(job, a, node, outcome)
            elif a.status == "START_MANUAL" or (a.status == "PREP" and (a.task is None or a.task.done())):
                a.status = "PREP"
                self._spawn_action(job, a, node)

    def start_job(self, job: Job) -> None:
        if job.status == "PREP":
            self.start(job)
        elif job.status == "RUNNING":
            raise OozieError(400, "E0801", f"Workflow already running, workflow [{job.id}]")
        # any other status: the PreconditionException is swallowed, 200

    def rerun(self, job: Job, body: dict[str, str]) -> None:
        if job.status not in TERMINAL:
            raise OozieError(400, "E0805", f"Workflow job not completed, status [{job.status}]")
        if not body.get("oozie.wf.application.path"):
            raise OozieError(400, "E0401", "Missing configuration property [oozie.wf.application.path]")
        skip = body.get("oozie.wf.rerun.skip.nodes")
        failnodes = body.get("oozie.wf.rerun.failnodes")
        if skip is not None and failnodes is not None:
            raise OozieError(
                400,
                "E0404",
                "Only one of the properties are allowed [oozie.wf.rerun.skip.nodes OR oozie.wf.rerun.failnodes]",
            )
        conf = {**job.conf, **body, "user.name": job.user}
        app_dir, app_path, definition, wf, defaults = self._load_app(conf)
        conf = resolve_configuration({**defaults, **conf})
        if skip is not None:
            nodes = {n.strip() for n in skip.split(",") if n.strip()}
            for n in nodes:
                prev = job.action(n)
                if prev is None or prev.status != "OK":
                    raise OozieError(400, "E0806", f"Action did not complete in previous run, action [{n}]")
        elif (failnodes or "").lower() == "true":
            nodes = {a.name for a in job.actions if not a.type.startswith(":") and a.status == "OK"}
        else:
            nodes = set()
        job.conf, job.conf_xml = conf, to_xml(conf)
        job.app_dir, job.app_path, job.definition, job.workflow = app_dir, app_path, definition, wf
        job.skip_nodes = nodes
        job.actions = [a for a in job.actions if a.name in nodes]
        job.run += 1
        self._log(job, f"rerun {job.run}, skipping {sorted(nodes)}")
        self.start(job)

    async def close(self) -> None:
        """Stop every running action: SIGTERM, then SIGKILL after a grace period."""
        runners = list(self._runners.values())
        for runner in runners:
            runner.kill()
        tasks = [a.task for j in self.jobs.values() for a in j.actions if a.task is not None and not a.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(r.reap() for r in runners), return_exceptions=True)

    def stats(self) -> dict[str, Any]:
        by_status = Counter(j.status for j in self.jobs.values())
        return {
            "submissions": dict(self.submissions),
            "submitted": self.submitted,
            "executions": dict(self.executions),
            "jobs": dict(by_status),
        }
