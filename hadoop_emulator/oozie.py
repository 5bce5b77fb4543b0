"""The Oozie web services (A): ``/oozie/versions``, ``/oozie/v{1,2}/jobs``,
``/oozie/v{1,2}/job/<id>`` and a little of ``/admin``, plus the emulator's own control
endpoints under ``/emulator/`` on the same port.

Every Oozie error carries ``oozie-error-code`` and ``oozie-error-message`` headers and the
5.x JSON body ``{"httpStatusCode": .., "errorMessage": ..}``.
"""

from __future__ import annotations

import html
import json
import re
import time
from calendar import timegm
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from hadoop_emulator.engine import Engine, OozieError
from hadoop_emulator.faults import Faults
from hadoop_emulator.hadoop_conf import ConfError, parse_configuration
from hadoop_emulator.jobs import JOB_STATUSES, Job, zone
from hadoop_emulator.notifications import Notifier

JSON_UTF8 = 'application/json; charset="UTF-8"'
XML_UTF8 = 'application/xml; charset="UTF-8"'
TEXT_UTF8 = 'text/plain; charset="UTF-8"'
VERSIONS = [0, 1, 2]
SHOW_VALUES = (
    "info",
    "definition",
    "log",
    "errorlog",
    "auditlog",
    "graph",
    "status",
    "retries",
    "allruns",
    "jmstopic",
    "missing-dependencies",
    "wf-actions",
)
JOB_ACTIONS = (
    "start",
    "suspend",
    "resume",
    "kill",
    "rerun",
    "dryrun",
    "change",
    "ignore",
    "coord-rerun",
    "bundle-rerun",
    "update",
    "sla-enable",
    "sla-disable",
    "sla-change",
)
FILTER_NAMES = ("text", "user", "name", "group", "status", "id", "startcreatedtime", "endcreatedtime", "sortby")
_PATH = re.compile(r"/oozie/v(\d+)/(jobs|job|admin)(?:/(.*))?")
_OFFSET = re.compile(r"-(\d+)([dhm])")


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(body).encode(), headers={"Content-Type": JSON_UTF8})


class ProxyRefused(Exception):
    """A doAs the proxy-user configuration does not allow."""


def error_response(status: int, code: str | None, message: str) -> web.Response:
    """5.x error: the two headers (when there is an Oozie code) and the JSON body."""
    headers = {"Content-Type": JSON_UTF8}
    if code is not None:
        headers["oozie-error-code"] = code
        headers["oozie-error-message"] = " ".join(message.split())
    body = {"httpStatusCode": status, "errorMessage": html.escape(message)}
    return web.Response(status=status, body=json.dumps(body).encode(), headers=headers)


def _int_param(value: str | None, default: int) -> int:
    if value is None or value.strip() == "":
        return default
    try:
        n = int(value.strip())
    except ValueError:
        raise OozieError(400, "E1603", "Invalid user request") from None
    return n if n >= 1 else default


def _parse_time(value: str) -> float | None:
    m = _OFFSET.fullmatch(value)
    if m:
        unit = {"d": 86400, "h": 3600, "m": 60}[m.group(2)]
        return time.time() - int(m.group(1)) * unit
    try:
        return float(timegm(time.strptime(value, "%Y-%m-%dT%H:%MZ")))
    except ValueError:
        return None


def parse_filter(text: str | None) -> dict[str, list[Any]]:
    """A jobs filter (docs/emulator.md, "Oozie"): ``name=value[;name=value]*``; names lower-cased;
    strict values (E0420)."""
    out: dict[str, list[Any]] = {}
    if not text:
        return out
    for pair in text.split(";"):
        if pair == "":
            continue
        parts = pair.split("=")
        if len(parts) != 2:
            raise OozieError(
                400,
                "E0420",
                f"Invalid jobs filter [{text}], filter elements must be semicolon-separated name=value pairs",
            )
        name, value = parts[0].strip().lower(), parts[1].strip()
        if name not in FILTER_NAMES:
            raise OozieError(400, "E0420", f"Invalid jobs filter [{text}], invalid name [{name}]")
        if name == "status" and value not in JOB_STATUSES:
            raise OozieError(
                400,
                "E0420",
                f"Invalid jobs filter [{text}], invalid status value [{value}]. Valid "
                f"status values are: [{', '.join(JOB_STATUSES)}]",
            )
        parsed: Any = value
        if name in ("startcreatedtime", "endcreatedtime"):
            parsed = _parse_time(value)
            if parsed is None:
                raise OozieError(
                    400,
                    "E0420",
                    f"Invalid jobs filter [{text}], Specified value [{value}] for filter name [{name}] is invalid",
                )
        if name == "sortby":
            if value.lower() not in ("createdtime", "lastmodifiedtime"):
                raise OozieError(
                    400,
                    "E0420",
                    f"Invalid jobs filter [{text}], invalid sortby [{value}]. Valid "
                    "values are [createdTime, lastModifiedTime]",
                )
            parsed = value.lower()
        out.setdefault(name, []).append(parsed)
    return out


