"""Fault-injection knobs. One :class:`Faults` object is live per emulator; it is set from
CLI flags at start and read or changed at runtime through ``GET/PUT/DELETE
/emulator/faults`` on the Oozie port. Every component reads the current object on each
use, so a change applies from the next notification, request or action on."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Faults(BaseModel):
    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    # -- notifications (docs/hadoop-protocol.md, "Notifications") --------------------
    drop_notifications: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Probability (0..1) that a notification is lost when queued: it is never sent, not retried.",
    )
    drop_next_notifications: int = Field(
        0, ge=0, description="Lose the next N notifications queued (counts down; applied before drop_notifications)."
    )
    duplicate_notifications: int = Field(
        0, ge=0, description="Extra copies queued for every notification (each delivered and retried on its own)."
    )
    notification_delay: float = Field(0.0, ge=0.0, description="Seconds before a notification's first attempt.")
    reorder_notifications: bool = Field(
        False,
        description="Hold notifications and release the held batch in reverse order: when a job's terminal "
        "notification is queued, when reorder_window passes, or when this knob is switched off.",
    )
    reorder_window: float = Field(5.0, gt=0.0, description="Longest hold (seconds) under reorder_notifications.")
    notification_retry_delay: float = Field(
        60.0, ge=0.0, description="Seconds between attempts; a notification is retried up to 3 times (real: 60)."
    )
    notification_timeout: float = Field(
        10.0, gt=0.0, description="Connect/read timeout per attempt, seconds (real: 10)."
    )
    lose_notification_queue: bool = Field(
        False,
        description="Write-only trigger: setting it true discards every pending, delayed, held or retrying "
        "notification (like an Oozie restart), then it reads false again. Also POST /emulator/lose-notifications.",
    )
    # -- jobs and actions -----------------------------------------------------------
    status_lag: float = Field(
        0.0,
        ge=0.0,
        description="Seconds between an action's process exit and the action/job status change (real: up to 600).",
    )
    fail_actions: str | None = Field(
        None,
        description="Regex searched in '<main-class or exec> <args...>': a matching action does not run and ends "
        "as if it exited with fail_exit_code.",
    )
    fail_exit_code: int = Field(1, ge=1, le=255, description="Exit code reported for fail_actions.")
    hang_actions: str | None = Field(
        None,
        description="Regex (as fail_actions): a matching action never starts a process and stays RUNNING until killed.",
    )
    fatal_actions: str | None = Field(
        None,
        description="Regex (as fail_actions): a matching action ends FAILED (errorCode JA017, launcher lost) "
        "and the job FAILED, with no error transition.",
    )
    suspend_actions: str | None = Field(
        None,
        description="Regex (as fail_actions): a matching action goes to START_MANUAL and the job is suspended "
        "automatically (SUSPENDED, and no notification is sent). Resume retries the action.",
    )
    # -- HTTP -----------------------------------------------------------------------
    http_503_burst_oozie: int = Field(
        0, ge=0, description="The next N Oozie requests (not /emulator/*) answer 503 E0002 (counts down)."
    )
    standby_burst_webhdfs: int = Field(
        0,
        ge=0,
        description="The next N WebHDFS requests, NameNode or DataNode, answer as a NameNode in standby does: "
        "403 with a StandbyException RemoteException (one shared counter, counts down).",
    )
    webhdfs_require_xsrf: bool = Field(
        False, description="Non-GET WebHDFS requests without an X-XSRF-HEADER header answer 400."
    )
    webhdfs_deny_anonymous_writes: bool = Field(
        False, description="WebHDFS writes without user.name (as dr.who) answer 403 AccessControlException."
    )

    # -- site configuration the real servers read at start (docs/emulator.md, "Proxy users") --
    proxy_users: dict[str, list[str]] = Field(
        default_factory=dict,
        description="oozie.service.ProxyUserService.proxyuser.<user>.groups and core-site's "
        "hadoop.proxyuser.<user>.groups (one setting for both servers here): the groups whose members each "
        "user may act for with Oozie's doAs and WebHDFS's doas ('*': anyone). Empty, as both ship: every "
        "impersonation is refused.",
    )
    hdfs_permissions: bool = Field(
        False,
        description="dfs.permissions.enabled: WebHDFS operations and <prepare> check owner, group and mode bits "
        "and the sticky bit as the NameNode does (403 AccessControlException); the superuser hdfs and members "
        "of supergroup bypass them. Off by default here (real HDFS: on), so a namespace needs no setup.",
    )
    user_groups: dict[str, list[str]] = Field(
        default_factory=dict, description="The groups of each user, as the cluster's group mapping answers."
    )

    @field_validator("fail_actions", "hang_actions", "fatal_actions", "suspend_actions")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value

    def patched(self, patch: dict[str, Any]) -> Faults:
        """A new, validated object: this one with ``patch`` applied (all or nothing)."""
        return Faults.model_validate({**self.model_dump(), **patch})

    @staticmethod
    def matches(pattern: str | None, command: str) -> bool:
        return pattern is not None and re.search(pattern, command) is not None
