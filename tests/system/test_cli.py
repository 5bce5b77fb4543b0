"""The ``pingo`` command as a user runs it: ``pingo dev`` on embedded defaults (its own
nx-27017, data kept across a restart), then submit / status / list / timeline / datasets /
kill, reading the output a person reads (plain text: these commands write to a pipe)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest

from pingo.client import Client
from pingo.display import duration
from tests.support.net import free_port
from tests.support.workflows import ROOT, shell_action

PINGO = [sys.executable, "-m", "pingo.cli"]


def wait_http(url: str, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing answered at {url}")


@pytest.fixture
def dev(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    port = free_port()
    env.update(
        COLUMNS="80",  # the width rich assumes off a terminal, whatever the test runner's is
        PINGO_DATA_DIR=str(tmp_path / "data"),
        PINGO_CALLBACK_PORT=str(free_port()),
        PINGO_SCRAPE_INTERVAL="0.5",
        PINGO_POLL_INTERVAL="0.5",
    )
    url = f"http://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / "dev.log", "ab")
        p = subprocess.Popen([*PINGO, "dev", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log)
        procs.append(p)
        wait_http(f"{url}/healthz")
        return p

    def cli(*args: str, gateway: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``pingo ARGS`` told where the gateway is by ``gateway`` (PINGO_URL by default)."""
        where = gateway if gateway is not None else {"PINGO_URL": url}
        return subprocess.run(
            [*PINGO, *args], cwd=ROOT, env={**env, **where}, capture_output=True, text=True, timeout=120
        )

    cli.port = port  # type: ignore[attr-defined]
    yield start, cli, tmp_path
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)


