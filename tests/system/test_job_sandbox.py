"""One user's local job reaches neither Pingo nor another user (docs/users.md, "What a
job can reach"): with users on, a job runs in its bubblewrap sandbox, which shows it its
own inputs and output and nothing else of Pingo's; where no sandbox can be had, a
gateway reachable from other machines refuses to serve more than one user."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pingo.dev import all_services
from pingo.minicluster.sqoop_classpath import sqoop_classpath
from shared.config import Settings
from shared.executors.base import JobState
from shared.runtime import Context, running
from shared.store import users
from shared.store.embedded import EmbeddedMongo
from tests.support.dev import pingo, user_env
from tests.support.net import free_port
from tests.support.postgres import postgres_server
from tests.support.processes import marked, spawning_action
from tests.support.system import Api, make_settings
from tests.support.workflows import shell_action
from tests.system.test_sqoop import PASSWORD, READER, log

# Run as alice's job: every way to reach Pingo or bob it can think of; then its own work.
HOSTILE = r"""
import json, os, pathlib, signal, socket, sys
targets = json.loads(sys.argv[1])
own_input, out = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
report = {}

def attempt(name, fn):
    try:
        report[name] = "DONE: " + str(fn())[:200]
    except Exception as exc:
        report[name] = f"refused: {type(exc).__name__}: {exc}"[:300]

def unix(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(path)
    return "connected"

def tcp(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    return "connected"

def write(path):
    pathlib.Path(path).write_text("alice was here")
    return path

attempt("store socket", lambda: unix(targets["store_socket"]))
for port in targets["ports"]:
    attempt(f"tcp {port}", lambda: tcp(port))
attempt("read bob's output", lambda: pathlib.Path(targets["bob_output"]).read_text())
attempt("write into bob's output root", lambda: write(os.path.join(targets["bob_root"], "planted")))
attempt("write into the managed root", lambda: write(os.path.join(targets["managed_root"], "planted")))
attempt("touch bob's kill file", lambda: write(targets["bob_kill"]))
attempt("read bob's status", lambda: pathlib.Path(targets["bob_status"]).read_text())
attempt("read bob's log", lambda: pathlib.Path(targets["bob_log"]).read_text())
attempt("read the operator's token", lambda: pathlib.Path(targets["token"]).read_text())
attempt("signal bob's job", lambda: os.kill(targets["bob_pid"], signal.SIGKILL))
# Anything readable where Pingo keeps its things (a tmpfs shows only the folders made to
# bind this job's own inputs and output into it).
readable = []
for top in targets["folders"]:
    for base, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(base, name)
            try:
                open(path, "rb").read(1)
                readable.append(path)
            except OSError:
                pass
report["readable"] = readable
needle = "sec" + "ret="  # a callback URL's, in any process this job can see
report["secrets"] = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("cmdline", "environ"):
            try:
                if needle.encode() in open(f"/proc/{pid}/{part}", "rb").read():
                    report["secrets"].append(f"/proc/{pid}/{part}")
            except OSError:
                pass
report["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
# Its own work: read its input, write its output.
data = (own_input / "part-00000").read_bytes()
out.mkdir()
(out / "part-00000").write_bytes(data[:100])
(out / "report.json").write_text(json.dumps(report))
"""


@pytest.fixture
def base():
    """Pingo's folders outside /tmp (the sandbox's own /tmp would hide them anyway): here
    they are hidden only if the sandbox hides Pingo's data folder and the roots as such."""
    if not shutil.which("bwrap"):
        pytest.fail("bubblewrap is not installed (apt-get install bubblewrap); scripts/test installs it")
    cache = Path.home() / ".cache"
    cache.mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="pingo-sandbox-", dir=cache))
    yield path
    subprocess.run(["chmod", "-R", "u+w", str(path)], check=False)
    shutil.rmtree(path, ignore_errors=True)


async def wait_running(api: Api, wf_id: str, timeout: float = 60.0) -> dict:
    deadline = time.time() + timeout
    while (wf := await api.workflow(wf_id))["actions"][0]["state"] != "RUNNING":
        assert time.time() < deadline, wf
        await asyncio.sleep(0.2)
    return wf


@contextlib.asynccontextmanager
async def alice_and_bob(base: Path, **overrides: Any) -> AsyncIterator[tuple[Settings, Context, Api, Api]]:
    """The services in process, authentication required, users alice and bob (not admins),
    the embedded store in Pingo's data folder, and an output root per user."""
    settings = make_settings(
        base, None, auth="required", data_dir=base / "data", output_roots=[base / "home" / "{user}"],
        auth_cache_seconds=0.5, **overrides,
    )  # fmt: skip
    ctx = await Context.open(settings)
    now = time.time()
    tokens = {name: await users.add(ctx.store, name, False, now) for name in ("alice", "bob")}
    async with running(ctx, all_services):
        alice, bob = Api(settings, tokens["alice"]), Api(settings, tokens["bob"])
        await alice.open()
        await bob.open()
        try:
            yield settings, ctx, alice, bob
        finally:
            await alice.close()
            await bob.close()


