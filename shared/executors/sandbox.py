"""The sandbox a local job of a user runs in: bubblewrap (``bwrap``, Linux namespaces;
docs/users.md, "What a job can reach").

Every job runs as Pingo's own OS user, so without a sandbox it could reach whatever
Pingo can: the store's Unix socket, the jobs folder (other jobs' requests, logs and kill
files), other users' datasets. In the sandbox a job sees the machine read-only, with

- Pingo's data folder, the managed root, every output root (every user's), the jobs
  folder, the store's socket folder, the job runners' folder and the credential folders
  of Pingo's OS user (the pingo CLI's token, ~/.ssh, ...) hidden (empty tmpfs);
  a fresh ``/tmp``, ``/dev``, ``/proc`` and ``/run``;
- its parents' datasets and its action folder bound back read-only, and its own attempt
  output writable: the folder of attempts it writes into (``.pingo-attempts``) is an
  empty folder of its own (its "outbox"), whose content the runner moves to where the
  attempt belongs when the job has ended; a SQOOP job also gets the two folders of its
  job folder Sqoop writes its record class in, writable;
- PID and IPC namespaces of its own (it cannot see or signal any other process; when it
  ends the kernel ends every process it left) and, unless ``PINGO_JOB_NETWORK`` is set,
  a network namespace with only a loopback of its own (no store or broker port);
- no capabilities (so it cannot unmount what hides the rest), and no new privileges.

``PINGO_JOB_SANDBOX``: ``auto`` sandboxes the jobs of users (users on) where bwrap
works, ``bwrap`` every job and refuses to start where it does not, ``off`` none."""

from __future__ import annotations

import contextlib
import functools
import glob
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:  # the per-job supervisor imports this module: standard library only at run time
    from shared.config import Settings

USER_SLOT = "{user}"  # shared.config's

log = logging.getLogger(__name__)
OUTBOX_SUFFIX = ".sandbox"
# Paths every sandbox gets fresh: nothing of the host's shows through them.
FRESH = ("/tmp", "/run", "/var/tmp")


@functools.cache
def bwrap_problem() -> str | None:
    """Why bwrap cannot sandbox a job on this machine, if it cannot (tried once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (bwrap not found; apt-get install bubblewrap)"
    try:
        probe = subprocess.run(
            [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--cap-drop", "ALL",
             "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "true"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be run: {exc}"
    if probe.returncode != 0:
        return f"bwrap does not work here: {probe.stderr.strip()[-300:] or f'exit code {probe.returncode}'}"
    return None


def isolation_problem(settings: Settings) -> str | None:
    """Why the local jobs of users would not be isolated from each other and from Pingo,
    if they would not (the start-up check of docs/users.md)."""
    if settings.job_sandbox == "off":
        return "PINGO_JOB_SANDBOX=off"
    return bwrap_problem()


def _store_socket_dir(settings: Settings) -> Path | None:
    """The folder of the store's Unix socket, when the store is reached over one."""
    if settings.mongo_url is None:
        from shared.store.embedded_server import socket_path

        return socket_path((settings.data_dir / "mongo").resolve()).parent
    hosts = urlsplit(settings.mongo_url).netloc.rpartition("@")[2]
    for host in hosts.split(","):
        path = unquote(host)
        if path.startswith("/"):
            return Path(path).parent
    return None


