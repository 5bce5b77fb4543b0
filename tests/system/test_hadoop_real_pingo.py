"""Pingo's whole Hadoop path on real Apache servers (``real_hadoop``): the five services in
this process with ``PINGO_EXECUTOR=oozie`` and ``PINGO_STORAGE=webhdfs`` against the
session's real mini cluster (WebHDFS, YARN) and the session's real Apache Oozie 5.2.1.
Java MapReduce actions of both APIs (examples/wordcount-java) run through Oozie's
map-reduce action, committed and then reused (docs/hadoop-protocol.md, "Apache Oozie on
this machine"). The SHELL and streaming workflow computed, reused, changed and lost behind
Pingo's back runs on both targets, the emulator and this one, in
tests/system/test_hadoop_two_targets.py."""

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
from tests.support.java_mapreduce import build_wordcount
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT

pytestmark = pytest.mark.real_hadoop
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
