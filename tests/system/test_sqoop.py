"""SQOOP actions (docs/planning.md, "SQOOP actions"): Apache Sqoop 1.4.7 (``pingo
sqoop-classpath``) imports a table of a PostgreSQL server of the tests' own into a managed
dataset, as a user whose password only a file holds, through the local executor and as
Oozie's ``<sqoop>`` action on the emulator. A database's content cannot be fingerprinted:
an import without a cacheVersion is a fresh lineage at every submission, and its miss says
so; with one it is reused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pingo.minicluster.sqoop_classpath import main as sqoop_main
from pingo.minicluster.sqoop_classpath import sqoop_classpath
from shared.config import Settings
from shared.hadoop.oozie import Oozie
from tests.support.postgres import Postgres, postgres_server
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT
from tests.system import test_hadoop_system
from tests.system.test_hadoop_system import Hadoop

hadoop = test_hadoop_system.hadoop  # the fixture: five services as processes and the emulator

# examples/sqoop's database: its table, and the role it makes and the password it gives it.
GEO_SQL = ROOT / "examples" / "sqoop" / "geo.sql"
READER, PASSWORD = "reader", "reader-pw"


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """examples/sqoop's table, and its role, which must give its password (scram-sha-256)
    to read it: the first line of pg_hba.conf, ahead of the trust the tests' own
    connections use."""
    with postgres_server() as server:
        server.sql(GEO_SQL.read_text())
        hba = Path(server.sql("SHOW hba_file").strip())
        hba.write_text(f"host all {READER} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        server.sql("SELECT pg_reload_conf()")
        yield server


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "db.password"
    path.write_text(PASSWORD)  # the whole file is the password: no newline
    path.chmod(0o400)
    return path


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    return make_settings(tmp_path, mongo_url, action_roots=[ROOT, tmp_path], sqoop_classpath=sqoop_classpath())


def workflow(server: Postgres, password_file: Path, **extra: Any) -> dict[str, Any]:
    """The import, and a SHELL action counting its rows (a descendant of the database)."""
    return {
        "name": "cities",
        "actions": [
            {"id": 1, "name": "import cities", "type": "SQOOP", "connect": server.jdbc_url, "table": "cities",
             "columnNames": ["id", "name"], "where": "population > 200000", "username": READER,
             "passwordFile": str(password_file), **extra},
            {"id": 2, "name": "count", "type": "SHELL", "parentActions": [1],
             "command": ["sh", "-c", 'cat "$0"/part-* | wc -l > "$1"']},
        ],
    }  # fmt: skip


def expected(server: Postgres) -> list[str]:
    """The rows the workflow's import reads, as Sqoop writes them (the table as it is now)."""
    return server.sql("SELECT id || ',' || name FROM cities WHERE population > 200000 ORDER BY id").split()


def rows(action: dict[str, Any]) -> list[str]:
    return [line for p in sorted(Path(action["outputPath"]).glob("part-m-*")) for line in p.read_text().splitlines()]


async def log(api: Api, action_id: str, stream: str) -> str:
    assert api.http is not None
    async with api.http.get(f"{api.base}/api/v1/actions/{action_id}/logs?stream={stream}") as r:
        assert r.status == 200
        return await r.text()


def failures(wf: dict[str, Any]) -> list:
    return [(a["localId"], a["state"], a.get("error")) for a in wf["actions"] if a["state"] != "SUCCEEDED"]


async def test_a_table_is_imported_and_imported_again_at_the_next_submission_saying_why(
    system: Api, postgres: Postgres, password_file: Path
) -> None:
    body = workflow(postgres, password_file)
    first = await system.run(body, timeout=120)
    assert first["state"] == "SUCCEEDED", failures(first)
    imported, counted = first["actions"]
    assert sorted(p.name for p in Path(imported["outputPath"]).iterdir()) == ["_SUCCESS", "part-m-00000"]
    before = expected(postgres)
    assert rows(imported) == before
    assert Path(counted["outputPath"]).read_text().strip() == str(len(before))
    assert PASSWORD not in str(first)

    postgres.sql("INSERT INTO cities VALUES (4, 'Lille', 236710)")
    assert expected(postgres) == [*before, "4,Lille"]
    plan = await system.submit(body)
    assert [a["decision"] for a in plan["actions"]] == ["compute", "compute"]
    miss = plan["actions"][0]["miss"]
    assert [c["field"] for c in miss["changes"]] == ["importedAt"] and "importedAt changed" in miss["summary"]
    second = await system.wait(plan["id"], 120)
    assert second["state"] == "SUCCEEDED", failures(second)
    imported, counted = second["actions"]
    assert rows(imported) == [*before, "4,Lille"]
    assert Path(counted["outputPath"]).read_text().strip() == str(len(before) + 1)


