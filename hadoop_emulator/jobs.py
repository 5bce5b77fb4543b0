"""Workflow jobs and actions as Oozie keeps them, and their JSON (docs/hadoop-protocol.md,
"Job information"): exactly the keys
``WorkflowJobBean.toJSONObject`` / ``WorkflowActionBean.toJSONObject`` emit, with
RFC-822 dates in the requested time zone."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hadoop_emulator.workflow_xml import WorkflowDef

JOB_STATUSES = ("PREP", "RUNNING", "SUCCEEDED", "KILLED", "FAILED", "SUSPENDED")
TERMINAL = frozenset({"SUCCEEDED", "KILLED", "FAILED"})
ACTION_COMPLETE = frozenset({"OK", "ERROR", "KILLED", "FAILED"})
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def zone(name: str | None) -> Any:
    """Java's ``TimeZone.getTimeZone``: unknown names fall back to GMT."""
    if not name or name.upper() in ("GMT", "UTC"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def rfc822(ts: float | None, tz: Any = None) -> str | None:
    """``EEE, dd MMM yyyy HH:mm:ss zzz`` (Locale.US), e.g. ``Thu, 01 Jan 2009 00:00:00 GMT``."""
    if ts is None:
        return None
    if tz is None:
        d = datetime.fromtimestamp(ts, UTC)
        name = "GMT"
    else:
        d = datetime.fromtimestamp(ts, tz)
        name = d.tzname() or "GMT"
    return f"{_DAYS[d.weekday()]}, {d.day:02d} {_MONTHS[d.month - 1]} {d.year} {d:%H:%M:%S} {name}"


@dataclass
class Action:
    id: str
    name: str
    type: str
    conf: str | None = None
    status: str = "PREP"
    retries: int = 0
    start_time: float | None = None
    end_time: float | None = None
    transition: str | None = None
    data: str | None = None
    stats: str | None = None
    external_child_ids: str | None = None
    external_id: str | None = None
    external_status: str | None = None
    tracker_uri: str | None = None
    console_url: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    user_retry_interval: int = 10
    user_retry_count: int = 0
    user_retry_max: int = 0
    cred: str | None = None
    # Emulator bookkeeping (not serialized).
    attempt: int = 0
    task: asyncio.Task | None = None
    parked: Any = None  # an outcome waiting for the job to be resumed

    @property
    def complete(self) -> bool:
        return self.status in ACTION_COMPLETE

    def to_json(self, tz: Any = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "conf": self.conf,
            "status": self.status,
            "retries": self.retries,
            "startTime": rfc822(self.start_time, tz),
            "endTime": rfc822(self.end_time, tz),
            "transition": self.transition,
            "data": self.data,
            "stats": self.stats,
            "externalChildIDs": self.external_child_ids,
            "externalId": self.external_id,
            "externalStatus": self.external_status,
            "trackerUri": self.tracker_uri,
            "consoleUrl": self.console_url,
            "errorCode": self.error_code,
            "errorMessage": self.error_message,
            "toString": f"Action name[{self.name}] status[{self.status}]",
            "userRetryInterval": self.user_retry_interval,
            "userRetryCount": self.user_retry_count,
            "userRetryMax": self.user_retry_max,
            "cred": self.cred,
        }


@dataclass
class Job:
    id: str
    app_name: str
    app_path: str
    app_dir: str  # HDFS path of the application directory
    conf: dict[str, str]
    conf_xml: str
    user: str
    definition: str
    workflow: WorkflowDef
    console_url: str
    external_id: str | None = None
    parent_id: str | None = None
    group: str | None = None
    acl: str | None = None
    status: str = "PREP"
    run: int = 0
    created_time: float = field(default_factory=time.time)
    last_modified_time: float = field(default_factory=time.time)
    start_time: float | None = None
    end_time: float | None = None
    actions: list[Action] = field(default_factory=list)
    skip_nodes: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    def touch(self) -> None:
        self.last_modified_time = time.time()

    def action(self, name: str) -> Action | None:
        for a in reversed(self.actions):
            if a.name == name:
                return a
        return None

    def to_json(self, tz: Any = None, *, listing: bool = False, actions: list[Action] | None = None) -> dict[str, Any]:
        """The ``show=info`` job object. ``listing``: as in ``GET /jobs`` (no appPath, conf or actions)."""
        shown = [] if listing else (self.actions if actions is None else actions)
        return {
            "id": self.id,
            "appName": self.app_name,
            "appPath": None if listing else self.app_path,
            "externalId": self.external_id,
            "parentId": self.parent_id,
            "conf": None if listing else self.conf_xml,
            "status": self.status,
            "lastModTime": rfc822(self.last_modified_time, tz),
            "createdTime": rfc822(self.created_time, tz),
            "startTime": rfc822(self.start_time, tz),
            "endTime": rfc822(self.end_time, tz),
            "user": self.user,
            "group": self.group,
            "acl": self.acl,
            "run": self.run,
            "consoleUrl": self.console_url,
            "actions": [a.to_json(tz) for a in shown],
            "toString": f"Workflow id[{self.id}] status[{self.status}]",
        }