def _matches(job: Job, f: dict[str, list[Any]]) -> bool:
    checks = {
        "user": lambda v: job.user == v,
        "name": lambda v: job.app_name == v,
        "group": lambda v: job.group == v,
        "status": lambda v: job.status == v,
        "id": lambda v: job.id == v,
        "text": lambda v: v in job.app_name or v in job.user or v in job.id,
        "startcreatedtime": lambda v: job.created_time >= v,
        "endcreatedtime": lambda v: job.created_time <= v,
    }
    for name, values in f.items():
        if name in checks and not any(checks[name](v) for v in values):
            return False
    return True


class OozieApp:
    def __init__(
        self,
        engine: Engine,
        notifier: Notifier,
        get_faults: Callable[[], Faults],
        set_faults: Callable[[Faults], None],
        reset_faults: Callable[[], Faults],
        stats: Callable[[], dict[str, Any]],
        count_unavailable: Callable[[], None],
    ) -> None:
        self.engine = engine
        self.notifier = notifier
        self.get_faults = get_faults
        self.set_faults = set_faults
        self.reset_faults = reset_faults
        self.stats = stats
        self.count_unavailable = count_unavailable

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    # -- dispatch ---------------------------------------------------------------------
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith("/emulator/"):
            return await self.emulator(request)
        faults = self.get_faults()
        if faults.http_503_burst_oozie > 0:
            faults.http_503_burst_oozie -= 1
            self.count_unavailable()
            return error_response(503, "E0002", "E0002: System is in safe mode")
        try:
            return await self._route(request, path)
        except OozieError as exc:
            return error_response(exc.status, exc.code, exc.message)

    async def _route(self, request: web.Request, path: str) -> web.StreamResponse:
        method = request.method
        if path in ("/oozie", "/oozie/"):
            return web.Response(text="Oozie Web Services (Pingo emulator)\n", content_type="text/plain")
        if path == "/oozie/versions":
            if method != "GET":
                raise OozieError(400, "E0301", "Invalid resource []")
            return json_response(VERSIONS)
        m = _PATH.fullmatch(path)
        if not m or m.group(1) not in ("1", "2"):
            return error_response(404, None, f"Not Found: {path}")
        version, kind, resource = int(m.group(1)), m.group(2), (m.group(3) or "").strip()
        if kind == "jobs":
            if resource:
                raise OozieError(400, "E0301", f"Invalid resource [{resource}]")
            if method == "POST":
                return await self.submit(request)
            if method == "GET":
                return self.list_jobs(request)
            if method == "PUT":
                return self.bulk(request)
            raise OozieError(400, "E0301", "Invalid resource []")
        if kind == "job":
            if "/" in resource or not resource:
                raise OozieError(400, "E0301", f"Invalid resource [{resource}]")
            if method == "GET":
                return self.job_get(request, version, resource)
            if method == "PUT":
                return await self.job_put(request, resource)
            raise OozieError(400, "E0301", f"Invalid resource [{resource}]")
        return self.admin(request, resource)

    # -- /jobs ------------------------------------------------------------------------
    @staticmethod
    def _content_type(request: web.Request) -> None:
        raw = request.headers.get("Content-Type")
        ct = raw.split(";", 1)[0].strip().lower() if raw else ""
        if not ct:
            raise OozieError(400, "E0300", "Invalid content-type [null]")
        if ct != "application/xml":
            raise OozieError(400, "E0300", f"Invalid content-type [{ct}]")

    @staticmethod
    async def _conf_body(request: web.Request) -> dict[str, str] | web.Response:
        try:
            return parse_configuration(await request.read())
        except ConfError as exc:
            # An IOException from XConfiguration: not mapped, so a plain 500 without the oozie headers.
            return error_response(500, None, f"java.io.IOException: {exc}")

    def _user(self, request: web.Request) -> str | None:
        """Who the request acts as: ``doAs`` if the caller (``user.name``) may act for that
        user, as Oozie's ProxyUserService decides (the hosts check left out: every caller of
        the emulator is local); else ``ProxyRefused``."""
        user, do_as = request.query.get("user.name"), request.query.get("doAs")
        if not do_as or do_as == user:
            return user
        allowed = self.get_faults().proxy_users
        if user not in allowed:
            raise ProxyRefused(f"User [{user}] not defined as proxyuser")
        groups = allowed[user]
        if "*" not in groups and not set(groups) & set(self.get_faults().user_groups.get(do_as, [])):
            raise ProxyRefused(f"Unauthorized proxyuser [{user}] for user [{do_as}], not in proxyuser groups")
        return do_as

    async def submit(self, request: web.Request) -> web.StreamResponse:
        self._content_type(request)
        props = await self._conf_body(request)
        if isinstance(props, web.Response):
            return props
        action = request.query.get("action")
        if action not in (None, "start", "dryrun"):
            raise OozieError(400, "E0303", f"Invalid parameter value, [action] = [{action}]")
        jobtype = request.query.get("jobtype")
        if jobtype:
            raise OozieError(
                400,
                "E0302",
                f"Invalid parameter [jobtype={jobtype}: proxy submissions are not supported by the emulator]",
            )
        try:
            user = self._user(request)
        except ProxyRefused as exc:
            # JsonRestServlet answers an AccessControlException with 401 and E1400, its message as is.
            return error_response(401, "E1400", str(exc))
        job = self.engine.submit(props, user, start=action == "start", dryrun=action == "dryrun")
        return json_response({"id": job.id if job is not None else "OK"}, status=201)

    def _listing(self, request: web.Request, apply: Callable[[Job], None] | None = None) -> dict[str, Any]:
        jobtype = request.query.get("jobtype", "wf") or "wf"
        offset = _int_param(request.query.get("offset"), 1)
        length = _int_param(request.query.get("len"), 50)
        flt = parse_filter(request.query.get("filter"))
        if "wf" in jobtype:
            key = "workflows"
        elif "coord" in jobtype:
            return {"coordinatorjobs": [], "total": 0, "offset": offset, "len": length}
        elif "bundle" in jobtype:
            return {"bundlejobs": [], "total": 0, "offset": offset, "len": length}
        else:
            raise OozieError(400, "E0303", f"Invalid parameter value, [jobtype] = [{jobtype}]")
        jobs = [j for j in self.engine.jobs.values() if _matches(j, flt)]
        if flt.get("sortby", ["createdtime"])[-1] == "lastmodifiedtime":
            jobs.sort(key=lambda j: (j.last_modified_time, j.id), reverse=True)
        else:
            jobs.sort(key=lambda j: (j.created_time, j.id), reverse=True)
        page = jobs[offset - 1 : offset - 1 + length]
        if apply is not None:
            for j in page:
                apply(j)
        tz = zone(request.query.get("timezone"))
        return {key: [j.to_json(tz, listing=True) for j in page], "total": len(jobs), "offset": offset, "len": length}

    def list_jobs(self, request: web.Request) -> web.Response:
        external = request.query.get("external-id")
        if external is not None:
            return json_response({"id": self.engine.find_external(external)})
        return json_response(self._listing(request))

    def bulk(self, request: web.Request) -> web.Response:
        action = request.query.get("action")
        if action is None:
            raise OozieError(400, "E0305", "Missing parameter [action]")
        ops = {"kill": self.engine.kill, "suspend": self.engine.suspend, "resume": self.engine.resume}
        if action not in ops:
            raise OozieError(400, "E0303", f"Invalid parameter value, [action] = [{action}]")
        if not request.query.get("filter"):
            raise OozieError(400, "E1603", "Invalid user request")
        return json_response(self._listing(request, ops[action]))

    # -- /job/<id> --------------------------------------------------------------------
    def _job(self, job_id: str, code: str = "E0604") -> Job:
        job = self.engine.jobs.get(job_id)
        if job is None:
            text = f"Job does not exist [{job_id}]" if code == "E0604" else f"Action does not exist [{job_id}]"
            raise OozieError(400, code, text)
        return job

    def job_get(self, request: web.Request, version: int, resource: str) -> web.StreamResponse:
        show = request.query.get("show") or "info"
        if show not in SHOW_VALUES:
            raise OozieError(400, "E0303", f"Invalid parameter value, [show] = [{show}]")
        if show == "status" and version == 1:
            raise OozieError(400, "E0302", "Invalid parameter [Not supported in this version]")
        if show in ("errorlog", "auditlog") and version == 1:
            # v1's servlet refuses both before looking the job up, with its own wording.
            raise OozieError(400, "E0302", "Invalid parameter [Not supported in v1]")
        job_id, _, node = resource.partition("@")
        # Oozie reads the status through a query that raises E0605 for a missing row;
        # show=info raises E0604 ("Job does not exist").
        job = self._job(job_id, "E0605" if show == "status" else "E0604")
        tz = zone(request.query.get("timezone"))
        action = None
        if node:
            action = job.action(node)
            if action is None:
                raise OozieError(400, "E0605", f"Action does not exist [{resource}]")
        if show == "info":
            if action is not None:
                return json_response(action.to_json(tz))
            offset = _int_param(request.query.get("offset"), 1)
            length = request.query.get("len")
            actions = job.actions[offset - 1 :]
            if length is not None:
                actions = actions[: _int_param(length, len(job.actions))]
            return json_response(job.to_json(tz, actions=actions))
        if show == "status":
            return json_response({"status": action.status if action is not None else job.status})
        if show == "definition":
            return web.Response(text=job.definition, headers={"Content-Type": XML_UTF8})
        if show in ("log", "errorlog", "auditlog"):
            return web.Response(text=self._log_text(job, show), headers={"Content-Type": TEXT_UTF8})
        if show == "retries" and action is not None:
            return json_response({"retries": []})
        raise OozieError(400, "E0302", f"Invalid parameter [show={show} is not supported by the emulator]")

    def _log_text(self, job: Job, show: str) -> str:
        if show == "auditlog":
            return ""
        lines = [] if show == "errorlog" else list(job.log)
        work = self.engine.work_root / job.id
        if work.is_dir():
            for d in sorted(work.iterdir()):
                for stream in ("stderr",) if show == "errorlog" else ("stdout", "stderr"):
                    f = d / stream
                    if f.is_file() and f.stat().st_size:
                        text = f.read_text(errors="replace")[-64 * 1024 :]
                        lines.append(f"----- {d.name} {stream} -----")
                        lines.extend(text.rstrip("\n").split("\n"))
        return "\n".join(lines) + ("\n" if lines else "")

    async def job_put(self, request: web.Request, resource: str) -> web.Response:
        action = request.query.get("action")
        if action is None:
            raise OozieError(400, "E0305", "Missing parameter [action]")
        if action not in JOB_ACTIONS:
            raise OozieError(400, "E0303", f"Invalid parameter value, [action] = [{action}]")
        if action == "kill":
            self.engine.kill(self._job(resource, "E0605"))
        elif action == "start":
            self.engine.start_job(self._job(resource))
        elif action == "suspend":
            self.engine.suspend(self._job(resource))
        elif action == "resume":
            self.engine.resume(self._job(resource))
        elif action == "rerun":
            job = self._job(resource)
            self._content_type(request)
            body = await self._conf_body(request)
            if isinstance(body, web.Response):
                return body
            self.engine.rerun(job, body)
        else:
            self._job(resource)
            raise OozieError(
                400, "E0302", f"Invalid parameter [action={action} is not supported by the emulator for workflow jobs]"
            )
        return web.Response(status=200)

    def admin(self, request: web.Request, resource: str) -> web.Response:
        if request.method != "GET":
            raise OozieError(400, "E0301", f"Invalid resource [{resource}]")
        if resource == "status":
            return json_response({"systemMode": "NORMAL"})
        if resource == "build-version":
            return json_response({"buildVersion": "5.2.1-pingo-emulator"})
        raise OozieError(400, "E0301", f"Invalid resource [{resource}]")

    # -- /emulator/* ------------------------------------------------------------------
    async def emulator(self, request: web.Request) -> web.Response:
        path, method = request.path, request.method
        if path == "/emulator/faults":
            if method == "GET":
                return web.json_response(self.get_faults().model_dump())
            if method == "DELETE":
                faults = self.reset_faults()
                self.notifier.faults_changed()
                return web.json_response(faults.model_dump())
            if method in ("PUT", "POST", "PATCH"):
                try:
                    patch = await request.json()
                except ValueError:
                    return web.json_response({"error": "body must be a JSON object"}, status=400)
                if not isinstance(patch, dict):
                    return web.json_response({"error": "body must be a JSON object"}, status=400)
                try:
                    faults = self.get_faults().patched(patch)
                except ValidationError as exc:
                    errors = json.loads(exc.json(include_url=False, include_context=False))
                    return web.json_response({"error": "invalid faults", "details": errors}, status=400)
                lost = None
                if faults.lose_notification_queue:
                    faults.lose_notification_queue = False
                    lost = self.notifier.lose_queue()
                self.set_faults(faults)
                self.notifier.faults_changed()
                body = faults.model_dump()
                if lost is not None:
                    body["lost"] = lost
                return web.json_response(body)
        elif path == "/emulator/stats" and method == "GET":
            return web.json_response(self.stats())
        elif path == "/emulator/notifications" and method == "GET":
            return web.json_response([n.record() for n in self.notifier.history])
        elif path == "/emulator/lose-notifications" and method == "POST":
            return web.json_response({"lost": self.notifier.lose_queue()})
        return web.json_response({"error": f"no such emulator endpoint: {method} {path}"}, status=404)