def _credential_dirs() -> list[Path]:
    """Folders of this OS user's that hold credentials a job must not read: the pingo CLI's
    token folder (an operator's, often an admin's) and the usual clients' ones."""
    home = Path.home()
    config = Path(os.environ["XDG_CONFIG_HOME"]) if os.environ.get("XDG_CONFIG_HOME") else home / ".config"
    found = [config / "pingo", home / ".ssh", home / ".kube", home / ".aws", home / ".docker", home / ".gnupg"]
    return [p.resolve() for p in found if p.is_dir()]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Sandbox:
    bwrap: str
    # Folders a job never sees: private ones (Pingo's data, jobs, store) are never bound
    # back, nor anything that holds them; from data roots a job gets its own inputs back.
    private: tuple[Path, ...]
    data_roots: tuple[Path, ...]
    user_roots: tuple[str, ...]  # output roots with {user}: every user's is hidden
    network: bool
    every_job: bool  # PINGO_JOB_SANDBOX=bwrap: also the jobs of a Pingo with users off

    @classmethod
    def for_settings(cls, settings: Settings) -> Sandbox | None:
        """The sandbox of this host's local jobs, or None (sandbox off, or no bwrap under
        ``auto``: the start-up check then keeps such a Pingo to loopback or one user)."""
        if settings.job_sandbox == "off":
            return None
        if problem := bwrap_problem():
            if settings.job_sandbox == "bwrap":
                from shared.errors import CannotStart  # here: the per-job supervisor imports this module

                raise CannotStart(f"PINGO_JOB_SANDBOX=bwrap, and {problem}")
            log.warning("local jobs of users run without a sandbox: %s (docs/users.md)", problem)
            return None
        from shared.executors.local_runner import runtime_dir

        private = [settings.data_dir.resolve(), settings.jobs_dir, runtime_dir(), *_credential_dirs()]
        if socket_dir := _store_socket_dir(settings):
            private.append(socket_dir.resolve())
        plain = settings.output_root_list(None)
        return cls(
            bwrap=shutil.which("bwrap") or "bwrap",
            private=tuple(private),
            data_roots=(settings.managed_dir, *(Path(r).resolve() for r in plain)),
            user_roots=tuple(str(p) for p in settings.output_roots if USER_SLOT in str(p)),
            network=settings.job_network,
            every_job=settings.job_sandbox == "bwrap",
        )

    def applies(self, owner: str | None) -> bool:
        return owner is not None or self.every_job

    def hidden(self) -> list[Path]:
        """Every folder hidden from a job, outermost first, none inside another."""
        found = [*self.private, *self.data_roots]
        for root in self.user_roots:
            # /home/{user}/out: the folder holding every user's folder (/home) is hidden;
            # a {user} right under / leaves only the folders there now to hide.
            head = root.split(USER_SLOT, 1)[0]
            parent = Path(head).parent if not head.endswith("/") else Path(head)
            if parent != Path("/"):
                found.append(parent.resolve())
            else:
                found += [Path(p).resolve() for p in glob.glob(root.replace(USER_SLOT, "*"))]
        fresh = [Path(f) for f in FRESH]
        out: list[Path] = []
        for path in sorted(set(found), key=lambda p: len(p.parts)):
            if not any(_inside(path, h) for h in (*out, *fresh)) and path.is_dir():
                out.append(path)
        return out

    def may_bind(self, path: Path) -> bool:
        """Whether ``path`` may be shown to a job: never one holding or inside a private folder
        (the store's socket, the jobs), unless it is inside a data root (a dataset)."""
        if any(_inside(p, path) for p in self.private):
            return False
        if any(_inside(path, p) for p in self.private):
            return any(_inside(path, r) for r in self.data_roots)
        return True

    def wrap(
        self,
        argv: list[str],
        cwd: str,
        job_dir: Path,
        inputs: list[str],
        action_folder: str | None,
        output: str,
        scratch: tuple[Path, ...] = (),
        program: tuple[Path, ...] = (),
    ) -> tuple[list[str], dict[str, str]]:
        """The job's argv run in the sandbox (working in ``cwd``) and what the runner
        needs to finish it (its outbox and where the attempt belongs). Its outbox is made
        here, empty and private, beside the attempt it stands for. ``scratch`` are folders
        of its job folder that Pingo's own program for the job writes in (Sqoop's record
        class): bound back writable at their place, the rest of the job folder hidden.
        ``program``: where Pingo's own program for the job lives (its interpreter's
        environment, its package), shown read-only where a hidden folder (``/tmp``, a data
        root's parent) holds them: an installation there is no secret, and without it the
        job could not start."""
        out = Path(output)
        outbox = out.parent / f".{out.name}{OUTBOX_SUFFIX}"
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(outbox)  # a leftover of a submit that crashed
        outbox.mkdir(mode=0o700, parents=True)
        wrapped = [
            self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL",
            *([] if self.network else ["--unshare-net"]),
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        ]  # fmt: skip
        for fresh in FRESH:
            if Path(fresh).is_dir():
                wrapped += ["--tmpfs", fresh]
        if self.network and Path("/etc/resolv.conf").resolve().is_relative_to("/run"):
            resolv = str(Path("/etc/resolv.conf").resolve())  # name lookups, where it lives under /run
            wrapped += ["--ro-bind-try", resolv, resolv]
        hidden = self.hidden()
        for path in hidden:
            wrapped += ["--tmpfs", str(path)]
        shown = [Path(p) for p in inputs if Path(p).is_absolute() and not Path(p).is_symlink()]
        if action_folder:
            shown.append(Path(action_folder))
        shown += program
        for path in shown:
            under = [*hidden, *(Path(f) for f in FRESH)]
            if any(_inside(path, h) for h in under) and self.may_bind(path):
                wrapped += ["--ro-bind-try", str(path), str(path)]
        wrapped += ["--bind", str(outbox), str(out.parent)]
        for path in scratch:
            wrapped += ["--bind", str(path), str(path)]
        for path in hidden:  # read-only once the binds are made in it: nothing is written there in vain
            wrapped += ["--remount-ro", str(path)]
        # A job that would run in its job folder (which holds its request and kill file)
        # runs in a fresh folder instead.
        inner_cwd = "/tmp" if Path(cwd) == job_dir else cwd
        if not self.network:
            # Spark's driver binds to the host's address, which this namespace lacks.
            wrapped += ["--setenv", "SPARK_LOCAL_IP", "127.0.0.1"]
        wrapped += ["--chdir", inner_cwd, "--", *argv]
        return wrapped, {"outbox": str(outbox), "output": output}


def launch_error(job_dir: Path, rc: int, argv: list[str]) -> str | None:
    """The reason bwrap could not start the job's program, said as it is without a sandbox
    ("could not start './x': ..."), if that is why it ended."""
    if rc != 1:
        return None
    try:
        with open(job_dir / "stderr.log", "rb") as f:
            head = f.read(2000).decode(errors="replace")
    except OSError:
        return None
    program = argv[argv.index("--") + 1] if "--" in argv and argv.index("--") + 1 < len(argv) else ""
    prefix = f"bwrap: execvp {program}: "
    if not program or not head.startswith(prefix):
        return None
    return f"could not start {program!r}: {head[len(prefix) :].strip()}"


def collect(spec: dict[str, str]) -> None:
    """After a sandboxed job: its attempt output moves from its outbox to where the attempt
    belongs (the same folder, so a rename), unless it is a symbolic link, and the outbox goes."""
    outbox, output = Path(spec["outbox"]), Path(spec["output"])
    made = outbox / output.name
    try:
        if made.is_symlink():
            # Inside, it pointed nowhere; outside, it could point at another user's data, which
            # a later job of its owner would then be given as an input.
            log.warning("a sandboxed job made its output %s a symbolic link: not kept", output)
            made.unlink()
        elif made.exists():
            os.rename(made, output)
    except OSError as exc:
        log.error("could not move the output of a sandboxed job from %s to %s: %s", made, output, exc)
    shutil.rmtree(outbox, ignore_errors=True)
