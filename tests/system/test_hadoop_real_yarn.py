"""MapReduce on real YARN (``real_hadoop``): Pingo's word count (examples/wordcount) as a
Hadoop streaming job through Apache Hadoop's own ``hadoop-streaming`` jar, a real YARN
application on the session's mini cluster (an MRAppMaster, two maps, two reduces in
containers), written into an attempt folder Pingo prepared and committed into a sealed
dataset by Pingo's storage. The emulator's streaming engine, run on the same input, must
write the same part files byte for byte: its partitioning (Java's String.hashCode) and its
sort are checked against Hadoop's."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.hadoop.streaming import join_args
from shared.hadoop.webhdfs import WebHdfs
from shared.storage.webhdfs import WebHdfsStorage
from tests.support.workflows import ROOT

pytestmark = pytest.mark.real_hadoop
WORDCOUNT = ROOT / "examples" / "wordcount"
MAPPER, REDUCER = ["python3", "mapper.py"], ["python3", "reducer.py"]
JOB_TIMEOUT = 240


async def test_a_streaming_word_count_runs_on_real_yarn_and_pingo_commits_its_output(
    real_hadoop_cluster, tmp_path: Path
) -> None:
    cluster = real_hadoop_cluster
    storage = WebHdfsStorage(WebHdfs(cluster.webhdfs_url, cluster.hdfs_user), f"{cluster.hdfs_root}/yarn")
    try:
        fs = storage.hdfs
        books = f"{storage.root}/books"
        for text in sorted(WORDCOUNT.glob("*.txt")):
            await fs.create(f"{books}/{text.name}", text.read_bytes())
        final = f"{storage.root}/datasets/wordcount"
        attempt = storage.attempt_path(final, "wf-real.2", 1)
        await storage.prepare(attempt)  # the job's output folder: its parent, not itself
        files = ",".join(f"file://{WORDCOUNT / name}" for name in ("mapper.py", "reducer.py"))
        argv = cluster.client_argv(
            "org.apache.hadoop.streaming.HadoopStreaming", "-D", "mapreduce.job.reduces=2",
            "-files", files, "-mapper", join_args(MAPPER), "-reducer", join_args(REDUCER),
            "-input", books, "-output", attempt,
        )  # fmt: skip
        env = {**os.environ, "HADOOP_USER_NAME": cluster.hdfs_user}
        job = await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True, text=True,
                                      timeout=JOB_TIMEOUT, check=False)  # fmt: skip
        log = job.stdout + job.stderr
        assert job.returncode == 0, log[-4000:]
        assert "Submitted application application_" in log and "completed successfully" in log
        assert await storage.commit(attempt, final) is True
        assert (await fs.status(final))["permission"] == "555"
        names = sorted(e["pathSuffix"] for e in await fs.list(final))
        assert names == ["_SUCCESS", "part-00000", "part-00001"]
        real = {name: await fs.open(f"{final}/{name}") for name in names if name.startswith("part-")}
    finally:
        await storage.close()

    # The emulator's streaming engine on the same books: the same parts, byte for byte.
    local = tmp_path / "books"
    local.mkdir()
    for text in WORDCOUNT.glob("*.txt"):
        (local / text.name).write_bytes(text.read_bytes())
    emulated = subprocess.run(
        [sys.executable, "-m", "hadoop_emulator.streaming", "--mapper", json.dumps(MAPPER),
         "--reducer", json.dumps(REDUCER), "--input", str(local), "--output", "out", "--files", str(WORDCOUNT),
         "--conf", "mapreduce.job.reduces=2"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert emulated.returncode == 0, emulated.stderr
    assert {p.name: p.read_bytes() for p in sorted((tmp_path / "out").glob("part-*"))} == real
