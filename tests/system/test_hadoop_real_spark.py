"""SPARK on real YARN (``real_hadoop``): the PySpark word count of examples/spark as Pingo's
executor submits a SPARK action (``spark-submit --master yarn``, pingo[spark]'s Spark), a
real YARN application on the session's mini cluster (Spark's application master and one
executor in containers), reading its input from HDFS and writing into an attempt folder
Pingo prepared, which Pingo's storage commits into a sealed dataset and checks again as a
reuse would. Its part file is byte for byte what the application defines (the local mode's
run of the same application, which the emulator's Oozie uses for a ``yarn`` master, is held
to the same counts in tests/system/test_action_types.py)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import time

import pytest

from shared.executors.base import JobRequest
from shared.executors.local import spark_argv
from shared.hadoop.webhdfs import WebHdfs
from shared.storage.webhdfs import WebHdfsStorage
from shared.workflow_spec import ActionType
from tests.support.spark import spark
from tests.support.workflows import ROOT

pytestmark = pytest.mark.real_hadoop
EXAMPLES = ROOT / "examples"
BOOKS = sorted((EXAMPLES / "wordcount").glob("*.txt"))
JOB_TIMEOUT = 300


def count_words(inputs: list[str], output: str) -> JobRequest:
    """The JobRequest Pingo's engine makes of examples/spark/words.json's "count words"."""
    action = json.loads((EXAMPLES / "spark" / "words.json").read_text())["actions"][1]
    return JobRequest(
        action_id="wf-spark.2", external_id="wf-spark.2#1", type=ActionType.SPARK, name=action["name"],
        action_folder=str(ROOT / action["actionFolder"]), main_class=None, command=None,
        arguments=[*inputs, output], configuration=action["configurationParameters"],
        notify_url="http://unused/callback", application=action["application"],
    )  # fmt: skip


async def run(argv: list[str], env: dict[str, str]) -> str:
    done = await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True, text=True,
                                   timeout=JOB_TIMEOUT, check=False)  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return log


def expected_counts() -> bytes:
    """count.py's output by its own definition: its words (split at spaces once ``,.;`` are
    spaces), most frequent first, then by word; one part file, as its coalesce(1) makes."""
    words = collections.Counter()
    for text in BOOKS:
        for line in text.read_text().splitlines():
            words.update(line.lower().replace(",", " ").replace(".", " ").replace(";", " ").split())
    ranked = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(f"{word}\t{count}\n" for word, count in ranked).encode()


@spark
async def test_a_pyspark_action_runs_on_real_yarn_and_pingo_commits_and_reuses_its_output(
    real_hadoop_cluster,
) -> None:
    cluster = real_hadoop_cluster
    storage = WebHdfsStorage(WebHdfs(cluster.webhdfs_url, cluster.hdfs_user), f"{cluster.hdfs_root}/spark")
    try:
        fs = storage.hdfs
        books = f"{storage.root}/books"
        for text in BOOKS:
            await fs.create(f"{books}/{text.name}", text.read_bytes())
        final = f"{storage.root}/datasets/counts"
        attempt = storage.attempt_path(final, "wf-spark.2", 1)
        await storage.prepare(attempt)
        env = {**os.environ, **cluster.client_env(), "PYSPARK_PYTHON": sys.executable}
        t0 = time.monotonic()
        log = await run(spark_argv(count_words([books], attempt), "yarn"), env)
        print(f"spark: {time.monotonic() - t0:.1f} s on YARN")
        assert "Submitted application application_" in log
        assert await storage.commit(attempt, final) is True
        assert (await fs.status(final))["permission"] == "555"
        assert sorted(e["pathSuffix"] for e in await fs.list(final)) == ["_SUCCESS", "part-00000"]
        real = await fs.open(f"{final}/part-00000")
        committed = await storage.integrity(final, checksum=True)
        assert committed is not None and await storage.integrity(final, checksum=True) == committed
    finally:
        await storage.close()
    assert real == expected_counts()
