"""Java MapReduce on real YARN (``real_hadoop``): the Java word counts of
examples/wordcount-java, one of Hadoop's old ``mapred`` API and one of the new ``mapreduce``
API (``"mapreduceApi": "mapreduce"``), each a real YARN application on the session's mini
cluster. Each job is made of Pingo's own job properties (shared/hadoop/mapreduce.py, what
Oozie's ``<map-reduce>`` carries) and submitted the way Oozie's MapReduceMain submits them
(a JobConf of those properties, Hadoop's JobClient); it writes into an attempt folder Pingo
prepared, which Pingo's storage commits into a sealed dataset and checks again as a reuse
would. The emulator's Java MapReduce program (what the local executor and the emulator's
Oozie run: Hadoop's LocalJobRunner) on the same books must write the same part files,
byte for byte."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from pingo.minicluster import resolve_classpath
from pingo.minicluster.classpath import java_home
from shared.executors.base import JobRequest
from shared.executors.local import map_reduce_argv
from shared.hadoop.mapreduce import job_properties
from shared.hadoop.webhdfs import WebHdfs
from shared.storage.webhdfs import WebHdfsStorage
from shared.workflow_spec import ActionType
from tests.support.java_mapreduce import build_wordcount
from tests.support.spark import spark
from tests.support.workflows import ROOT

pytestmark = pytest.mark.real_hadoop
EXAMPLE = ROOT / "examples" / "wordcount-java"
BOOKS = sorted((ROOT / "examples" / "wordcount").glob("*.txt"))
DRIVER = Path(__file__).resolve().parents[1] / "support" / "java" / "JobConfMain.java"
JOB_TIMEOUT = 240
# The example workflows' Java actions: the old API's and the new API's.
WORKFLOWS = {"mapred": "wordcount-java.json", "mapreduce": "wordcount-mapreduce-api.json"}


def java_action(api: str) -> dict:
    return json.loads((EXAMPLE / WORKFLOWS[api]).read_text())["actions"][1]


def job(api: str, inputs: list[str], output: str, jars: Path) -> JobRequest:
    """The JobRequest Pingo's engine makes of the example's action (shared/lifecycle/starting.py)."""
    action = java_action(api)
    return JobRequest(
        action_id=f"wf-java.{api}", external_id=f"wf-java.{api}#1", type=ActionType.MAP_REDUCE, name=action["name"],
        action_folder=str(jars), main_class=None, command=None, arguments=[*inputs, output],
        configuration=action["configurationParameters"], notify_url="http://unused/callback",
        mapper=action["mapper"], reducer=action["reducer"], mapreduce_api=action.get("mapreduceApi") or "mapred",
    )  # fmt: skip


@pytest.fixture(scope="module")
def jars(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The word counts' jar and the driver's classes, built once."""
    folder = tmp_path_factory.mktemp("wordcount-java")
    build_wordcount(folder)
    classpath = os.pathsep.join(resolve_classpath(progress=False))
    javac = str(java_home() / "bin" / "javac")
    subprocess.run([javac, "-cp", classpath, "-d", str(folder / "driver"), str(DRIVER)], check=True)
    return folder


async def run_on_yarn(cluster, request: JobRequest, jar: Path, driver: Path) -> str:
    """The job through Hadoop's JobClient on the cluster; its client log."""
    argv = cluster.client_argv("pingo.test.JobConfMain", "-libjars", str(jar))
    # The driver's classes after the cluster's configuration and jars.
    cp = argv.index("-cp") + 1
    argv[cp] = os.pathsep.join([argv[cp], str(driver)])
    for key, value in job_properties(request).items():
        argv += ["-D", f"{key}={value}"]
    env = {**os.environ, "HADOOP_USER_NAME": cluster.hdfs_user}
    done = await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True, text=True,
                                   timeout=JOB_TIMEOUT, check=False)  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return log


async def emulate(request: JobRequest, books: Path) -> dict[str, bytes]:
    """What the local executor and the emulator run for the same action (Hadoop's
    LocalJobRunner, hadoop_emulator/mapreduce.py) on the same books: its part files."""
    local = books / "in"
    local.mkdir(parents=True)
    for text in BOOKS:
        (local / text.name).write_bytes(text.read_bytes())
    argv = map_reduce_argv(request.model_copy(update={"arguments": [str(local), str(books / "out")]}))
    done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=JOB_TIMEOUT,
                                   check=False)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert not list((books / "out").glob(".*.crc")), "Hadoop's local checksum files are not a dataset's"
    return {p.name: p.read_bytes() for p in sorted((books / "out").iterdir())}


@spark
@pytest.mark.parametrize("api", ["mapred", "mapreduce"])
async def test_a_java_word_count_runs_on_real_yarn_and_pingo_commits_and_reuses_its_output(
    real_hadoop_cluster, jars: Path, tmp_path: Path, api: str
) -> None:
    cluster = real_hadoop_cluster
    storage = WebHdfsStorage(WebHdfs(cluster.webhdfs_url, cluster.hdfs_user), f"{cluster.hdfs_root}/java-{api}")
    try:
        fs = storage.hdfs
        books = f"{storage.root}/books"
        for text in BOOKS:
            await fs.create(f"{books}/{text.name}", text.read_bytes())
        final = f"{storage.root}/datasets/wordcount"
        attempt = storage.attempt_path(final, f"wf-java.{api}", 1)
        await storage.prepare(attempt)
        request = job(api, [books], attempt, jars)
        # The emulator's run meanwhile: the real job mostly waits for YARN's heartbeats.
        t0 = time.monotonic()
        log, emulated = await asyncio.gather(
            run_on_yarn(cluster, request, jars / "wordcount.jar", jars / "driver"), emulate(request, tmp_path)
        )
        print(f"{api}: {time.monotonic() - t0:.1f} s on YARN and emulated")
        assert "Submitted application application_" in log and "completed successfully" in log
        assert await storage.commit(attempt, final) is True
        assert (await fs.status(final))["permission"] == "555"
        # The old API's tasks name their parts part-NNNNN, the new API's part-r-NNNNN.
        part = "part-" if api == "mapred" else "part-r-"
        names = sorted(e["pathSuffix"] for e in await fs.list(final))
        assert names == ["_SUCCESS", f"{part}00000", f"{part}00001"]
        real = {name: await fs.open(f"{final}/{name}") for name in names}
        # A reuse checks the dataset against what it was at commit (docs/planning.md, "Lost datasets").
        committed = await storage.integrity(final, checksum=True)
        assert committed is not None and await storage.integrity(final, checksum=True) == committed
    finally:
        await storage.close()
    # The same files, byte for byte: Hadoop's partitioning, sort and text output, either API.
    assert emulated == real
