"""What a test sees of a job's processes on this machine: those whose command line holds
a marker of its own (a job and every process it starts carry it in their argv)."""

from __future__ import annotations

import os

# Run as a job: ``python3 -c SPAWN SEEN MARKER LEAVE OUTPUT``. It records the processes of
# its marker it finds alive (another attempt's) in SEEN, then starts a child that starts a
# grandchild (which, with LEAVE "setsid", leaves the process group), all waiting 300 s.
SPAWN = r"""
import json, os, subprocess, sys, time
seen, marker, leave = sys.argv[1], sys.argv[2], sys.argv[3] == "setsid"
others = []
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            stat = open(f"/proc/{pid}/stat", "rb").read()
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            if stat[stat.rindex(b")") + 2:][:1] != b"Z" and marker.encode() in cmdline:
                others.append(int(pid))
        except OSError:
            pass
try:
    with open(seen, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "others": others}) + "\n")
except OSError:
    pass  # in a sandbox, the test's folder is not writable
grandchild = f"import os, time; {'os.setsid(); ' if leave else ''}time.sleep(300)"
child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', *sys.argv[1:]]); time.sleep(300)"
subprocess.Popen([sys.executable, "-c", child, grandchild, marker])
time.sleep(300)
"""


def marked(marker: str) -> list[int]:
    """The live processes (not zombies) whose command line holds ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X") and marker.encode() in cmdline:
            found.append(int(pid))
    return found


def spawning_action(aid: int, seen: str, marker: str, leave: bool = False, **extra: object) -> dict:
    """A SHELL action running SPAWN: it and its children run until stopped."""
    return {
        "id": aid, "name": f"spawn-{aid}", "type": "SHELL", "command": ["python3", "-c", SPAWN],
        "additionalInput": [seen, marker, "setsid" if leave else "stay"], **extra,
    }  # fmt: skip
