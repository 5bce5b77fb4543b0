"""MAP_REDUCE and SPARK actions on the Hadoop path: the ``workflow.xml`` the Oozie executor
writes for each action type is valid against Oozie's own schemas (vendored in
tests/data/oozie), and the examples' word counts run end to end through the five services
on the emulator, which runs streaming jobs with Hadoop streaming's semantics and Spark
applications with ``spark-submit`` (docs/emulator.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from hadoop_emulator import start_emulator
from shared.executors.base import JobRequest
from shared.executors.oozie import OozieExecutor
from shared.hadoop.oozie import Oozie
from shared.hadoop.webhdfs import WebHdfs
from shared.workflow_spec import ActionType
from tests.support.java_mapreduce import build_wordcount
from tests.support.spark import spark
from tests.system import test_hadoop_system
from tests.system.test_action_types import EXAMPLES, corpus_words, failures
from tests.system.test_hadoop_system import Hadoop

hadoop = test_hadoop_system.hadoop  # the fixture: five services as processes and the emulator
SCHEMAS = Path(__file__).resolve().parents[1] / "data" / "oozie" / "all.xsd"


def request(kind: ActionType, **fields: Any) -> JobRequest:
    base: dict[str, Any] = dict(
        action_id="wf.2", external_id=f"ext-{kind.value}", type=kind, name=f"a {kind.value.lower()}",
        action_folder="/pingo/actions/app", main_class=None, command=None,
        arguments=["/pingo/datasets/in-1", "/pingo/datasets/in-2", "/pingo/.pingo-attempts/out"],
        configuration={"mapreduce.job.reduces": "2"}, notify_url="http://callback/x?secret=s",
    )  # fmt: skip
    return JobRequest(**{**base, **fields})


CASES = {
    "streaming": request(ActionType.MAP_REDUCE, mapper=["python3", "mapper.py"], reducer=["python3", "red uce.py"]),
    "streaming, map only": request(ActionType.MAP_REDUCE, mapper=["cat"], configuration={"mapred.reduce.tasks": "0"}),
    "java map-reduce": request(
        ActionType.MAP_REDUCE,
        mapper="org.example.WordMapper",
        reducer="org.example.SumReducer",
        input_format="org.apache.hadoop.mapred.TextInputFormat",
    ),
    "java map-reduce, new api": request(
        ActionType.MAP_REDUCE,
        mapper="org.example.WordMapper",
        reducer="org.example.SumReducer",
        mapreduce_api="mapreduce",
    ),
    "pyspark": request(
        ActionType.SPARK,
        application="count.py",
        spark_opts=["--executor-memory", "1g"],
        configuration={"spark.ui.enabled": "false"},
    ),
    "spark jar": request(ActionType.SPARK, application="app.jar", main_class="org.example.Main", configuration={}),
    "shell": request(ActionType.SHELL, command=["python3", "job.py"]),
    "java": request(ActionType.COMMAND_LINE, main_class="org.example.Main"),
    "sqoop": request(
        ActionType.SQOOP,
        arguments=["/pingo/.pingo-attempts/out"],
        sqoop={
            "connect": "jdbc:postgresql://db/shop",
            "query": "SELECT id, note FROM t WHERE $CONDITIONS",
            "splitBy": "id",
            "mappers": 2,
            "username": "reader",
            "passwordFile": "/secrets/shop",
        },
    ),
}


@pytest.fixture
async def executor(tmp_path: Path):
    emu = await start_emulator(tmp_path / "hdfs")
    app = emu.root / "pingo" / "actions" / "app"
    app.mkdir(parents=True)
    for name in ("mapper.py", "red uce.py", "count.py", "app.jar"):
        (app / name).write_text("")
    oozie, hdfs = Oozie(emu.oozie_url, "pingo"), WebHdfs(emu.namenode_url, "pingo")
    yield OozieExecutor(oozie, hdfs, emu.hdfs_uri, "localhost:8032", "default", "/pingo/apps")
    await oozie.close()
    await hdfs.close()
    await emu.stop()


@pytest.mark.parametrize("case", list(CASES))
async def test_each_action_types_workflow_xml_is_valid_against_oozies_schemas(executor, case) -> None:
    schema = etree.XMLSchema(etree.parse(str(SCHEMAS)))
    xml = await executor.workflow_xml(CASES[case])
    doc = etree.fromstring(xml)
    assert schema.validate(doc), f"{case}: {schema.error_log}\n{xml.decode()}"
    body = doc.find("{uri:oozie:workflow:0.5}action")[0]
    ns = {"w": "uri:oozie:workflow:0.5", "s": "uri:oozie:spark-action:0.2"}
    conf = {p.findtext("w:name", namespaces=ns): p.findtext("w:value", namespaces=ns) for p in body.iter("{*}property")}
    if case.startswith("streaming"):
        # Inputs and output are job properties; the commands are lines streaming splits back.
        assert conf["mapred.input.dir"] == "/pingo/datasets/in-1,/pingo/datasets/in-2"
        assert conf["mapred.output.dir"] == "/pingo/.pingo-attempts/out"
        assert body.findtext("w:streaming/w:mapper", namespaces=ns) in ("python3 mapper.py", "cat")
        if case == "streaming":
            assert body.findtext("w:streaming/w:reducer", namespaces=ns) == "python3 'red uce.py'"
    if case == "java map-reduce":
        assert conf["mapred.mapper.class"] == "org.example.WordMapper"
        assert body.find("w:streaming", namespaces=ns) is None
    if case == "java map-reduce, new api":
        # What Oozie's MapReduceMain hands to Hadoop's JobClient, which runs the old API unless told.
        assert conf["mapred.mapper.new-api"] == conf["mapred.reducer.new-api"] == "true"
        assert conf["mapreduce.job.map.class"] == "org.example.WordMapper"
        assert conf["mapreduce.job.reduce.class"] == "org.example.SumReducer"
        assert "mapred.mapper.class" not in conf and "mapred.reducer.class" not in conf
    if case == "pyspark":
        assert body.findtext("s:jar", namespaces=ns).endswith("/pingo/actions/app/count.py")
        assert body.findtext("s:spark-opts", namespaces=ns) == "--conf spark.ui.enabled=false --executor-memory 1g"
        assert [a.text for a in body.findall("s:arg", namespaces=ns)] == CASES[case].arguments
        assert "count.py" not in [f.text.rsplit("#", 1)[1] for f in body.findall("s:file", namespaces=ns)]
    if case == "sqoop":
        # One <arg> each: the query keeps its spaces; properties are the job's configuration.
        sq = {"q": "uri:oozie:sqoop-action:0.4"}
        args = [a.text for a in body.findall("q:arg", namespaces=sq)]
        assert args[:3] == ["import", "--connect", "jdbc:postgresql://db/shop"]
        assert args[args.index("--query") + 1] == "SELECT id, note FROM t WHERE $CONDITIONS"
        assert args[-2:] == ["--target-dir", "/pingo/.pingo-attempts/out"]
        props = [(p.findtext("q:name", namespaces=sq), p.findtext("q:value", namespaces=sq)) for p in body.iter()]
        assert ("mapreduce.job.reduces", "2") in props


def on_cluster(body: dict[str, Any], folders: dict[str, str]) -> dict[str, Any]:
    """An example workflow with its action folders as the emulator's (under /pingo/actions)."""
    for action in body["actions"]:
        action["actionFolder"] = folders[action["actionFolder"]]
    return body


