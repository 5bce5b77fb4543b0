"""The Sqoop trial of issue 27 (``real_hadoop``): Apache Sqoop 1.4.7, its last release, from
Maven Central's jars (pingo/minicluster/sqoop/pom.xml) on Java 17, imports a table of a
PostgreSQL server of the tests' own (Debian's binaries) as a real MapReduce job on YARN,
into an attempt folder Pingo's WebHDFS storage prepared and then commits; and a query the
way Pingo's local path would run it, with Hadoop's LocalJobRunner into a local folder
(docs/hadoop-protocol.md, "Apache Sqoop on this machine")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from pingo.minicluster.classpath import SQOOP_POM, resolve_classpath
from shared.hadoop.webhdfs import WebHdfs
from shared.storage.webhdfs import WebHdfsStorage
from tests.support.postgres import USER, Postgres, postgres_server

pytestmark = pytest.mark.real_hadoop
JOB_TIMEOUT = 300
ROWS = [(1, "Lyon", 522250), (2, "Nantes", 320732), (3, "Brest", 139926)]


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as server:
        values = ", ".join(f"({i}, '{name}', {n})" for i, name, n in ROWS)
        server.sql(f"CREATE TABLE cities (id int PRIMARY KEY, name text, population int); "
                   f"INSERT INTO cities VALUES {values};")  # fmt: skip
        yield server


def sqoop_jars() -> list[str]:
    return resolve_classpath(progress=False, pom=SQOOP_POM, name="sqoop-1.4.7")


def sqoop_import(server: Postgres, work: Path, generic: list[str], args: list[str]) -> list[str]:
    """``sqoop import`` from ``server``: Hadoop's ``generic`` options (-D, -fs) come right
    after the tool's name. Sqoop writes and compiles its record class under ``work``."""
    return ["org.apache.sqoop.Sqoop", "import", *generic, "--connect", server.jdbc_url, "--username", USER,
            *args, "-m", "1", "--outdir", str(work / "src"), "--bindir", str(work / "classes")]  # fmt: skip


def run(argv: list[str], user: str) -> str:
    job = subprocess.run(argv, env={**os.environ, "HADOOP_USER_NAME": user}, capture_output=True, text=True,
                         timeout=JOB_TIMEOUT, check=False)  # fmt: skip
    log = job.stdout + job.stderr
    assert job.returncode == 0, log[-4000:]
    return log


async def test_sqoop_imports_a_table_on_real_yarn_and_pingo_commits_it(
    real_hadoop_cluster, postgres: Postgres, tmp_path: Path
) -> None:
    cluster = real_hadoop_cluster
    storage = WebHdfsStorage(WebHdfs(cluster.webhdfs_url, cluster.hdfs_user), f"{cluster.hdfs_root}/sqoop")
    try:
        fs = storage.hdfs
        final = f"{storage.root}/datasets/cities"
        attempt = storage.attempt_path(final, "wf-sqoop.1", 1)
        await storage.prepare(attempt)  # the job's output folder: its parent, not itself
        argv = cluster.client_argv(
            *sqoop_import(postgres, tmp_path, ["-D", "mapreduce.job.name=cities"],
                          ["--table", "cities", "--target-dir", attempt]),
            jars=sqoop_jars(),
        )  # fmt: skip
        t0 = time.monotonic()
        log = await asyncio.to_thread(run, argv, cluster.hdfs_user)
        took = time.monotonic() - t0
        assert "Submitted application application_" in log and "Retrieved 3 records." in log
        assert await storage.commit(attempt, final) is True
        assert (await fs.status(final))["permission"] == "555"
        assert sorted(e["pathSuffix"] for e in await fs.list(final)) == ["_SUCCESS", "part-m-00000"]
        rows = (await fs.open(f"{final}/part-m-00000")).decode().splitlines()
        assert rows == [",".join(map(str, row)) for row in ROWS]
    finally:
        await storage.close()
    print(f"\nSqoop import on real YARN: {took:.0f} s")


def test_sqoop_imports_a_query_with_the_local_job_runner(
    real_hadoop_cluster, postgres: Postgres, tmp_path: Path
) -> None:
    out = tmp_path / "attempt"
    query = "SELECT id, name FROM cities WHERE population > 200000 AND $CONDITIONS"
    # The record class Sqoop compiles is in the job's jar, which the LocalJobRunner does not
    # load: its class folder must be on the client's class path, and exist when the JVM
    # starts (Java's class loader passes over a folder it did not find then).
    (tmp_path / "classes").mkdir()
    argv = real_hadoop_cluster.client_argv(
        *sqoop_import(postgres, tmp_path, ["-D", "mapreduce.framework.name=local", "-fs", "file:///"],
                      ["--query", query, "--target-dir", str(out)]),
        jars=[str(tmp_path / "classes"), *sqoop_jars()],
    )  # fmt: skip
    log = run(argv, real_hadoop_cluster.hdfs_user)
    assert "Retrieved 2 records." in log
    assert (out / "part-m-00000").read_text().splitlines() == ["1,Lyon", "2,Nantes"]
