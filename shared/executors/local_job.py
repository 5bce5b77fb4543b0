"""The supervisor of one local job: ``python -m shared.executors.local_job JOB_DIR``.

It runs detached from the action manager, so a job outlives the manager that submitted
it. It waits for a slot (a flock on one of N slot files, shared by every process that
sees the jobs folder), runs the action's argv (never through a shell), writes
``status.json`` atomically at each step and finally calls the notification URL, as Oozie
would. Other processes, possibly in other containers, know it is alive by the
``heartbeat`` file it touches every second, and ask it to stop by creating ``kill``:
no process ids cross process namespaces. Standard library only: it starts fast.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def write_status(job_dir: Path, **fields: object) -> None:
    path = job_dir / "status.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(fields)
    tmp = job_dir / "status.json.tmp"
    tmp.write_text(json.dumps(current))
    os.replace(tmp, path)


HEARTBEAT_EVERY = 1.0
KILL_GRACE = 10.0  # seconds between SIGTERM and SIGKILL


def beat(job_dir: Path) -> None:
    (job_dir / "heartbeat").touch()


def acquire_slot(slots_dir: Path, slots: int, job_dir: Path):
    slots_dir.mkdir(parents=True, exist_ok=True)
    last = 0.0
    while True:
        if (job_dir / "kill").exists():
            return None
        if time.time() - last >= HEARTBEAT_EVERY:
            beat(job_dir)
            last = time.time()
        for i in range(slots):
            f = open(slots_dir / f"slot-{i}", "a+")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return f
            except BlockingIOError:
                f.close()
        time.sleep(0.05)


def notify(url: str, job_id: str, state: str) -> None:
    target = url.replace("$jobId", job_id).replace("$status", state)
    for attempt in range(3):
        try:
            with urllib.request.urlopen(target, timeout=10) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5 * (attempt + 1))


def main(job_dir: Path) -> int:
    request = json.loads((job_dir / "request.json").read_text())
    job_id = job_dir.name
    child: subprocess.Popen | None = None
    killed = False
    killed_at = 0.0

    def on_term(signum: int, frame: object) -> None:
        nonlocal killed, killed_at
        killed, killed_at = True, time.time()
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, on_term)
    beat(job_dir)
    write_status(job_dir, state="PREP", submitted_at=time.time())
    slot = acquire_slot(Path(request["slots_dir"]), int(request["slots"]), job_dir)
    if slot is None or killed:
        write_status(job_dir, state="KILLED", ended_at=time.time(), error="killed before it started")
        notify(request["notify_url"], job_id, "KILLED")
        return 0
    with open(job_dir / "stdout.log", "wb") as out, open(job_dir / "stderr.log", "wb") as err:
        started = time.time()
        try:
            child = subprocess.Popen(
                request["argv"],
                cwd=request["cwd"],
                env=request["env"],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            write_status(
                job_dir,
                state="FAILED",
                started_at=started,
                ended_at=time.time(),
                error=f"could not start {request['argv'][0]!r}: {exc}",
            )
            notify(request["notify_url"], job_id, "FAILED")
            return 0
        write_status(job_dir, state="RUNNING", pid=child.pid, started_at=started)
        last = time.time()
        while True:
            try:
                rc = child.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if time.time() - last >= HEARTBEAT_EVERY:
                beat(job_dir)
                last = time.time()
            if not killed and (job_dir / "kill").exists():
                on_term(signal.SIGTERM, None)
            elif killed and time.time() - killed_at > KILL_GRACE:
                child.kill()
    ended = time.time()
    if killed:
        state, error = "KILLED", "killed on request"
    elif rc == 0:
        state, error = "SUCCEEDED", None
    else:
        tail = (job_dir / "stderr.log").read_bytes()[-2000:].decode(errors="replace").strip()
        state, error = "FAILED", f"exit code {rc}" + (f": {tail}" if tail else "")
    write_status(job_dir, state=state, ended_at=ended, exit_code=rc, error=error)
    slot.close()
    notify(request["notify_url"], job_id, state)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