async def test_a_users_job_reaches_neither_pingo_nor_another_user(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The operator's pingo CLI token, in the folder the CLI reads it from.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    (base / "config" / "pingo").mkdir(parents=True)
    (base / "config" / "pingo" / "token").write_text("pingo_operators_token")
    async with alice_and_bob(base) as (settings, ctx, alice, bob):
        # Bob: a committed output in his root, and a job that runs on meanwhile.
        kept = shell_action(1, "bob-out", isManaged=False, outputPath="r")
        done = await bob.run({"name": "b1", "actions": [kept]})
        assert done["state"] == "SUCCEEDED", done
        bob_output = Path(done["actions"][0]["outputPath"]) / "part-00000"
        long = await bob.submit({"name": "b2", "actions": [shell_action(1, "bob-long", seconds=120)]})
        running_wf = await wait_running(bob, long["id"])
        bob_action = await ctx.store.db.actions.find_one({"_id": running_wf["actions"][0]["id"]})
        bob_job = settings.jobs_dir / bob_action["job_id"]
        bob_pid = json.loads((bob_job / "status.json").read_text())["pid"]
        targets = {
            "store_socket": str(EmbeddedMongo(settings.data_dir).socket),
            "ports": [settings.port, settings.callback_port, 5672],
            "bob_output": str(bob_output),
            "bob_root": str(base / "home" / "bob"),
            "managed_root": str(settings.managed_dir),
            "bob_kill": str(bob_job / "kill"),
            "bob_status": str(bob_job / "status.json"),
            "bob_log": str(bob_job / "stdout.log"),
            "bob_pid": bob_pid,
            "token": str(base / "config" / "pingo" / "token"),
            "folders": [str(settings.data_dir), str(base / "home"), "/tmp"],
        }
        body = {
            "name": "hostile",
            "actions": [
                shell_action(1, "alice-in"),
                {"id": 2, "name": "hostile", "type": "SHELL", "command": ["python3", "-c", HOSTILE],
                 "additionalInput": [json.dumps(targets)], "parentActions": [1]},
            ],
        }  # fmt: skip
        wf = await alice.run(body)
        assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a.get("error")) for a in wf["actions"]]
        own_input, own_output = (Path(a["outputPath"]) for a in wf["actions"])
        report = json.loads((own_output / "report.json").read_text())
        done_anyway = {k: v for k, v in report.items() if isinstance(v, str) and not v.startswith("refused")}
        assert done_anyway == {}, report
        # Readable: its own input only (bound back into the sandbox), nothing of Pingo's.
        assert report["readable"] and all(p.startswith(str(own_input)) for p in report["readable"]), report
        assert report["secrets"] == []
        assert len(report["processes"]) < 5, f"it sees processes beyond its own: {report['processes']}"
        # Its own work was done, and committed where it belongs.
        assert (own_output / "part-00000").read_bytes() == (own_input / "part-00000").read_bytes()[:100]
        # Nothing of bob's was touched: his job runs on, his root holds his output only.
        assert not (bob_job / "kill").exists()
        assert (await bob.workflow(long["id"]))["actions"][0]["state"] == "RUNNING"
        assert not (base / "home" / "bob" / "planted").exists()
        assert not (settings.managed_dir / "planted").exists()
        status, _ = await bob.request("POST", f"/api/v1/workflows/{long['id']}/kill")
        assert status == 202


async def test_a_killed_job_leaves_no_process_even_one_that_left_its_group(base: Path) -> None:
    """In its sandbox, a job's processes end with it, even one that made a session of its own."""
    marker = f"pingo-tree-{uuid.uuid4().hex}"
    try:
        async with alice_and_bob(base) as (_, ctx, alice, _bob):
            plan = await alice.submit({"name": "tree", "actions": [spawning_action(1, "-", marker, leave=True)]})
            async with asyncio.timeout(60):
                while len(marked(marker)) < 3:  # the job, its child and its grandchild (and bwrap)
                    await asyncio.sleep(0.1)
            status, _ = await alice.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
            assert status == 202
            async with asyncio.timeout(60):
                while (await alice.workflow(plan["id"]))["state"] != "KILLED":
                    await asyncio.sleep(0.2)
                job_id = (await ctx.store.db.actions.find_one({"_id": f"{plan['id']}.1"}))["job_id"]
                while (await ctx.executor.status(job_id)).state in (JobState.PREP, JobState.RUNNING):
                    await asyncio.sleep(0.1)
            # Its end is told once none of its processes is left.
            assert marked(marker) == []
    finally:
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)