async def test_an_import_with_a_cache_version_is_reused_trusting_the_earlier_one(
    system: Api, postgres: Postgres, password_file: Path
) -> None:
    body = workflow(postgres, password_file, cacheVersion="snapshot-1")
    first = await system.run(body, timeout=120)
    assert first["state"] == "SUCCEEDED", failures(first)
    again = await system.run(body)
    assert [a["decision"] for a in again["actions"]] == ["reuse", "reuse"]
    assert again["actions"][0]["outputPath"] == first["actions"][0]["outputPath"]


async def test_a_wrong_password_fails_the_import_with_the_databases_words(
    system: Api, postgres: Postgres, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-it")
    wf = await system.run(workflow(postgres, wrong), timeout=120)
    assert wf["state"] == "FAILED"
    assert wf["actions"][0]["state"] == "FAILED", wf["actions"][0]
    # Sqoop's log4j writes to standard output.
    assert f'password authentication failed for user "{READER}"' in await log(system, wf["actions"][0]["id"], "stdout")


async def test_a_bad_sqoop_action_is_refused_with_every_violation(system: Api, postgres: Postgres) -> None:
    body = {"name": "bad", "actions": [
        {"id": 1, "name": "import", "type": "SQOOP", "connect": f"{postgres.jdbc_url}?password=hunter2",
         "query": "SELECT id FROM cities", "columnNames": ["id"], "mappers": 2, "passwordFile": "db.password",
         "command": ["sqoop"]},
    ]}  # fmt: skip
    answer = await system.submit(body, expect=422)
    assert sorted((v["loc"], v["field"]) for v in answer["violations"]) == [
        ("actions[0].columnNames", "columnNames"),
        ("actions[0].command", "command"),
        ("actions[0].connect", "connect"),
        ("actions[0].passwordFile", "passwordFile"),
        ("actions[0].query", "query"),
        ("actions[0].splitBy", "splitBy"),
        ("actions[0].username", "username"),
    ]
    assert "hunter2" not in str(answer)
    assert await system.counts() == {"workflows": 0, "actions": 0, "datasets": 0}


async def test_a_table_is_imported_by_oozies_sqoop_action_on_the_emulator_and_reimported_next_time(
    hadoop: Hadoop, postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The emulator's stand-in for Oozie's sqoop share lib; the password file is on HDFS.
    monkeypatch.setenv("SQOOP_CLASSPATH", sqoop_classpath())
    secret = hadoop.hdfs_path("/pingo/secrets/db.password")
    secret.parent.mkdir(parents=True)
    secret.write_text(PASSWORD)
    body = workflow(postgres, Path("/pingo/secrets/db.password"))
    body["actions"] = body["actions"][:1]
    first = await hadoop.run(body, timeout=120)
    assert first["state"] == "SUCCEEDED", failures(first)
    out = hadoop.hdfs_path(first["actions"][0]["outputPath"])
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "part-m-00000"]
    assert (out / "part-m-00000").read_text().splitlines() == expected(postgres)
    xmls = [(app / "workflow.xml").read_text() for app in hadoop.hdfs_path("/pingo/oozie-apps").iterdir()]
    assert ['xmlns="uri:oozie:sqoop-action:0.4"' in x for x in xmls] == [True]
    # As Apache Oozie 5.2.1 names it: by its launcher, Sqoop's MapReduce job its child.
    oozie = Oozie(hadoop.settings.oozie_url, hadoop.settings.hdfs_user)
    try:
        info = await oozie.info(first["actions"][0]["jobId"])
    finally:
        await oozie.close()
    node = next(n for n in info["actions"] if n["type"] == "sqoop")
    assert node["externalId"].startswith("application_"), node
    assert node["externalChildIDs"].startswith("job_"), node
    again = await hadoop.run(body, timeout=120)
    assert again["state"] == "SUCCEEDED" and again["actions"][0]["decision"] == "compute"


def test_pingo_sqoop_classpath_prints_sqoops_jars_ahead_of_hadoops(capsys: pytest.CaptureFixture[str]) -> None:
    assert sqoop_main([]) == 0
    jars = [Path(j).name for j in capsys.readouterr().out.strip().split(":")]
    assert "sqoop-1.4.7-hadoop260.jar" in jars and any(j.startswith("postgresql-") for j in jars)
    # Sqoop's commons-cli first: Hadoop's newer one lacks a method Sqoop calls (sqoop/pom.xml).
    clis = [j for j in jars if j.startswith("commons-cli-")]
    assert clis[0] == "commons-cli-1.4.jar" and len(clis) == 2
