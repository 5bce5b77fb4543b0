"""MAP_REDUCE (Hadoop streaming) and SPARK actions through the local executor, as
``pingo dev`` runs them (docs/planning.md, "MAP_REDUCE actions", "SPARK actions"): the
examples' word counts, their reuse, and what a change to a Spark application recomputes."""

from __future__ import annotations

import collections
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from shared.config import Settings
from tests.support.java_mapreduce import build_wordcount
from tests.support.spark import spark
from tests.support.system import Api, make_settings
from tests.support.workflows import ROOT

EXAMPLES = ROOT / "examples"
WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


@pytest.fixture
def settings(tmp_path: Path, mongo_url: str) -> Settings:
    """Spark applications are copied to the test's folder, where it may change them."""
    return make_settings(tmp_path, mongo_url, action_roots=[ROOT, tmp_path])


async def stderr(api: Api, action_id: str) -> str:
    assert api.http is not None
    async with api.http.get(f"{api.base}/api/v1/actions/{action_id}/logs?stream=stderr") as r:
        assert r.status == 200
        return await r.text()


def example(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / name).read_text())


def corpus_words() -> collections.Counter:
    words: collections.Counter = collections.Counter()
    for text in (EXAMPLES / "wordcount").glob("*.txt"):
        words.update(WORD.findall(text.read_text().lower()))
    return words


def parts(output: str) -> list[str]:
    return [line for p in sorted(Path(output).glob("part-*")) for line in p.read_text().splitlines()]


def failures(wf: dict[str, Any]) -> list:
    return [(a["localId"], a["state"], a.get("error")) for a in wf["actions"] if a["state"] != "SUCCEEDED"]


async def test_a_streaming_word_count_runs_and_its_second_run_reuses_everything(system: Api) -> None:
    wf = await system.run(example("wordcount.json"))
    assert wf["state"] == "SUCCEEDED", failures(wf)
    count = wf["actions"][1]
    assert sorted(p.name for p in Path(count["outputPath"]).glob("part-*")) == ["part-00000", "part-00001"]
    counted = {w: int(n) for w, n in (line.split("\t") for line in parts(count["outputPath"]))}
    assert counted == dict(corpus_words())
    again = await system.run(example("wordcount.json"))
    assert again["state"] == "SUCCEEDED" and {a["decision"] for a in again["actions"]} == {"reuse"}


async def test_a_failing_mapper_fails_the_action_with_hadoop_streamings_words(system: Api) -> None:
    body = example("wordcount.json")
    body["actions"][1]["mapper"] = ["python3", "-c", "import sys; sys.exit(3)"]
    wf = await system.run(body)
    assert wf["state"] == "FAILED"
    count = wf["actions"][1]
    assert count["state"] == "FAILED" and "exit" in (count["error"] or "")
    assert "subprocess failed with code 3" in await stderr(system, count["id"])


@spark
async def test_a_java_map_reduce_job_runs_on_hadoops_local_job_runner(system: Api, tmp_path: Path) -> None:
    folder = tmp_path / "wordcount-java"
    folder.mkdir()
    build_wordcount(folder)
    body = example("wordcount-java/wordcount-java.json")
    body["actions"][1]["actionFolder"] = str(folder)
    wf = await system.run(body, timeout=300)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    count = wf["actions"][1]
    assert sorted(p.name for p in Path(count["outputPath"]).glob("part-*")) == ["part-00000", "part-00001"]
    counted = {w: int(n) for w, n in (line.split("\t") for line in parts(count["outputPath"]))}
    assert counted == dict(corpus_words())
    # The reducer's class is not in the jar: Hadoop's own error ends the action FAILED.
    body["actions"][1]["reducer"] = "org.example.WordCount$Missing"
    broken = await system.run(body, timeout=300)
    assert broken["actions"][1]["state"] == "FAILED"
    assert "ClassNotFoundException: Class org.example.WordCount$Missing not found" in broken["actions"][1]["error"]


@spark
async def test_a_java_map_reduce_job_of_the_new_api_runs_on_hadoops_local_job_runner(
    system: Api, tmp_path: Path
) -> None:
    folder = tmp_path / "wordcount-java"
    folder.mkdir()
    build_wordcount(folder)
    body = example("wordcount-java/wordcount-mapreduce-api.json")
    body["actions"][1]["actionFolder"] = str(folder)
    wf = await system.run(body, timeout=300)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    out = Path(wf["actions"][1]["outputPath"])
    # The new API's part names, and no checksum side files: what YARN writes on HDFS.
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "part-r-00000", "part-r-00001"]
    counted = {w: int(n) for w, n in (line.split("\t") for line in parts(str(out)))}
    assert counted == dict(corpus_words())


@spark
async def test_a_pyspark_workflow_runs_reuses_and_recomputes_only_below_a_changed_application(
    system: Api, tmp_path: Path
) -> None:
    # The applications are copied where the test may change them (an action root).
    apps = tmp_path / "apps"
    shutil.copytree(EXAMPLES / "spark", apps)
    body = example("spark/words.json")
    for action, folder in zip(body["actions"][1:], ("count", "top"), strict=True):
        action["actionFolder"] = str(apps / folder)

    wf = await system.run(body, timeout=300)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    expected = sorted(corpus_words().items(), key=lambda kv: (-kv[1], kv[0]))
    top = [tuple(line.split("\t")) for line in parts(wf["actions"][2]["outputPath"])]
    # Its own word splitting (spaces and . , ;) finds the same words in these texts.
    assert [(w, int(n)) for w, n in top] == expected[:5]

    again = await system.run(body, timeout=300)
    assert {a["decision"] for a in again["actions"]} == {"reuse"}

    # A changed application: its action and its descendant are computed again, the corpus reused.
    count = apps / "count" / "count.py"
    count.write_text(count.read_text() + "\n# counts the same words, written again\n")
    changed = await system.run(body, timeout=300)
    assert changed["state"] == "SUCCEEDED", failures(changed)
    assert [a["decision"] for a in changed["actions"]] == ["reuse", "compute", "compute"]
    assert changed["actions"][0]["hash"] == wf["actions"][0]["hash"]
    assert changed["actions"][1]["hash"] != wf["actions"][1]["hash"]


@spark
async def test_a_spark_application_that_raises_fails_its_action_with_the_error_kept(
    system: Api, tmp_path: Path
) -> None:
    apps = tmp_path / "apps"
    (apps / "broken").mkdir(parents=True)
    (apps / "broken" / "broken.py").write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "spark.sparkContext.parallelize([1, 2]).map(lambda x: 1 // 0).collect()\n"
    )
    body = {"name": "broken spark", "actions": [
        {"id": 1, "name": "divide", "type": "SPARK", "actionFolder": str(apps / "broken"),
         "application": "broken.py", "configurationParameters": {"spark.ui.enabled": "false"}},
    ]}  # fmt: skip
    wf = await system.run(body, timeout=300)
    assert wf["state"] == "FAILED"
    action = wf["actions"][0]
    # The error names the application's exception, not the JVM's last log lines.
    assert action["state"] == "FAILED"
    assert action["error"].startswith("exit code 1: ZeroDivisionError: integer division or modulo by zero")
    assert "ZeroDivisionError" in await stderr(system, action["id"])
