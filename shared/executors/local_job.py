"""The supervisor of one local job: ``python -m shared.executors.local_job JOB_DIR``.

It runs detached from the action manager, so a job outlives the manager that submitted
it. It waits for a slot (a flock on one of N slot files, shared by every process that
sees the jobs folder), runs the action's argv (never through a shell), writes
``status.json`` atomically at each step and finally calls the notification URL, as Oozie
would. Other processes, possibly in other containers, know it is alive by the
``heartbeat`` file it touches every second, and ask it to stop by creating ``kill``:
no process ids cross process namespaces. Standard library only: it starts fast.

The notification URL carries the action's callback secret, so it is never written to
the job folder, nor are the job's secret values (docs/planning.md, "Secret values"): the
executor sends both over this process's stdin (the URL, then a JSON line), which is read once at
start and then replaced by ``/dev/null``. The job inherits neither (its stdin is
``/dev/null``, no other descriptor is passed, its environment and argv come from
``request.json``). Everything the supervisor writes is private to its user (umask 077);
the job runs with the umask the supervisor was started with.

Whatever goes wrong (an argv or environment the OS refuses, an error of the supervisor
itself), the job ends FAILED with the reason in ``status.json`` and the URL is notified:
a job never stays PREP until its heartbeat times out.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
from pathlib import Path

from shared.callback_batches import BATCH_MAX, BATCH_PATH, CALLBACK_PATH, entry
from shared.executors import process_tree, sandbox


def write_status(job_dir: Path, **fields: object) -> None:
    path = job_dir / "status.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(fields)
    replace_status(job_dir, current)


def replace_status(job_dir: Path, status: dict[str, object]) -> None:
    """Write ``status.json`` whole, atomically (readers see the old or the new one)."""
    tmp = f"{job_dir}/status.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(status).encode())
    finally:
        os.close(fd)
    os.replace(tmp, f"{job_dir}/status.json")


HEARTBEAT_EVERY = 1.0
KILL_GRACE = 10.0  # seconds between SIGTERM and SIGKILL
NOTIFY_URL_WAIT = 10.0  # the executor writes the URL right after starting us


def beat(job_dir: Path) -> None:
    (job_dir / "heartbeat").touch()


class Slot:
    """A slot held: the flocked descriptor of its file, until closed."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def try_slot(slots_dir: Path, slots: int) -> Slot | None:
    """A free slot, locked (a flock on one of the ``slots`` slot files, shared by every
    process that sees the jobs folder) and held until closed; None if all are taken."""
    for i in range(slots):
        path = f"{slots_dir}/slot-{i}"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            slots_dir.mkdir(exist_ok=True)  # in the jobs folder, never made again once removed
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return Slot(fd)
        except BlockingIOError:
            os.close(fd)
    return None


def acquire_slot(slots_dir: Path, slots: int, job_dir: Path) -> Slot | None:
    last = 0.0
    while True:
        if (job_dir / "kill").exists():
            return None
        if time.time() - last >= HEARTBEAT_EVERY:
            beat(job_dir)
            last = time.time()
        if (slot := try_slot(slots_dir, slots)) is not None:
            return slot
        time.sleep(0.05)


def ending(job_dir: Path, rc: int, killed: bool) -> tuple[str, str | None]:
    """A job's end state and error from its exit code: KILLED if it was stopped on
    request, else SUCCEEDED or FAILED with the tail of its stderr."""
    if killed:
        return "KILLED", "killed on request"
    if rc == 0:
        return "SUCCEEDED", None
    tail = (job_dir / "stderr.log").read_bytes()[-2000:].decode(errors="replace").strip()
    headline = exception_headline(job_dir)
    if headline and not tail.endswith(headline):
        # The tail of a JVM's log (Spark's) is stack frames and shutdown lines: the
        # exception that failed the job is named first.
        return "FAILED", f"exit code {rc}: {headline}" + (f"; stderr ends: {tail}" if tail else "")
    return "FAILED", f"exit code {rc}" + (f": {tail}" if tail else "")


# A line naming an exception, as Python and Java print them ("ZeroDivisionError: ...",
# "org.apache.spark.SparkException: ...").
_HEADLINE = re.compile(rb"^[A-Za-z_][\w.$]*(?:Error|Exception)(?::[^\n]*)?$", re.M)