def test_submit_watch_restart_status_timeline_list_and_datasets(dev) -> None:
    start, cli, tmp = dev
    server = start()
    run = cli("submit", "examples/diamond.json", "--wait")
    assert run.returncode == 0, run.stderr + run.stdout
    assert "4 to compute, 0 reused" in run.stdout
    wf_id = run.stdout.split()[1].rstrip(":")
    assert f"{wf_id} SUCCEEDED" in run.stdout
    # Off a terminal the live view prints lines, never redraws: no carriage returns, no escapes.
    assert "\r" not in run.stdout and "\x1b" not in run.stdout
    assert all(len(line) <= 80 for line in run.stdout.splitlines()), run.stdout
    again = cli("submit", "examples/diamond.json", "--wait")
    # The report is reused; what it was computed from is not needed at all: skipped, not reused.
    assert again.returncode == 0 and "0 to compute, 1 reused, 3 skipped" in again.stdout
    again_id = again.stdout.split()[1].rstrip(":")

    # The embedded MongoDB keeps its data in the data directory: a restart loses nothing.
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0
    assert (tmp / "data" / "mongo").is_dir()
    start()
    status = cli("status", wf_id)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].startswith(f"{wf_id}") and "SUCCEEDED" in lines[0]
    assert lines[1].lstrip().startswith("L0") and "ingest" in lines[1]
    assert "report" in lines[3] and "←2,3" in lines[3]  # the DAG is drawn by levels
    rows = {line.split()[1]: line.split() for line in lines if re.match(r"\S  \d ", line)}
    assert list(rows) == ["1", "2", "3", "4"] and {r[-2] for r in rows.values()} == {"FINISHED"}
    timeline = cli("timeline", wf_id)
    assert timeline.returncode == 0
    stamps = [float(line.split()[0]) for line in timeline.stdout.splitlines()[1:] if line[:1].strip()]
    assert stamps == sorted(stamps) and len(stamps) > 20
    assert "FINISHED" in timeline.stdout and "TO_STORE" in timeline.stdout
    datasets = cli("datasets", "--json")
    body = json.loads(datasets.stdout)
    assert {d["state"] for d in body["datasets"]} == {"STORED", "LEAF"} and len(body["datasets"]) == 4

    assert cli("--version").stdout.strip() == f"pingo {version('pingo')}"

    # Finding runs: newest first with what each did, filtered by the gateway; the gateway
    # found from PINGO_PORT alone; a dataset's page names the workflow that made it.
    first_id, second_id = wf_id, again_id
    # No PINGO_URL: the gateway a server started with this environment listens on.
    listed = cli("list", gateway={"PINGO_PORT": str(cli.port)})
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["id", "name", "state", "comp", "reuse", "skip", "fail", "submitted", "took"]
    rows = [line.split() for line in lines[1:] if line.startswith("wf-")]
    assert [r[0] for r in rows] == [second_id, first_id]  # newest first
    # Counts per workflow: computed, reused, skipped, failed (the name is cut to fit 80 columns).
    assert rows[0][-8:-3] == ["SUCCEEDED", "0", "1", "3", "0"] and rows[1][-8:-3] == ["SUCCEEDED", "4", "0", "0", "0"]
    assert all(len(line) <= 80 for line in lines)
    newest = cli("list", "--state", "succeeded", "--name", "diamond (thesis format)", "--limit", "1", "--json")
    assert [w["id"] for w in json.loads(newest.stdout)] == [second_id]
    none = cli("list", "--name", "no such workflow")
    assert none.returncode == 0 and none.stdout == "" and "no workflows matching" in none.stderr
    bad = cli("list", "--state", "SLEEPING")
    assert bad.returncode == 1 and "state" in bad.stderr and "SUCCEEDED" in bad.stderr
    unreachable = cli("list", gateway={"PINGO_PORT": str(free_port())})
    assert unreachable.returncode == 1 and "cannot reach Pingo at http://127.0.0.1:" in unreachable.stderr

    async def one_a_page() -> tuple[list[str], int]:
        async with Client(f"http://127.0.0.1:{cli.port}") as client:
            listed = await client.pages("/api/v1/workflows", "workflows", limit=5, page=1)
            timeline = await client.timeline(first_id)
            return [w["id"] for w in listed], len(timeline)

    # Following the ``next`` cursor: one workflow a page, to the end of the list.
    ids, transitions = asyncio.run(one_a_page())
    assert ids == [second_id, first_id] and transitions > 20

    report = next(a for a in json.loads(cli("status", first_id, "--json").stdout)["actions"] if a["localId"] == 4)
    shown = cli("datasets", "show", report["hash"][:12])  # as the datasets table shows it
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == f"made by workflow {first_id}: pingo status {first_id}"
    assert "LEAF" in shown.stdout and all(len(line) <= 80 for line in shown.stdout.splitlines())
    as_json = json.loads(cli("datasets", "--json", "show", report["hash"]).stdout)
    assert as_json["hash"] == report["hash"] and as_json["workflow"]["id"] == first_id
    missing = cli("datasets", "show", "0" * 64)
    assert missing.returncode == 1 and "0" * 12 in missing.stderr


def test_bad_input_gets_a_clear_message_and_nonzero_exit(dev, tmp_path: Path) -> None:
    start, cli, _ = dev
    start()
    missing = cli("submit", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"actions": [\n  {"id": 1,,}\n]}')
    bad_json = cli("submit", str(broken))
    assert bad_json.returncode == 2 and "broken.json:2:" in bad_json.stderr
    invalid = tmp_path / "invalid.json"
    invalid.write_text(
        json.dumps({"actions": [{"id": 1, "name": "x", "type": "teleport"}, {"id": 1, "name": "y", "type": "SHELL"}]})
    )
    rejected = cli("submit", str(invalid))
    assert rejected.returncode == 1
    assert "unknown action type 'teleport'" in rejected.stderr
    assert "command is required for SHELL actions" in rejected.stderr
    unknown = cli("status", "wf-doesnotexist")
    assert unknown.returncode == 1 and "no workflow 'wf-doesnotexist'" in unknown.stderr


