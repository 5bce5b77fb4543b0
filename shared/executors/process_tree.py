"""A local job's processes, as one process group (docs/architecture.md, "The local job
runner"): each job is started as the leader of a session and group of its own, so that
a kill or a timeout reaches every process it started, not only the first, and its end
is reported only once none of them is left (a retry never runs beside the old attempt).

A process that leaves the group (``setsid``, a daemon's double fork) is out of reach
here; in the sandbox (``shared.executors.sandbox``) the job also has a PID namespace of
its own, whose every process the kernel ends with it."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")
# How long the group's end is waited for after SIGKILL before the job is reported with
# the processes that are left (in uninterruptible sleep, say).
END_WAIT = 30.0


def members(pgid: int) -> list[int]:
    """The live processes of group ``pgid`` (zombies are gone: they run nothing)."""
    # Signal 0 first: a group with no process at all (the common end) costs no scan of /proc.
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return []
    if not PROC.is_dir():
        return [pgid]
    found = []
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def gone(pgid: int) -> bool:
    """Whether no process of the group is left (a zombie counts: its reaper has yet to)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def signal_group(pgid: int, sig: int, spare: int | None = None) -> None:
    """Send ``sig`` to every process of the group; ``spare``: one left out (a sandbox's
    own bwrap, whose end would SIGKILL the job at once, with no time to stop cleanly)."""
    if spare is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        return
    for pid in members(pgid):
        if pid != spare:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def end(pgid: int, wait: float = END_WAIT) -> list[int]:
    """SIGKILL whatever is left of the group until nothing is: the processes still there
    after ``wait`` seconds, if any (empty: the job's processes are all gone)."""
    deadline = time.monotonic() + wait
    while live := members(pgid):
        if time.monotonic() > deadline:
            return live
        signal_group(pgid, signal.SIGKILL)
        time.sleep(0.02)
    return []