def install(hadoop: Hadoop, *folders: str) -> dict[str, str]:
    out = {}
    for folder in folders:
        name = folder.replace("/", "-")
        shutil.copytree(EXAMPLES / folder, hadoop.emulator.root / "pingo" / "actions" / name)
        out[f"examples/{folder}"] = name
    return out


async def test_a_streaming_word_count_runs_on_the_cluster_and_is_reused(hadoop: Hadoop) -> None:
    body = on_cluster(json.loads((EXAMPLES / "wordcount.json").read_text()), install(hadoop, "wordcount"))
    wf = await hadoop.run(body)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    out = hadoop.hdfs_path(wf["actions"][1]["outputPath"])
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "part-00000", "part-00001"]
    lines = [line for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    assert {w: int(n) for w, n in (line.split("\t") for line in lines)} == dict(corpus_words())
    # The Oozie job was a <map-reduce> action with <streaming>.
    apps = hadoop.emulator.root / "pingo" / "oozie-apps"
    xmls = [(app / "workflow.xml").read_text() for app in apps.iterdir()]
    assert sum("<streaming>" in x for x in xmls) == 1
    again = await hadoop.run(body)
    assert {a["decision"] for a in again["actions"]} == {"reuse"}


@spark
async def test_a_java_map_reduce_job_runs_on_the_cluster_with_its_jars_from_the_libpath(hadoop: Hadoop) -> None:
    folders = install(hadoop, "wordcount")
    jars = hadoop.emulator.root / "pingo" / "actions" / "wordcount-java"
    jars.mkdir()
    build_wordcount(jars)
    body = json.loads((EXAMPLES / "wordcount-java" / "wordcount-java.json").read_text())
    body = on_cluster(body, {**folders, "examples/wordcount-java": "wordcount-java"})
    wf = await hadoop.run(body, timeout=300)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    out = hadoop.hdfs_path(wf["actions"][1]["outputPath"])
    lines = [line for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    assert {w: int(n) for w, n in (line.split("\t") for line in lines)} == dict(corpus_words())
    assert (out / "_SUCCESS").is_file()  # Hadoop's FileOutputCommitter wrote it into the namespace


@spark
async def test_a_java_map_reduce_job_of_the_new_api_runs_on_the_cluster_and_is_reused(hadoop: Hadoop) -> None:
    folders = install(hadoop, "wordcount")
    jars = hadoop.emulator.root / "pingo" / "actions" / "wordcount-java"
    jars.mkdir()
    build_wordcount(jars)
    body = json.loads((EXAMPLES / "wordcount-java" / "wordcount-mapreduce-api.json").read_text())
    body = on_cluster(body, {**folders, "examples/wordcount-java": "wordcount-java"})
    wf = await hadoop.run(body, timeout=300)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    out = hadoop.hdfs_path(wf["actions"][1]["outputPath"])
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "part-r-00000", "part-r-00001"]  # the new API's names
    lines = [line for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    assert {w: int(n) for w, n in (line.split("\t") for line in lines)} == dict(corpus_words())
    again = await hadoop.run(body, timeout=300)
    assert {a["decision"] for a in again["actions"]} == {"reuse"}


@spark
async def test_a_pyspark_workflow_runs_on_the_cluster_and_is_reused(hadoop: Hadoop) -> None:
    folders = install(hadoop, "wordcount", "spark/count", "spark/top")
    body = on_cluster(json.loads((EXAMPLES / "spark" / "words.json").read_text()), folders)
    wf = await hadoop.run(body, timeout=300)
    assert wf["state"] == "SUCCEEDED", failures(wf)
    out = hadoop.hdfs_path(wf["actions"][2]["outputPath"])
    top = [line.split("\t") for p in sorted(out.glob("part-*")) for line in p.read_text().splitlines()]
    expected = sorted(corpus_words().items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert [(w, int(n)) for w, n in top] == expected
    again = await hadoop.run(body, timeout=300)
    assert {a["decision"] for a in again["actions"]} == {"reuse"}