def test_kill_running_workflow(dev, tmp_path: Path) -> None:
    start, cli, _ = dev
    start()
    slow = tmp_path / "slow.json"
    slow.write_text(
        json.dumps(
            {
                "name": "slow",
                "actions": [
                    {
                        "id": 1,
                        "name": "sleepy",
                        "type": "SHELL",
                        "actionFolder": "examples/jobs",
                        "command": ["python3", "synth.py"],
                        "additionalInput": [{"value": "kill-me"}, {"value": "60"}, {"value": "1"}],
                    },
                    {
                        "id": 2,
                        "name": "after",
                        "type": "SHELL",
                        "actionFolder": "examples/jobs",
                        "command": ["python3", "synth.py"],
                        "parentActions": [1],
                        "additionalInput": [{"value": "after-kill"}, {"value": "0"}, {"value": "1"}],
                    },
                ],
            }
        )
    )
    sub = cli("submit", str(slow))
    wf_id = sub.stdout.split()[1].rstrip(":")
    deadline = time.time() + 30
    while "RUNNING" not in cli("status", wf_id).stdout.split("\n", 1)[1]:
        assert time.time() < deadline
        time.sleep(0.2)
    killed = cli("kill", wf_id)
    assert killed.returncode == 0, killed.stderr
    deadline = time.time() + 30
    while True:
        body = json.loads(cli("status", wf_id, "--json").stdout)
        if body["state"] == "KILLED":
            break
        assert time.time() < deadline, body
        time.sleep(0.3)
    assert [a["state"] for a in body["actions"]] == ["KILLED", "KILLED"]
    again = cli("kill", wf_id)
    assert again.returncode == 1 and "already ended KILLED" in again.stderr


