"""Pingo's whole Hadoop path on real Apache servers (``real_hadoop``): the five services in
this process with ``PINGO_EXECUTOR=oozie`` and ``PINGO_STORAGE=webhdfs`` against the
session's real mini cluster (WebHDFS, YARN) and the session's real Apache Oozie 5.2.1.
Java MapReduce actions of both APIs (examples/wordcount-java) run through Oozie's
map-reduce action, committed and then reused; and a SQOOP import of a PostgreSQL table
through Oozie's sqoop action, reused with a cacheVersion (docs/hadoop-protocol.md, "Apache
Oozie on this machine"). The SHELL and streaming workflow computed, reused, changed and
lost behind Pingo's back runs on both targets, the emulator and this one, in
tests/system/test_hadoop_two_targets.py."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from shared.hadoop.webhdfs import WebHdfs
from tests.support.hadoop_pingo import OWNER, pingo_on_hadoop
from tests.support.java_mapreduce import build_wordcount
from tests.support.postgres import Postgres
from tests.support.workflows import ROOT
from tests.system import test_sqoop
from tests.system.test_sqoop import PASSWORD, expected

pytestmark = pytest.mark.real_hadoop
postgres = test_sqoop.postgres  # the fixture: a table, and a role that must give its password
WORDCOUNT = ROOT / "examples" / "wordcount"
WORDCOUNT_JAVA = ROOT / "examples" / "wordcount-java"
WORD = r"[a-z]+(?:'[a-z]+)*"  # the word counts' own pattern
RUN_TIMEOUT = 420.0  # three YARN applications one after the other, each a launcher of its own


@pytest.fixture
async def pingo_on_real_hadoop(request: pytest.FixtureRequest, tmp_path: Path, mongo_url: str):
    """The two-target suite's Pingo (tests/support/hadoop_pingo.py) on its real target."""
    async for pingo in pingo_on_hadoop("real", request, tmp_path, mongo_url):
        yield pingo


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
    api, fs, root = pingo_on_real_hadoop.api, pingo_on_real_hadoop.fs, pingo_on_real_hadoop.root
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
    # New-API reducers name their files part-r-NNNNN, old-API ones part-NNNNN.
    for a, part in zip(wf["actions"], ("part-00000", "part-r-00000"), strict=True):
        assert a["outputPath"] == f"{root}/datasets/{a['hash']}"
        status = await fs.status(a["outputPath"])
        assert (status["owner"], status["permission"]) == (OWNER, "555")
        assert sorted(f["pathSuffix"] for f in await fs.list(a["outputPath"])) == ["_SUCCESS", part]
        lines = (await fs.open(f"{a['outputPath']}/{part}")).decode().splitlines()
        assert {w: int(n) for w, n in (line.split("\t") for line in lines)} == dict(expected)
        # Oozie's map-reduce action ran it (MapReduceMain), as the owner, a MapReduce job on YARN.
        info = await pingo_on_real_hadoop.oozie.info(a["jobId"])
        assert (info["status"], info["user"]) == ("SUCCEEDED", OWNER)
        node = next(n for n in info["actions"] if n["type"] == "map-reduce")
        assert node["externalId"].startswith("job_"), node

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
    api, fs = pingo_on_real_hadoop.api, pingo_on_real_hadoop.fs
    # The password file is the owner's, readable by them alone, on the executor's file
    # system (docs/planning.md, "SQOOP actions").
    password = f"/user/{OWNER}/cities.password"
    owners = WebHdfs(pingo_on_real_hadoop.webhdfs_url, OWNER)
    try:
        await owners.create(password, PASSWORD.encode(), overwrite=True)
    finally:
        await owners.close()
    await pingo_on_real_hadoop.target.as_superuser("PUT", password, op="SETPERMISSION", permission="400")
    values = {"connect": postgres.jdbc_url, "passwordFile": password}
    pinned = sqoop_import("cities-snapshot.json", values)
    assert "cacheVersion" in pinned["actions"][0]

    t0 = time.monotonic()
    wf = await api.run(pinned, timeout=RUN_TIMEOUT)
    imported_in = time.monotonic() - t0
    assert wf["state"] == "SUCCEEDED", [(a["localId"], a["state"], a["error"]) for a in wf["actions"]]
    (action,) = wf["actions"]
    assert action["decision"] == "compute"
    assert action["outputPath"] == f"{pingo_on_real_hadoop.root}/datasets/{action['hash']}"
    status = await fs.status(action["outputPath"])
    assert (status["owner"], status["permission"]) == (OWNER, "555")
    assert (await fs.open(f"{action['outputPath']}/part-m-00000")).decode().splitlines() == expected(postgres)
    assert PASSWORD not in json.dumps(wf)
    info = await pingo_on_real_hadoop.oozie.info(action["jobId"])
    assert (info["status"], info["user"]) == ("SUCCEEDED", OWNER)
    # Named by its launcher, the MapReduce job Sqoop submitted its child (the emulator says the same).
    node = next(n for n in info["actions"] if n["type"] == "sqoop")
    assert node["externalId"].startswith("application_") and node["externalChildIDs"].startswith("job_"), node

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