def exception_headline(job_dir: Path) -> str | None:
    """The last exception line of the job's stderr, else of its stdout (a PySpark driver's
    traceback goes to its standard output), within their last 64 KiB."""
    for name in ("stderr.log", "stdout.log"):
        try:
            with open(job_dir / name, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
                found = _HEADLINE.findall(f.read())
        except OSError:
            continue
        if found:
            return found[-1].decode(errors="replace").strip()[:500]
    return None


def read_handover(timeout: float = NOTIFY_URL_WAIT) -> tuple[str, dict[str, str]]:
    """The notification URL and the job's secret values (a JSON line after it) from stdin
    (until EOF, or ``timeout``); stdin is then ``/dev/null``. Empty if the executor died
    before sending them: the poller finds the job's end anyway."""
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([0], [], [], left)[0]:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    url, _, rest = data.decode(errors="replace").strip().partition("\n")
    try:
        secrets = json.loads(rest) if rest.strip() else {}
    except ValueError:
        secrets = {}
    return url.strip(), {str(k): str(v) for k, v in secrets.items()} if isinstance(secrets, dict) else {}


class Notifier:
    """Calls notification URLs over connections kept alive, a few per server: a runner
    calls the same callback server at every job's end, so each call after the first
    skips connecting (docs/architecture.md, "The local job runner"). Thread-safe: the
    runner calls it from worker threads."""

    KEEP = 8  # idle connections kept per server

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        # Servers that answered a batch 404 or 405 (a callback service older than
        # ``/callback-batch``): sent GETs from then on.
        self.unbatched: set[tuple[str, str]] = set()

    def call(self, url: str) -> bool:
        """One GET; True if answered 200. Raises on a connection error."""
        parts = urllib.parse.urlsplit(url)
        path = f"{parts.path or '/'}{'?' + parts.query if parts.query else ''}"
        return self.request((parts.scheme, parts.netloc), "GET", path) == 200

    def request(self, key: tuple[str, str], method: str, path: str, body: bytes | None = None) -> int:
        """One request to the server ``key`` (scheme, host:port); its status. Raises on a
        connection error."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            conn = idle.pop() if idle else None
        kept = conn is not None
        if conn is None:
            kind = http.client.HTTPSConnection if key[0] == "https" else http.client.HTTPConnection
            conn = kind(key[1], timeout=10)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
        except Exception:
            conn.close()
            if kept:  # the server closed a kept connection meanwhile: once more, on a new one
                return self.request(key, method, path, body)
            raise
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                (idle := self._idle.setdefault(key, [])).append(conn)
                while len(idle) > self.KEEP:
                    idle.pop(0).close()
        return resp.status


NOTIFIER = Notifier()


def notice_target(url: str, job_id: str, state: str) -> str:
    """The URL to call for a job's notice: its ``$jobId`` and ``$status`` filled in."""
    parts = urllib.parse.urlsplit(url.replace("$jobId", job_id).replace("$status", state))
    # An action id may hold characters a URL path cannot (a space): percent-encode them.
    return parts._replace(path=urllib.parse.quote(parts.path, safe="/%:@!$&'()*+,;=-._~")).geturl()


def batch_key(target: str) -> tuple[str, str, str] | None:
    """What notices may ride together in one batch: those to one callback service
    (scheme, host:port and the path before ``/callback/``); None for a URL of another
    shape, always called alone."""
    parts = urllib.parse.urlsplit(target)
    at = parts.path.rfind(CALLBACK_PATH)
    if at < 0 or parts.scheme not in ("http", "https"):
        return None
    return parts.scheme, parts.netloc, parts.path[:at]


def notify(url: str, job_id: str, state: str) -> None:
    """Best effort (three tries): a lost notification only delays the end until the next poll.
    Errors are swallowed, never logged: their text could hold the URL, and so the secret."""
    if url:
        call(notice_target(url, job_id, state))


def call(target: str) -> None:
    """GET ``target``, best effort, three tries (``notify``)."""
    for attempt in range(3):
        try:
            if NOTIFIER.call(target):
                return
        except Exception:
            pass
        time.sleep(0.5 * (attempt + 1))


def notify_all(targets: list[str]) -> None:
    """Call notices that came together (``notice_target``'s, of one ``batch_key``), as one
    ``POST /callback-batch`` if there are several: a JSON list of what each GET would have
    asked. A batch refused whole (a 4xx) is sent as GETs; a server without the endpoint
    (404, 405), from then on.
    Best effort as ``notify``; errors are swallowed, never logged (the URLs hold tokens)."""
    key = batch_key(targets[0]) if targets else None
    if len(targets) < 2 or key is None or key[:2] in NOTIFIER.unbatched:
        for target in targets:
            call(target)
        return
    for start in range(0, len(targets), BATCH_MAX):
        chunk = targets[start : start + BATCH_MAX]
        body = json.dumps([entry(t, len(key[2])) for t in chunk]).encode()
        for attempt in range(3):
            try:
                status = NOTIFIER.request(key[:2], "POST", key[2] + BATCH_PATH, body)
            except Exception:
                status = 0
            if status == 200:
                break
            if 400 <= status < 500:  # refused whole (none of it taken): each its own GET
                if status in (404, 405):  # no such endpoint: GETs from then on
                    NOTIFIER.unbatched.add(key[:2])
                for target in chunk:
                    call(target)
                break
            time.sleep(0.5 * (attempt + 1))


class Supervisor:
    def __init__(self, job_dir: Path, notify_url: str, job_umask: int, secrets: dict[str, str] | None = None) -> None:
        self.job_dir = job_dir
        self.notify_url = notify_url
        self.secrets = secrets or {}  # added to the request's environment, never written
        self.job_umask = job_umask
        self.child: subprocess.Popen | None = None
        self.slot = None
        self.killed = False
        self.killed_at = 0.0
        self.sandboxed = False

    def on_term(self, signum: int, frame: object) -> None:
        self.killed, self.killed_at = True, time.time()
        if self.child is not None and self.child.poll() is None:
            # Every process of the job (its group), but a sandbox's bwrap (local_runner.terminate).
            spare = self.child.pid if self.sandboxed else None
            process_tree.signal_group(self.child.pid, signal.SIGTERM, spare=spare)

    def finish(self, state: str, error: str | None, **fields: object) -> None:
        write_status(self.job_dir, state=state, ended_at=time.time(), error=error, **fields)
        if self.slot is not None:
            self.slot.close()
            self.slot = None
        notify(self.notify_url, self.job_dir.name, state)

    def run(self) -> int:
        job_dir = self.job_dir
        signal.signal(signal.SIGTERM, self.on_term)
        beat(job_dir)
        request = json.loads((job_dir / "request.json").read_text())
        write_status(job_dir, state="PREP", submitted_at=time.time())
        self.slot = acquire_slot(Path(request["slots_dir"]), int(request["slots"]), job_dir)
        if self.slot is None or self.killed:
            self.finish("KILLED", "killed before it started")
            return 0
        argv = request["argv"]
        self.sandboxed = bool(request.get("sandbox"))
        with open(job_dir / "stdout.log", "wb") as out, open(job_dir / "stderr.log", "wb") as err:
            started = time.time()
            try:
                self.child = subprocess.Popen(
                    argv,
                    cwd=request["cwd"],
                    env={**request["env"], **self.secrets},
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    umask=self.job_umask,
                    start_new_session=True,  # a group of its own: a kill reaches all its processes
                )
            except Exception as exc:  # OSError, and ValueError for a NUL or an "=" the OS cannot take
                program = repr(argv[0]) if argv else "an empty command"
                self.finish("FAILED", f"could not start {program}: {exc}", started_at=started)
                return 0
            write_status(job_dir, state="RUNNING", pid=self.child.pid, started_at=started)
            last = time.time()
            while True:
                try:
                    rc = self.child.wait(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.time() - last >= HEARTBEAT_EVERY:
                    beat(job_dir)
                    last = time.time()
                if not self.killed and (job_dir / "kill").exists():
                    self.on_term(signal.SIGTERM, None)
                elif self.killed and time.time() - self.killed_at > KILL_GRACE:
                    process_tree.signal_group(self.child.pid, signal.SIGKILL)
        # What the job left running ends with it, before its end is told (local_runner.wait).
        left = process_tree.end(self.child.pid)
        if spec := request.get("sandbox"):
            sandbox.collect(spec)
        if left:
            state, error = "FAILED", f"processes {left} of the job did not end after SIGKILL"
        elif self.sandboxed and not self.killed and (why := sandbox.launch_error(job_dir, rc, argv)):
            state, error = "FAILED", why
        else:
            state, error = ending(job_dir, rc, self.killed)
        self.finish(state, error, exit_code=rc)
        return 0

    def crashed(self, exc: BaseException) -> None:
        """The supervisor itself failed: stop the job (nothing would watch it) and say why."""
        traceback.print_exc()  # to supervisor.log
        if self.child is not None:
            process_tree.signal_group(self.child.pid, signal.SIGKILL)
            self.child.wait()
            process_tree.end(self.child.pid)
        try:
            self.finish("FAILED", f"the local job supervisor failed: {type(exc).__name__}: {exc}")
        except Exception:
            traceback.print_exc()


def main(job_dir: Path) -> int:
    job_umask = os.umask(0o077)
    url, secrets = read_handover()
    supervisor = Supervisor(job_dir, url, job_umask, secrets)
    try:
        return supervisor.run()
    except BaseException as exc:
        supervisor.crashed(exc)
        return 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
