"""SQOOP actions (docs/planning.md, "SQOOP actions"): their fields and violations, their
lineage hash, the ``sqoop import`` argv the executors run, and examples/sqoop."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.workflow_manager.submission import with_import_times
from shared.executors.base import JobRequest
from shared.executors.local import sqoop_argv
from shared.hadoop.sqoop import MAIN_CLASS, import_arguments, sqoop_fields
from shared.hashing import workflow_hashes
from shared.workflow_spec import WorkflowSpec, parse_workflow
from tests.support.workflows import ROOT

URL = "jdbc:postgresql://db.example:5432/shop"
EXAMPLES = ROOT / "examples" / "sqoop"


def sqoop(**fields: Any) -> dict[str, Any]:
    return {"name": "imports", "actions": [{"id": 1, "name": "orders", "type": "SQOOP", "connect": URL, **fields}]}


def parsed(body: dict[str, Any]) -> WorkflowSpec:
    spec, violations = parse_workflow(body)
    assert spec is not None, violations
    return spec


def violations(body: dict[str, Any]) -> dict[str, str]:
    spec, found = parse_workflow(body)
    assert spec is None
    return {v.loc.removeprefix("actions[0]."): v.message for v in found}


def test_a_table_or_a_query_import_with_its_options_is_accepted() -> None:
    parsed(sqoop(table="orders", columnNames=["id", "total"], where="total > 0", mappers=4, splitBy="id",
                 username="reader", passwordFile="/etc/pingo/shop.password"))  # fmt: skip
    parsed(sqoop(query="SELECT id FROM orders WHERE $CONDITIONS", configurationParameters={"mapreduce.x": "1"}))


def test_every_violation_of_a_sqoop_action_is_listed_at_once() -> None:
    found = violations(sqoop(connect="postgresql://db/shop", query="SELECT id FROM orders", columnNames=["id"],
                             mappers=3, passwordFile="pw", actionFolder="jobs", sparkOpts=["-v"]))  # fmt: skip
    assert set(found) == {"connect", "query", "columnNames", "splitBy", "passwordFile", "username", "actionFolder",
                          "sparkOpts"}  # fmt: skip
    assert "JDBC URL" in found["connect"] and "$CONDITIONS" in found["query"] and "splitBy" in found["splitBy"]
    assert "SQOOP" in violations({"name": "w", "actions": [{"id": 1, "name": "a", "type": "SQOP"}]})["type"]


def test_neither_or_both_of_table_and_query_and_a_missing_connect_are_refused() -> None:
    both = violations(sqoop(table="orders", query="SELECT 1 WHERE $CONDITIONS"))
    assert "exactly one" in both["table"]
    neither = violations({"name": "w", "actions": [{"id": 1, "name": "a", "type": "SQOOP"}]})
    assert set(neither) == {"connect", "table"}
    assert "at least 1" in violations(sqoop(table="orders", mappers=0))["mappers"]


def test_a_password_in_the_url_is_refused_without_being_repeated() -> None:
    found = violations(sqoop(connect=f"{URL}?user=reader&password=hunter2", table="orders"))
    assert "passwordFile" in found["connect"] and "hunter2" not in found["connect"]


def test_the_hash_follows_the_definition_and_one_mapper_is_the_default() -> None:
    def hashed(**fields: Any) -> str:
        return workflow_hashes(parsed(sqoop(**fields)))[1]

    base = hashed(table="orders")
    assert hashed(table="orders", mappers=1) == base
    assert hashed(table="orders", mappers=2) != base
    assert hashed(table="orders", where="total > 0") != base
    assert hashed(table="orders", username="reader", passwordFile="/p") != base


def test_an_import_without_a_cache_version_is_a_new_lineage_at_each_submission() -> None:
    body = {**sqoop(table="orders"), "actions": [*sqoop(table="orders")["actions"],
            {"id": 2, "name": "sum", "type": "SHELL", "command": ["true"], "parentActions": [1]}]}  # fmt: skip
    spec = parsed(body)
    one = workflow_hashes(with_import_times(spec, datetime(2026, 11, 27, 10, 0, tzinfo=UTC)))
    two = workflow_hashes(with_import_times(spec, datetime(2026, 11, 27, 10, 5, tzinfo=UTC)))
    assert one[1] != two[1] and one[2] != two[2]  # the import and what reads it
    stamped = with_import_times(spec, datetime(2026, 11, 27, 10, 0, tzinfo=UTC))
    assert stamped.actions[0].definition()["importedAt"] == "2026-11-27T10:00:00.000000Z"
    assert "importedAt" not in stamped.actions[1].definition()
    pinned = parsed({**body, "cacheVersion": "snapshot-7"})
    assert workflow_hashes(with_import_times(pinned, datetime(2026, 11, 27, 10, 0, tzinfo=UTC))) == workflow_hashes(
        with_import_times(pinned, datetime(2026, 11, 28, tzinfo=UTC))
    )


def test_the_import_arguments_are_an_argv_with_no_password() -> None:
    definition = parsed(sqoop(table="orders", columnNames=["id", "total"], where="total > 0", username="reader",
                              passwordFile="/etc/shop.password")).actions[0].definition()  # fmt: skip
    fields = sqoop_fields(definition)
    assert import_arguments(fields, "/data/out") == [
        "--connect", URL, "--username", "reader", "--password-file", "/etc/shop.password", "--table", "orders",
        "--columns", "id,total", "--where", "total > 0", "--num-mappers", "1", "--target-dir", "/data/out",
    ]  # fmt: skip
    query = sqoop_fields({"connect": URL, "query": "SELECT a FROM t WHERE $CONDITIONS", "splitBy": "a", "mappers": 2})
    assert import_arguments(query, "/o")[2:] == [
        "--query", "SELECT a FROM t WHERE $CONDITIONS", "--split-by", "a", "--num-mappers", "2", "--target-dir", "/o",
    ]  # fmt: skip


def test_the_local_argv_runs_sqoop_with_hadoops_local_job_runner_and_its_record_class_in_the_job_folder() -> None:
    job = JobRequest(
        action_id="a1", external_id="a1.1", type="SQOOP", name="orders", action_folder=None, main_class=None,
        command=None, arguments=["/data/attempt"], configuration={"mapreduce.job.name": "orders"}, notify_url="x",
        sqoop={"connect": URL, "table": "orders"},
    )  # fmt: skip
    argv = sqoop_argv(job, "/jars/sqoop.jar:/jars/hadoop.jar", Path("/jobs/a1"))
    # The JVM after "--", run by a program that tidies the output once it succeeded.
    assert argv[1].endswith("hadoop_emulator/sqoop.py") and argv[2:5] == ["/data/attempt", "--", "java"]
    assert argv[argv.index("-cp") + 1] == "/jobs/a1/classes:/jars/sqoop.jar:/jars/hadoop.jar"
    tool = argv[argv.index(MAIN_CLASS) + 1 :]
    assert tool[:7] == ["import", "-D", "mapreduce.framework.name=local", "-fs", "file:///", "-D",
                        "mapreduce.job.name=orders"]  # fmt: skip
    assert tool[-6:] == ["--target-dir", "/data/attempt", "--outdir", "/jobs/a1/src", "--bindir", "/jobs/a1/classes"]


def test_the_sqoop_examples_are_valid_with_the_values_their_readme_gives() -> None:
    """examples/sqoop: both workflows valid with a password file here or on HDFS; the one
    without a cacheVersion a new lineage at each submission, the snapshot's the same one."""
    at = (datetime(2026, 11, 27, 10, 0, tzinfo=UTC), datetime(2026, 11, 27, 10, 5, tzinfo=UTC))
    for name, imports_again in (("cities.json", True), ("cities-snapshot.json", False)):
        body = json.loads((EXAMPLES / name).read_text())
        on_hdfs = {"passwordFile": "/user/pingo/geo.password", "connect": "jdbc:postgresql://db:5432/geo"}
        for values in ({"passwordFile": "/home/me/geo.password"}, on_hdfs):
            spec = parsed({**body, "parameterValues": values})
            assert [(a.type, a.parents) for a in spec.actions] == [("SQOOP", []), ("MAP_REDUCE", [1])], name
            one, two = (workflow_hashes(with_import_times(spec, t)) for t in at)
            assert (one != two) is imports_again, name
