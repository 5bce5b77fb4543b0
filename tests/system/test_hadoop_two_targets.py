"""Pingo's Hadoop path through its five services on two targets, the same tests for both
(docs/testing.md, "Two targets"): the emulator (a fresh one per test), and Apache Hadoop's
real mini cluster with the real Apache Oozie 5.2.1 (``[real]``, ``real_hadoop``). Each test
asserts what a user sees, with what both targets have: the API, Oozie's REST API, WebHDFS
as HDFS's superuser to change or delete data behind Pingo's back, a callback base URL
nobody listens on to lose every notification, and the notification URL Oozie keeps in a
job's configuration to replay one late. A difference between the targets is a failure,
fixed in Pingo or in the emulator and listed in docs/hadoop-protocol.md ("Emulator and
real cluster").

The orphan sweep runs beside the first test's workflows. The jobs are SHELL actions
running tests/jobs/hdfs_synth.py (it reads and writes over WebHDFS: a YARN container has no
Hadoop client) and a streaming word count; on the real cluster each is a YARN application
(10-20 s), so the workflows are short and one test carries several assertions.

The services' Hadoop tests that stay emulator-only (fault knobs the real servers give only
by accident, or what only the emulator can count) are in tests/system/test_hadoop_system.py
and the other ``test_hadoop_*`` modules; its docstring says why each stays.
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from shared.storage.base import ATTEMPTS_DIR
from shared.store.transitions import decode
from tests.support.hadoop_pingo import OWNER, HadoopPingo, pingo_on_hadoop, synth
from tests.support.hadoop_targets import TARGETS

RUN_TIMEOUT = 420.0  # on the real cluster, three YARN applications one after the other
SHELL_ERROR = "1: Main Class [org.apache.oozie.action.hadoop.ShellMain], exit code [1]"
DEAD = "http://127.0.0.1:9"  # the discard port: nobody listens, every notification is lost


@pytest.fixture(params=TARGETS)
async def hadoop(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str):
    """Pingo on the target; ``@pytest.mark.settings(...)`` overrides settings."""
    marker = request.node.get_closest_marker("settings")
    async for pingo in pingo_on_hadoop(
        request.param, request, tmp_path, mongo_url, **(marker.kwargs if marker else {})
    ):
        yield pingo


def chain(hadoop: HadoopPingo, top: str = "c-top") -> dict:
    """root <- mid <- top (top reads root too), SHELL actions, and a streaming word count
    (examples/wordcount's mapper and reducer, Oozie's ``<map-reduce>``) of mid."""
    count = {"id": 4, "name": "c-count", "type": "MAP_REDUCE", "actionFolder": "wordcount",
             "parentActions": [{"id": 2}], "mapper": ["python3", "mapper.py"], "reducer": ["python3", "reducer.py"],
             "configurationParameters": [{"key": "mapreduce.job.reduces", "value": "1"}]}  # fmt: skip
    url = hadoop.webhdfs_url
    return {"name": "chain", "actions": [synth(1, "c-root", webhdfs=url), synth(2, "c-mid", [1], webhdfs=url),
                                         synth(3, top, [2, 1], webhdfs=url), count]}  # fmt: skip


def errors(wf: dict) -> list:
    return [(a["localId"], a["state"], a["error"]) for a in wf["actions"]]


async def dataset(hadoop: HadoopPingo, h: str) -> dict:
    return decode(await hadoop.api.db.datasets.find_one({"_id": h}))


async def dataset_in(hadoop: HadoopPingo, h: str, state: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while (doc := await dataset(hadoop, h))["state"] != state:
        assert time.monotonic() < deadline, f"dataset {h} still {doc['state']}, not {state}"
        await asyncio.sleep(0.3)
    return doc


async def word_counts(hadoop: HadoopPingo, path: str) -> dict[str, int]:
    lines = (await hadoop.fs.open(f"{path}/part-00000")).decode().splitlines()
    return {w: int(n) for w, n in (line.split("\t") for line in lines)}


async def leave_orphans(hadoop: HadoopPingo) -> list[str]:
    """What nobody owns in the managed root: a dataset's folder no dataset has (Pingo's),
    and an attempt a user's job left behind with a folder it made read-only (the user's)."""
    datasets = f"{hadoop.root}/datasets"
    orphan, left = f"{datasets}/{'f' * 64}", f"{datasets}/{ATTEMPTS_DIR}/{'e' * 64}.wf-x.1.1"
    await hadoop.fs.create(f"{orphan}/part-00000", b"nobody's\n")
    await hadoop.fs.mkdirs(posixpath.dirname(left))  # as Pingo makes it, its own
    await hadoop.target.as_superuser("PUT", f"{left}/ro", op="MKDIRS")
    await hadoop.target.as_superuser("PUT", f"{left}/ro/part-00000", op="CREATE", overwrite="true")
    for path in (left, f"{left}/ro", f"{left}/ro/part-00000"):
        await hadoop.target.as_superuser("PUT", path, op="SETOWNER", owner=OWNER)
    await hadoop.target.as_superuser("PUT", f"{left}/ro", op="SETPERMISSION", permission="555")
    return [orphan, left]


@pytest.mark.settings(verify_reuse="checksum", orphan_sweep_interval=1.0)
async def test_a_workflow_is_committed_reused_and_what_changes_behind_pingos_back_or_by_hand_is_recomputed(
    hadoop: HadoopPingo,
) -> None:
    api, fs, root = hadoop.api, hadoop.fs, hadoop.root
    # Left before the workflows: the orphan sweep, running all along, removes them and
    # nothing of the workflows'.
    orphans = await leave_orphans(hadoop)
    body = chain(hadoop)
    t0 = time.monotonic()
    wf = await api.run(body, timeout=RUN_TIMEOUT)
    computed_in = time.monotonic() - t0
    assert wf["state"] == "SUCCEEDED", errors(wf)
    assert [a["decision"] for a in wf["actions"]] == ["compute"] * 4
    for a in wf["actions"]:
        # Committed and sealed: read-only for everyone, the owner's; the size recorded is
        # GETCONTENTSUMMARY's length.
        assert a["outputPath"] == f"{root}/datasets/{a['hash']}"
        status = await fs.status(a["outputPath"])
        assert (status["owner"], status["permission"]) == (OWNER, "555")
        assert a["size"] == (await fs.content_summary(a["outputPath"]))["length"] > 0
    for a in wf["actions"][:3]:
        lineage = (await fs.open(f"{a['outputPath']}/_lineage")).decode().split("\n")[1:-1]
        assert lineage == [f"{root}/datasets/{wf['actions'][p - 1]['hash']}" for p in sorted(a["parents"])]
    # Each computed once, from an Oozie application of its own (a one-action workflow.xml).
    assert [(await dataset(hadoop, a["hash"]))["compute_count"] for a in wf["actions"]] == [1] * 4
    apps = [f["pathSuffix"] for f in await fs.list(f"{root}/oozie-apps")]
    assert len(apps) == 4 and all([await fs.status(f"{root}/oozie-apps/{app}/workflow.xml") for app in apps])
    root_, mid, top, count = wf["actions"]
    # The word count's output: the words of mid's part file, counted by MapReduce.
    words = Counter(re.findall(r"[a-z]+(?:'[a-z]+)*", (await fs.open(f"{mid['outputPath']}/part-00000")).decode()))
    assert await word_counts(hadoop, count["outputPath"]) == dict(words)
    # Each ran through Oozie, as the owner; a map-reduce action is named by its MapReduce
    # job once the launcher ran it, a shell action by its launcher's YARN application.
    for a in wf["actions"]:
        info = await hadoop.oozie.info(a["jobId"])
        assert (info["status"], info["user"]) == ("SUCCEEDED", OWNER)
        node = next(n for n in info["actions"] if n["type"] in ("shell", "map-reduce"))
        assert node["externalId"].startswith("job_" if node["type"] == "map-reduce" else "application_"), node

    again = await api.run(body, timeout=RUN_TIMEOUT)
    assert again["state"] == "SUCCEEDED"
    assert [a["decision"] for a in again["actions"]] == ["reuse"] * 4

    # Behind Pingo's back, as HDFS's superuser: mid deleted, top's part file changed at the
    # same size; the reconcile sweep finds the one missing and the other by its checksum.
    superuser = hadoop.superuser_fs()
    part = f"{top['outputPath']}/part-00000"
    try:
        assert await superuser.delete(mid["outputPath"], recursive=True)
        original = await superuser.open(part)
        await superuser.create(part, original[:-1] + b"x", overwrite=True)
    finally:
        await superuser.close()
    assert (await dataset_in(hadoop, mid["hash"], "LOST"))["lost_reason"] == "missing"
    changed = await dataset_in(hadoop, top["hash"], "LOST")
    assert changed["lost_reason"] == "checksum" and changed["found_size"] == top["size"]

    # A new top needs the lost dataset: mid is computed again, then the new top; the root
    # and the word count are reused.
    t0 = time.monotonic()
    third = await api.run(chain(hadoop, "c-top-b"), timeout=RUN_TIMEOUT)
    recomputed_in = time.monotonic() - t0
    assert third["state"] == "SUCCEEDED", errors(third)
    assert [a["decision"] for a in third["actions"]] == ["reuse", "compute", "compute", "reuse"]
    assert (await fs.status(mid["outputPath"]))["permission"] == "555"
    assert (await dataset(hadoop, mid["hash"]))["state"] == "STORED"

    # The changed top is computed again, its content back; and by hand, the new top
    # invalidated is computed again too, side by side; the word count deleted by hand is
    # gone from HDFS.
    top_b = third["actions"][2]
    status, out = await api.request("POST", f"/api/v1/datasets/{top_b['hash']}/invalidate")
    assert status == 200 and out["invalidated"] == [top_b["hash"]], out
    both = chain(hadoop)
    both["actions"].append(synth(5, "c-top-b", [2, 1], webhdfs=hadoop.webhdfs_url))
    fourth = await api.run(both, timeout=RUN_TIMEOUT)
    assert fourth["state"] == "SUCCEEDED", errors(fourth)
    assert [a["decision"] for a in fourth["actions"]] == ["reuse", "reuse", "compute", "reuse", "compute"]
    assert [a["hash"] for a in fourth["actions"][2::2]] == [top["hash"], top_b["hash"]]
    assert await fs.open(part) == original
    assert [(await dataset(hadoop, a["hash"]))["compute_count"] for a in (top, top_b)] == [2, 2]
    status, out = await api.request("DELETE", f"/api/v1/datasets/{count['hash']}")
    assert status == 202 and out["state"] == "INVALIDATED", out
    await dataset_in(hadoop, count["hash"], "DELETED")
    assert not await hadoop.target.exists(count["outputPath"])
    assert await hadoop.target.exists(top["outputPath"]) and await hadoop.target.exists(root_["outputPath"])
    deadline = time.monotonic() + 60
    while any([await hadoop.target.exists(path) for path in orphans]):
        assert time.monotonic() < deadline, "the orphans are still there"
        await asyncio.sleep(0.5)
    for a in [*fourth["actions"], *third["actions"][1:3]]:
        if a["hash"] != count["hash"]:
            assert (await fs.status(a["outputPath"]))["permission"] == "555", a
    print(f"\n[{hadoop.kind}] 3 shell actions and a streaming word count: {computed_in:.0f} s computed, "
          f"{recomputed_in:.0f} s after a loss")  # fmt: skip


@pytest.mark.settings(callback_base_url=DEAD)
async def test_with_every_notification_lost_polling_ends_the_workflows_and_a_late_one_changes_nothing(
    hadoop: HadoopPingo,
) -> None:
    api = hadoop.api
    fail = {"id": 1, "name": "l-boom", "type": "SHELL", "actionFolder": "jobs", "command": ["python3", "fail.py"],
            "additionalInput": [{"value": "on purpose"}]}  # fmt: skip
    # Its first attempt fails; Pingo tries it again, as a new Oozie job.
    marker = f"/user/{OWNER}/failed-once-{uuid.uuid4().hex[:8]}"
    flaky = synth(1, "l-flaky", webhdfs=hadoop.webhdfs_url, SYNTH_FAIL_ONCE=marker)
    flaky["retries"] = {"count": 1, "delaySeconds": 0.2}
    # Independent workflows, side by side: one succeeds, one fails, one succeeds when retried.
    bodies = [{"name": "lost-ok", "actions": [synth(1, "l-ok", webhdfs=hadoop.webhdfs_url)]},
              {"name": "lost-fails", "actions": [fail]}, {"name": "lost-flaky", "actions": [flaky]}]  # fmt: skip
    plans = [await api.submit(body) for body in bodies]
    ok, failed, retried = await asyncio.gather(*(api.wait(p["id"], timeout=RUN_TIMEOUT) for p in plans))
    assert retried["state"] == "SUCCEEDED", errors(retried)
    attempts = retried["actions"][0]["attemptLog"]
    assert [r["outcome"] for r in attempts] == ["failed", "succeeded"], attempts
    assert [(await hadoop.oozie.info(r["jobId"]))["status"] for r in attempts] == ["KILLED", "SUCCEEDED"]
    assert await hadoop.target.exists(marker)
    assert ok["state"] == "SUCCEEDED", errors(ok)
    # The failure as Oozie reports it (errorCode: errorMessage), the same text on both targets.
    assert (failed["state"], failed["actions"][0]["state"]) == ("FAILED", "FAILED")
    assert failed["actions"][0]["error"] == SHELL_ERROR
    # Its log through the API: Oozie's job log (docs/hadoop-protocol.md, "Job logs"), its
    # lines naming the job; stderr its error lines.
    boom = failed["actions"][0]
    for query in ("", "?stream=stderr"):
        async with api.http.get(f"{api.base}/api/v1/actions/{boom['id']}/logs{query}") as r:
            assert (r.status, r.headers["Content-Type"]) == (200, "text/plain; charset=utf-8"), await r.text()
            text = await r.text()
        if not query:
            assert f"JOB[{boom['jobId']}]" in text, text[-2000:]
    for wf, status in ((ok, "SUCCEEDED"), (failed, "KILLED")):  # Oozie ends a failed job through its kill node
        a = wf["actions"][0]
        assert a["attempts"] == 1, a
        assert (await hadoop.oozie.info(a["jobId"]))["status"] == status

    # Oozie's notifications went to the dead URL: replayed to the callback service, late and
    # twice, and one that lies about the failed job, each is answered and changes nothing
    # (the callback service asks Oozie before anything moves).
    before = {
        a["id"]: decode(await api.db.actions.find_one({"_id": a["id"]}))
        for a in (ok["actions"][0], failed["actions"][0])
    }
    for a, statuses in (
        (ok["actions"][0], ["RUNNING", "SUCCEEDED", "SUCCEEDED"]),
        (failed["actions"][0], ["SUCCEEDED"]),
    ):
        template = await hadoop.notification_url(a["jobId"])
        assert template.startswith(f"{DEAD}/callback/{a['id']}?"), template
        for status in statuses:
            url = (
                template.replace(DEAD, hadoop.callback_service).replace("$jobId", a["jobId"]).replace("$status", status)
            )
            async with api.http.get(url) as r:
                assert r.status == 200, await r.text()
    await asyncio.sleep(3 * api.settings.settle_interval)  # what the callbacks' checks could change
    for action_id, doc in before.items():
        now = decode(await api.db.actions.find_one({"_id": action_id}))
        assert (now["state"], now["history"]) == (doc["state"], doc["history"])
    assert [h["state"] for h in before[ok["actions"][0]["id"]]["history"]].count("FINISHED") == 1
    assert (await api.workflow(ok["id"]))["state"] == "SUCCEEDED"
    assert (await api.workflow(failed["id"]))["state"] == "FAILED"


async def launched(hadoop: HadoopPingo, job: str) -> bool:
    node = next(n for n in (await hadoop.oozie.info(job))["actions"] if n["type"] == "shell")
    return node["status"] == "RUNNING" and bool(node.get("externalId"))


async def test_killing_a_running_workflow_or_an_action_past_its_timeout_kills_its_oozie_job(
    hadoop: HadoopPingo,
) -> None:
    api = hadoop.api
    plan = await api.submit({"name": "to-kill", "actions": [
        synth(1, "k-slow", webhdfs=hadoop.webhdfs_url, SYNTH_SECONDS="600")]})  # fmt: skip
    # Beside it, an action that hangs past its timeout: Pingo kills its job.
    hang = synth(1, "k-hang", webhdfs=hadoop.webhdfs_url, SYNTH_SECONDS="600")
    hanging = await api.submit({"name": "hangs", "actions": [hang | {"timeoutSeconds": 1}]})
    # Killed once its job runs: the shell action launched (a YARN application on the real
    # cluster, a process on the emulator).
    async with asyncio.timeout(RUN_TIMEOUT):
        while not (job := (await api.workflow(plan["id"]))["actions"][0]["jobId"]):
            await asyncio.sleep(0.2)
        while not (await launched(hadoop, job)):
            await asyncio.sleep(0.5)
    assert (await api.workflow(plan["id"]))["actions"][0]["state"] == "RUNNING"
    status, _ = await api.request("POST", f"/api/v1/workflows/{plan['id']}/kill")
    assert status == 202
    wf = await api.wait(plan["id"], timeout=RUN_TIMEOUT)
    assert (wf["state"], wf["actions"][0]["state"]) == ("KILLED", "KILLED")
    assert (await hadoop.oozie.info(wf["actions"][0]["jobId"]))["status"] == "KILLED"
    assert not await hadoop.target.exists(f"{hadoop.root}/datasets/{wf['actions'][0]['hash']}")
    timed_out = await api.wait(hanging["id"], timeout=RUN_TIMEOUT)
    assert timed_out["state"] == "FAILED"
    (a,) = timed_out["actions"]
    assert (a["reason"], a["error"]) == ("timed_out", "timed out after 1 s")
    assert (await hadoop.oozie.info(a["jobId"]))["status"] == "KILLED"