def on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What ``argv`` writes to a pseudo-terminal, as a terminal receives it (rich draws
    colours and all there)."""
    import pty

    leader, follower = pty.openpty()
    with subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower) as p:
        os.close(follower)
        received = bytearray()
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the program ended and closed the terminal
                break
            if not chunk:
                break
            received += chunk
        p.wait(timeout=60)
    os.close(leader)
    assert p.returncode == 0, received.decode(errors="replace")
    return received.decode()


def test_list_and_status_show_a_hostile_name_escaped_on_a_terminal(dev, tmp_path: Path) -> None:
    """A name holding an escape sequence (clear the screen) and rich markup is printed as
    typed, escaped, by ``pingo list`` and ``pingo status``: the terminal obeys none of it."""
    start, cli, _ = dev
    start()
    evil = "\x1b[2J evil [bold]x[/bold]"
    body = tmp_path / "evil.json"
    body.write_text(json.dumps({"name": evil, "actions": [{**shell_action(1, "a"), "name": evil}]}))
    submitted = cli("submit", str(body))
    assert submitted.returncode == 0, submitted.stderr
    wf_id = submitted.stdout.split()[-1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(PINGO_URL=f"http://127.0.0.1:{cli.port}", COLUMNS="160", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    for argv in (["list"], ["status", wf_id]):
        drawn = on_a_terminal([*PINGO, *argv], env)
        assert "\x1b[2J" not in drawn, argv
        assert "\\x1b[2J evil [bold]x[/bold]" in re.sub(r"\x1b\[[0-9;]*m", "", drawn), (argv, drawn)


def run_pingo(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    return subprocess.run([*PINGO, *args], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["sumbit", "wf.json"], "did you mean 'submit'?"),
        (["submit", "wf.json", "--wiat"], "did you mean --wait?"),
        (["submit", "--dry-rnu", "wf.json"], "did you mean --dry-run?"),
        (["logs", "3", "--stream", "stdrr"], "did you mean 'stderr'?"),
        (["users", "ad", "ann"], "did you mean 'add'?"),
        # A mistyped global flag, alone or before a subcommand.
        (["--verzion"], "unrecognized argument --verzion: did you mean --version?"),
        (["--verzion", "list"], "unrecognized argument --verzion: did you mean --version?"),
        # A subcommand's option given before it: where it goes.
        (["--url", "http://127.0.0.1:1", "list"], "it is an option of list, after it: pingo list --url"),
    ],
)
def test_a_mistyped_subcommand_or_option_is_answered_with_the_closest_one(argv: list[str], hint: str) -> None:
    done = run_pingo(*argv)
    assert done.returncode == 2
    assert hint in done.stderr, done.stderr


def test_cannot_reach_names_the_url_tried_and_how_to_start_pingo() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = run_pingo("list", PINGO_URL=url)
    assert done.returncode == 1
    assert f"cannot reach Pingo at {url}" in done.stderr
    assert "pingo dev" in done.stderr and "PINGO_URL" in done.stderr, done.stderr


def test_list_name_matches_a_part_or_a_pattern_and_long_names_are_cut_on_one_line(dev, tmp_path: Path) -> None:
    """``pingo list --name`` takes part of a name or a glob pattern (any case), and at 80
    columns a long multi-word name is cut with … on its one row, not wrapped over several."""
    start, cli, _ = dev
    start()
    names = [
        "nightly sales report for the european region and its many subsidiaries",
        "nightly sales report for asia",
        "weekly inventory",
    ]
    for i, name in enumerate(names):
        body = tmp_path / f"wf{i}.json"
        body.write_text(json.dumps({"name": name, "actions": [shell_action(1, f"a{i}")]}))
        assert cli("submit", str(body)).returncode == 0
    by_part = json.loads(cli("list", "--json", "--name", "SALES REPORT").stdout)
    assert sorted(wf["name"] for wf in by_part) == sorted(names[:2])
    by_glob = json.loads(cli("list", "--json", "--name", "*asia").stdout)
    assert [wf["name"] for wf in by_glob] == [names[1]]
    assert cli("list", "--name", "monthly").stderr.strip() == "no workflows matching"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINGO_")}
    env.update(PINGO_URL=f"http://127.0.0.1:{cli.port}", COLUMNS="80", LINES="50", TERM="xterm-256color")
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", on_a_terminal([*PINGO, "list", "--name", "nightly"], env))
    rows = [line for line in drawn.splitlines() if line.strip()]
    assert len(rows) == 3, drawn  # the heading and one line per workflow
    assert all(r.split()[1].startswith("nigh") and r.split()[1].endswith("…") for r in rows[1:]), drawn
    assert all(len(r) <= 80 for r in rows), drawn


def test_logs_show_what_an_example_job_did_and_say_no_output_where_there_is_none(dev, tmp_path: Path) -> None:
    """The example jobs say what they do on stdout; a stream the job left empty reads
    "(no output ...)" (on stderr, so that a redirected log holds the log only), exit 0."""
    start, cli, _ = dev
    start()
    body = tmp_path / "one.json"
    body.write_text(json.dumps({"name": "one", "actions": [shell_action(1, "alone")]}))
    run = cli("submit", str(body), "--wait")
    assert run.returncode == 0, run.stderr
    wf = json.loads(cli("status", run.stdout.split()[1].rstrip(":"), "--json").stdout)
    action_id = wf["actions"][0]["id"]
    out = cli("logs", action_id)
    assert out.returncode == 0 and "synth alone: reading 0 input(s)" in out.stdout, out
    assert "synth alone: wrote 4 KB to" in out.stdout and out.stderr == ""
    err = cli("logs", action_id, "--stream", "stderr")
    assert err.returncode == 0 and err.stdout == "", err
    assert err.stderr.startswith("(no output") and "--stream stdout" in err.stderr, err


def test_the_first_user_added_says_authentication_is_now_on(dev) -> None:
    """``pingo users add`` says, when it makes the first user, that every request needs a
    token from now on (PINGO_AUTH=auto); the second says nothing of it."""
    _, cli, _ = dev
    first = cli("users", "add", "ann", "--admin")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("pingo_")
    assert "authentication is now ON" in first.stderr and "PINGO_AUTH=off" in first.stderr, first.stderr
    second = cli("users", "add", "bob")
    assert second.returncode == 0 and "authentication" not in second.stderr, second.stderr


def test_a_second_demo_says_why_its_first_run_computes_nothing_and_fresh_starts_afresh(tmp_path: Path) -> None:
    """The catalogue persists in the data folder: a second ``pingo demo`` says so before its
    "run 1" (which reuses everything) and how to start afresh; ``--fresh`` computes again in
    a temporary catalogue and leaves the usual one as it was."""
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "one.json").write_text(json.dumps({"name": "one", "actions": [shell_action(1, "demo-one")]}))
    data = tmp_path / "data"

    def demo(*extra: str) -> str:
        done = run_pingo(
            "demo", "--port", str(free_port()), "--examples", str(examples), *extra, PINGO_DATA_DIR=str(data)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def computed_in_run_1(out: str) -> int:
        row = next(line for line in out.splitlines() if re.match(r"\s*1\s+one\.json", line))
        return int(row.split()[3])

    first = demo()
    assert "already holds workflows" not in first and computed_in_run_1(first) == 1
    second = demo()
    assert "already holds workflows from an earlier run" in second, second
    assert "pingo demo --fresh" in second and f"rm -rf {data}" in second
    assert computed_in_run_1(second) == 0
    fresh = demo("--fresh")
    assert "already holds workflows" not in fresh and computed_in_run_1(fresh) == 1
    assert "already holds workflows from an earlier run" in demo()  # the usual catalogue is untouched


def test_datasets_by_user_reads_the_same_figures_as_the_history_page(dev) -> None:
    """``pingo datasets --by-user`` and the History page (its API) read the same per-user
    figures, also for work done while no user exists (the History page's totals)."""
    start, cli, _ = dev
    start()
    for _ in range(2):  # the second run reuses the first's report and skips the rest
        run = cli("submit", "examples/diamond.json", "--wait")
        assert run.returncode == 0, run.stderr + run.stdout
    rows = json.loads(cli("datasets", "--by-user", "--json").stdout)
    assert [r["user"] for r in rows] == [None]
    mine = rows[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{cli.port}/api/v1/history/stats?resolution=1d") as r:
        history = json.load(r)
    page = history["byUser"]["" if mine["user"] is None else mine["user"]]
    assert mine["computeSeconds"] > 0 and mine["savedSeconds"] > 0
    assert mine["computeSeconds"] == pytest.approx(page["compute_seconds"]) == history["totals"]["compute_seconds"]
    assert mine["savedSeconds"] == pytest.approx(page["saved_seconds"]) == history["totals"]["saved_seconds"]
    assert mine["savedFromOthersSeconds"] == pytest.approx(page["saved_others_seconds"]) == 0
    table = cli("datasets", "--by-user").stdout.splitlines()
    assert table[1].split()[:2] == ["(no", "user)"], table
    assert duration(mine["computeSeconds"]) in table[1] and duration(mine["savedSeconds"]) in table[1], table


def test_datasets_by_hand_pin_expire_invalidate_and_delete(dev) -> None:
    start, cli, _ = dev
    start()
    run = cli("submit", "examples/diamond.json", "--wait")
    assert run.returncode == 0, run.stderr + run.stdout
    wf_id = run.stdout.split()[1].rstrip(":")
    actions = {a["localId"]: a for a in json.loads(cli("status", wf_id, "--json").stdout)["actions"]}
    ingest, report = actions[1]["hash"], actions[4]["hash"]
    pinned = cli("datasets", "pin", ingest[:12])
    assert pinned.returncode == 0 and pinned.stdout.strip() == f"{ingest[:12]} STORED; pinned: never evicted"
    shown = cli("datasets", "show", ingest)
    assert "pinned (never evicted)" in shown.stdout
    assert json.loads(cli("datasets", "unpin", ingest, "--json").stdout)["pinned"] is False
    expiring = cli("datasets", "expire", ingest, "+7d")
    assert expiring.returncode == 0 and "expires" in expiring.stdout, expiring.stderr
    assert json.loads(cli("datasets", "expire", ingest, "never", "--json").stdout)["expiresAt"] is None
    invalidated = cli("datasets", "invalidate", ingest, "--descendants")
    assert invalidated.returncode == 0, invalidated.stderr
    assert invalidated.stdout.startswith(f"{ingest[:12]} INVALIDATED; its next use computes it again (and ")
    deleted = cli("datasets", "delete", report)
    assert deleted.returncode == 0 and deleted.stdout.startswith(f"{report[:12]} "), deleted.stderr
    missing = cli("datasets", "delete", "0" * 64)
    assert missing.returncode == 1 and "no dataset" in missing.stderr
    again = cli("submit", "examples/diamond.json", "--wait")
    assert again.returncode == 0 and "4 to compute, 0 reused" in again.stdout, again.stdout
    timeline = cli("timeline", wf_id).stdout
    assert "INVALIDATED" in timeline and "user" in timeline
