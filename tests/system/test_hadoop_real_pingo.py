"""Pingo's whole Hadoop path on real Apache servers (``real_hadoop``): the five services in
this process with ``PINGO_EXECUTOR=oozie`` and ``PINGO_STORAGE=webhdfs`` against the
session's real mini cluster (WebHDFS, YARN) and a real Apache Oozie 5.2.1 (one for the
module). A workflow of SHELL actions is submitted over the API, each action runs through
Oozie as a real YARN application, its output is committed into Pingo's managed root on
HDFS; submitted again, everything is reused; a dataset deleted on HDFS behind Pingo's back
is found LOST by the reconcile sweep and computed again by the next submission. Java
MapReduce actions of both APIs (examples/wordcount-java) run through Oozie's map-reduce
action too, committed and then reused; and a SQOOP import of a PostgreSQL table through
Oozie's sqoop action, reused with a cacheVersion (docs/hadoop-protocol.md, "Apache Oozie on
this machine")."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from pingo.dev import all_services
from pingo.minicluster.oozie_server import OozieServer
from shared.hadoop.oozie import Oozie
from shared.hadoop.webhdfs import WebHdfs
from shared.runtime import Context, running
from shared.store import users
from shared.store.transitions import decode
from tests.support.java_mapreduce import build_wordcount
from tests.support.postgres import Postgres
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT
from tests.system import test_sqoop
from tests.system.test_sqoop import PASSWORD, expected

pytestmark = pytest.mark.real_hadoop
postgres = test_sqoop.postgres  # the fixture: a table, and a role that must give its password
WORDCOUNT = ROOT / "examples" / "wordcount"
WORDCOUNT_JAVA = ROOT / "examples" / "wordcount-java"
WORD = r"[a-z]+(?:'[a-z]+)*"  # the word counts' own pattern
OWNER = "alice"  # in a group the cluster lets Pingo act for (tests/support/hadoop_targets.py)
RUN_TIMEOUT = 420.0  # three YARN applications one after the other, each a launcher of its own


@pytest.fixture
async def pingo_on_real_hadoop(real_oozie: OozieServer, tmp_path: Path, mongo_url: str):
    cluster = real_oozie.cluster
    settings = make_settings(
        tmp_path, mongo_url, executor="oozie", storage="webhdfs", oozie_url=real_oozie.url,
        webhdfs_url=cluster.webhdfs_url, name_node=cluster.name_node, job_tracker=cluster.resource_manager,
        hdfs_user=cluster.hdfs_user, hdfs_root=cluster.hdfs_root, action_roots=[], output_roots=[],
        poll_interval=1.0, poll_max_interval=3.0, reconcile_interval=2.0,
    )  # fmt: skip
    fs = WebHdfs(cluster.webhdfs_url, cluster.hdfs_user)
    # The action's folder on HDFS, where Oozie ships it from (<file>).
    await fs.create(f"{cluster.hdfs_root}/actions/jobs/hdfs_synth.py",
                    (ROOT / "tests" / "jobs" / "hdfs_synth.py").read_bytes(), overwrite=True)  # fmt: skip
    for name in ("mapper.py", "reducer.py"):
        await fs.create(f"{cluster.hdfs_root}/actions/wordcount/{name}",
                        (WORDCOUNT / name).read_bytes(), overwrite=True)  # fmt: skip
    # The workflow's owner, whose jobs Oozie runs (doAs): on real Hadoop the Oozie server's
    # user (Pingo's here) may only act for users the cluster's proxy-user settings allow,
    # and Oozie stages each launcher under the owner's home.
    cluster.webhdfs("PUT", f"/user/{OWNER}", "MKDIRS")
    cluster.webhdfs("PUT", f"/user/{OWNER}", "SETOWNER", owner=OWNER)
    ctx = await Context.open(settings)
    try:
        async with running(ctx, all_services):
            api = Api(settings, await users.add(ctx.store, OWNER, False, time.time()))
            await api.open()
            try:
                yield api, fs, cluster
            finally:
                await api.close()
    finally:
        await fs.close()


def chain(webhdfs: str, top: str = "rc-top") -> dict:
    """root <- mid <- top, each an hdfs_synth.py shell action, and a streaming word count
    (examples/wordcount's mapper and reducer, Oozie's ``<map-reduce>``) of mid."""

    def action(aid: int, label: str, parents: list[int]) -> dict:
        return {"id": aid, "name": label, "type": "SHELL", "actionFolder": "jobs",
                "command": ["python3", "hdfs_synth.py"], "parentActions": [{"id": p} for p in parents],
                "additionalInput": [{"key": "label", "value": label}],
                "configurationParameters": [{"key": "PINGO_JOB_WEBHDFS", "value": webhdfs}]}  # fmt: skip

    count = {"id": 4, "name": "rc-count", "type": "MAP_REDUCE", "actionFolder": "wordcount",
             "parentActions": [{"id": 2}], "mapper": ["python3", "mapper.py"], "reducer": ["python3", "reducer.py"],
             "configurationParameters": [{"key": "mapreduce.job.reduces", "value": "1"}]}  # fmt: skip
    return {"name": "real-chain", "actions": [action(1, "rc-root", []), action(2, "rc-mid", [1]),
                                              action(3, top, [2]), count]}  # fmt: skip


async def test_a_workflow_runs_on_real_oozie_and_yarn_is_reused_and_a_lost_dataset_recomputed(
    pingo_on_real_hadoop,
) -> None:
    api, fs, cluster = pingo_on_real_hadoop
    body = chain(cluster.webhdfs_url)
    t0 = time.monotonic()
    wf = await api.run(body, timeout=RUN_TIMEOUT)
    computed_in = time.monotonic() - t0
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a["error"]) for a in wf["actions"]]
    assert [a["decision"] for a in wf["actions"]] == ["compute"] * 4
    root = cluster.hdfs_root
    for a in wf["actions"][:3]:
        assert a["outputPath"] == f"{root}/datasets/{a['hash']}"
        # Committed and sealed on the real NameNode: read-only for everyone, Pingo's.
        status = await fs.status(a["outputPath"])
        assert (status["owner"], status["permission"]) == (OWNER, "555")
        lineage = (await fs.open(f"{a['outputPath']}/_lineage")).decode().split("\n")[1:-1]
        assert lineage == [f"{root}/datasets/{wf['actions'][p - 1]['hash']}" for p in sorted(a["parents"])]
        assert a["size"] > 0

    # The word count's output: the words of mid's part file, counted by real MapReduce.
    count, mid = wf["actions"][3], wf["actions"][1]
    assert count["outputPath"] == f"{root}/datasets/{count['hash']}"
    assert (await fs.status(count["outputPath"]))["permission"] == "555"
    words = Counter(re.findall(r"[a-z]+(?:'[a-z]+)*", (await fs.open(f"{mid['outputPath']}/part-00000")).decode()))
    lines = (await fs.open(f"{count['outputPath']}/part-00000")).decode().splitlines()
    counted = dict(line.split("\t") for line in lines)
    assert {w: int(n) for w, n in counted.items()} == dict(words)
    # Each ran through the real Oozie, as the owner, as a YARN application.
    oozie = Oozie(api.settings.oozie_url, cluster.hdfs_user)
    try:
        for a in wf["actions"]:
            assert a["jobId"].endswith("-W"), a
            info = await oozie.info(a["jobId"])
            assert (info["status"], info["user"]) == ("SUCCEEDED", OWNER)
            node = next(n for n in info["actions"] if n["type"] in ("shell", "map-reduce"))
            # A map-reduce action is named by its MapReduce job once the launcher ran it.
            assert node["externalId"].startswith("job_" if node["type"] == "map-reduce" else "application_"), node
    finally:
        await oozie.close()

    again = await api.run(body, timeout=RUN_TIMEOUT)
    assert again["state"] == "SUCCEEDED"
    assert [a["decision"] for a in again["actions"]] == ["reuse"] * 4  # 0 computed

    # Behind Pingo's back: HDFS's superuser deletes the sealed dataset.
    assert cluster.webhdfs("DELETE", mid["outputPath"], "DELETE", recursive="true")["boolean"] is True
    deadline = time.monotonic() + 60
    while (doc := decode(await api.db.datasets.find_one({"_id": mid["hash"]})))["state"] != "LOST":
        assert time.monotonic() < deadline, f"dataset still {doc['state']}, not LOST"
        await asyncio.sleep(0.5)
    assert doc["lost_reason"] == "missing"

    # A new top needs the lost dataset: it is computed again, the root reused.
    t0 = time.monotonic()
    third = await api.run(chain(cluster.webhdfs_url, "rc-top-b"), timeout=RUN_TIMEOUT)
    recomputed_in = time.monotonic() - t0
    assert third["state"] == "SUCCEEDED", [(a["localId"], a["state"], a["error"]) for a in third["actions"]]
    decisions = [a["decision"] for a in third["actions"]]
    assert decisions == ["reuse", "compute", "compute", "reuse"], decisions
    assert (await fs.status(mid["outputPath"]))["permission"] == "555"
    assert decode(await api.db.datasets.find_one({"_id": mid["hash"]}))["state"] in ("STORED", "LEAF")
    print(f"\n3 shell actions and a streaming word count on real Oozie/YARN: {computed_in:.0f} s computed, "
          f"{recomputed_in:.0f} s after a loss")  # fmt: skip


def java_word_counts(books: str) -> dict:
    """The MAP_REDUCE actions of examples/wordcount-java's two workflows (old ``mapred`` API,
    and new ``mapreduce`` API by ``mapreduceApi``), each counting the words of ``books``, an
    HDFS folder, with its jar from the action folder ``wordcount-java`` on HDFS."""
    actions = []
    for aid, example in enumerate(("wordcount-java.json", "wordcount-mapreduce-api.json"), start=1):
        action = json.loads((WORDCOUNT_JAVA / example).read_text())["actions"][1]
        del action["parentActions"]
        action |= {"id": aid, "actionFolder": "wordcount-java", "additionalInput": [{"value": books}]}
        action["configurationParameters"]["mapreduce.job.reduces"] = "1"
        actions.append(action)
    return {"name": "real-java-wordcounts", "actions": actions}


async def test_java_mapreduce_of_both_apis_runs_through_real_oozie_and_is_reused(
    pingo_on_real_hadoop, tmp_path: Path
) -> None:
    api, fs, cluster = pingo_on_real_hadoop
    root = cluster.hdfs_root
    jar = await asyncio.to_thread(build_wordcount, tmp_path)
    # The job's jar in its action folder: Pingo names the folder as oozie.libpath.
    await fs.create(f"{root}/actions/wordcount-java/wordcount.jar", jar.read_bytes(), overwrite=True)
    books, text = f"{root}/actions/books", ""
    for path in sorted(WORDCOUNT.glob("*.txt")):
        await fs.create(f"{books}/{path.name}", path.read_bytes(), overwrite=True)
        text += path.read_text()
    expected = Counter(re.findall(WORD, text.lower()))
    body = java_word_counts(books)

    t0 = time.monotonic()
    wf = await api.run(body, timeout=RUN_TIMEOUT)
    computed_in = time.monotonic() - t0
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a["error"]) for a in wf["actions"]]
    assert [a["decision"] for a in wf["actions"]] == ["compute"] * 2
    oozie = Oozie(api.settings.oozie_url, cluster.hdfs_user)
    try:
        # New-API reducers name their files part-r-NNNNN, old-API ones part-NNNNN.
        for a, part in zip(wf["actions"], ("part-00000", "part-r-00000"), strict=True):
            assert a["outputPath"] == f"{root}/datasets/{a['hash']}"
            status = await fs.status(a["outputPath"])
            assert (status["owner"], status["permission"]) == (OWNER, "555")
            assert sorted(f["pathSuffix"] for f in await fs.list(a["outputPath"])) == ["_SUCCESS", part]
            lines = (await fs.open(f"{a['outputPath']}/{part}")).decode().splitlines()
            assert {w: int(n) for w, n in (line.split("\t") for line in lines)} == dict(expected)
            # Oozie's map-reduce action ran it (MapReduceMain), as the owner, a MapReduce job on YARN.
            info = await oozie.info(a["jobId"])
            assert (info["status"], info["user"]) == ("SUCCEEDED", OWNER)
            node = next(n for n in info["actions"] if n["type"] == "map-reduce")
            assert node["externalId"].startswith("job_"), node
    finally:
        await oozie.close()

    again = await api.run(body, timeout=RUN_TIMEOUT)
    assert again["state"] == "SUCCEEDED"
    assert [a["decision"] for a in again["actions"]] == ["reuse"] * 2
    print(f"\nJava MapReduce, old and new API, through real Oozie/YARN: {computed_in:.0f} s")


def sqoop_import(example: str, values: dict[str, str]) -> dict:
    """The import of one of examples/sqoop's workflows (its count left out), with
    ``values`` for its parameters."""
    body = json.loads((ROOT / "examples" / "sqoop" / example).read_text())
    (action,) = [a for a in body["actions"] if a["type"] == "SQOOP"]
    return {**body, "actions": [action], "parameterValues": values}


async def test_a_sqoop_import_runs_through_real_oozie_is_reused_with_a_cache_version_and_imported_again_without(
    pingo_on_real_hadoop, postgres: Postgres
) -> None:
    """A SQOOP action submitted over the API: Oozie's ``<sqoop>`` runs Sqoop 1.4.7 as the
    owner, a MapReduce job on YARN reading a PostgreSQL table with a password from a file
    on HDFS (examples/sqoop's import); it is committed and sealed; with its cacheVersion it
    is reused, and without one the next submission would import again, saying why."""
    api, fs, cluster = pingo_on_real_hadoop
    # The password file is the owner's, readable by them alone, on the executor's file
    # system (docs/planning.md, "SQOOP actions").
    password = f"/user/{OWNER}/cities.password"
    owners = WebHdfs(cluster.webhdfs_url, OWNER)
    try:
        await owners.create(password, PASSWORD.encode(), overwrite=True)
    finally:
        await owners.close()
    cluster.webhdfs("PUT", password, "SETPERMISSION", permission="400")
    values = {"connect": postgres.jdbc_url, "passwordFile": password}
    pinned = sqoop_import("cities-snapshot.json", values)
    assert "cacheVersion" in pinned["actions"][0]

    t0 = time.monotonic()
    wf = await api.run(pinned, timeout=RUN_TIMEOUT)
    imported_in = time.monotonic() - t0
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a["error"]) for a in wf["actions"]]
    (action,) = wf["actions"]
    assert action["decision"] == "compute"
    assert action["outputPath"] == f"{cluster.hdfs_root}/datasets/{action['hash']}"
    status = await fs.status(action["outputPath"])
    assert (status["owner"], status["permission"]) == (OWNER, "555")
    assert (await fs.open(f"{action['outputPath']}/part-m-00000")).decode().splitlines() == expected(postgres)
    assert PASSWORD not in json.dumps(wf)
    oozie = Oozie(api.settings.oozie_url, cluster.hdfs_user)
    try:
        info = await oozie.info(action["jobId"])
        assert (info["status"], info["user"]) == ("SUCCEEDED", OWNER)
        # Named by its launcher, the MapReduce job Sqoop submitted its child (the emulator says the same).
        node = next(n for n in info["actions"] if n["type"] == "sqoop")
        assert node["externalId"].startswith("application_") and node["externalChildIDs"].startswith("job_"), node
    finally:
        await oozie.close()

    again = await api.run(pinned, timeout=RUN_TIMEOUT)
    assert again["state"] == "SUCCEEDED"
    assert [(a["decision"], a["outputPath"]) for a in again["actions"]] == [("reuse", action["outputPath"])]

    # Without a cacheVersion the database's rows are not vouched for: a new lineage at each
    # submission, and the plan says what changed.
    unpinned = {**sqoop_import("cities.json", values), "name": pinned["name"]}  # the same import otherwise
    code, plan = await api.request("POST", "/api/v1/workflows?dryRun=true", json=unpinned)
    assert code == 200, plan
    (planned,) = plan["actions"]
    assert planned["decision"] == "compute", planned
    miss = planned["miss"]
    assert [c["field"] for c in miss["changes"]] == ["cacheVersion", "importedAt"], miss
    assert miss["summary"].startswith("cacheVersion removed; importedAt added"), miss
    print(f"\nA Sqoop import through the services on real Oozie/YARN: {imported_in:.0f} s")