async def test_an_output_made_a_link_to_another_users_data_is_not_kept(base: Path) -> None:
    """A job that makes its attempt a symbolic link to bob's data (dangling in its sandbox)
    does not get it committed as its output, where its next job would be given bob's data."""
    async with alice_and_bob(base) as (_, _ctx, alice, bob):
        done = await bob.run({"name": "b", "actions": [shell_action(1, "bob-x", isManaged=False, outputPath="x")]})
        theirs = done["actions"][0]["outputPath"]
        link = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"
        body = {
            "name": "link",
            "actions": [
                {"id": 1, "name": "link", "type": "SHELL", "command": ["python3", "-c", link],
                 "additionalInput": [theirs]},
                {"id": 2, "name": "read", "type": "SHELL", "command": ["cat"], "parentActions": [1]},
            ],
        }  # fmt: skip
        wf = await alice.run(body)
        first = wf["actions"][0]
        assert first["state"] == "FAILED", first
        assert not Path(first["outputPath"]).is_symlink()


def test_without_a_sandbox_a_gateway_beyond_loopback_serves_one_user_only(tmp_path: Path) -> None:
    env = user_env(
        PINGO_DATA_DIR=str(tmp_path / "data"),
        PINGO_HOST="0.0.0.0",
        PINGO_PORT=str(free_port()),
        PINGO_CALLBACK_PORT=str(free_port()),
        PINGO_JOB_SANDBOX="off",
    )
    for name in ("alice", "bob"):
        added = pingo("users", "add", name, env=env)
        assert added.returncode == 0, added.stderr
    refused = pingo("dev", env=env)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "PINGO_JOB_SANDBOX=off" in refused.stderr and "bubblewrap" in refused.stderr, refused.stderr[-2000:]
    # The same, where bwrap cannot be found (a PATH without it) under the default, auto.
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    refused = pingo("dev", env={**env, "PINGO_JOB_SANDBOX": "auto", "PATH": str(no_bwrap)})
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "bwrap not found" in refused.stderr, refused.stderr[-2000:]


async def test_a_users_sqoop_import_runs_in_its_sandbox_given_the_network_and_reads_no_hidden_file(
    base: Path,
) -> None:
    """A SQOOP action of a user (docs/users.md, "What a job can reach"): it needs the
    network to reach its database, which a sandbox has only with PINGO_JOB_NETWORK (refused
    at submission without); Sqoop compiles its record class in the job's folder, whose two
    folders for it alone the job sees; its password file is read where the sandbox shows
    it, and a file the sandbox hides (in another user's output root) is not read."""
    secret = base / "secrets" / "db.password"
    secret.parent.mkdir()
    secret.write_text(PASSWORD)
    secret.chmod(0o400)
    with postgres_server() as server:
        server.sql(f"CREATE TABLE cities (id int PRIMARY KEY, name text); INSERT INTO cities VALUES (1, 'Lyon'); "
                   f"CREATE ROLE {READER} LOGIN PASSWORD '{PASSWORD}'; "
                   f"GRANT SELECT ON cities TO {READER};")  # fmt: skip
        hba = Path(server.sql("SHOW hba_file").strip())
        hba.write_text(f"host all {READER} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        server.sql("SELECT pg_reload_conf()")

        def body(password_file: Path) -> dict[str, Any]:
            sqoop = {"id": 1, "name": "import", "type": "SQOOP", "connect": server.jdbc_url, "table": "cities",
                     "username": READER, "passwordFile": str(password_file)}  # fmt: skip
            return {"name": "sqoop", "actions": [sqoop]}

        classpath = sqoop_classpath()
        async with alice_and_bob(base / "offline", sqoop_classpath=classpath) as (_, _c, alice, _b):
            answer = await alice.submit(body(secret), expect=422)
            [violation] = answer["violations"]
            assert violation["field"] == "connect" and "PINGO_JOB_NETWORK=true" in violation["message"], answer
        async with alice_and_bob(base, sqoop_classpath=classpath, job_network=True) as (_, _c, alice, _b):
            wf = await alice.run(body(secret), timeout=120)
            action = wf["actions"][0]
            assert wf["state"] == "SUCCEEDED", (await log(alice, action["id"], "stdout"))[-3000:]
            assert (Path(action["outputPath"]) / "part-m-00000").read_text().splitlines() == ["1,Lyon"]
            # The same password, in bob's output root: hidden from alice's job.
            bobs = base / "home" / "bob" / "db.password"
            bobs.parent.mkdir(parents=True, exist_ok=True)
            bobs.write_text(PASSWORD)
            wf = await alice.run(body(bobs), timeout=120)
            action = wf["actions"][0]
            assert wf["state"] == "FAILED", action
            assert f"password file {bobs} does not exist" in await log(alice, action["id"], "stdout")
