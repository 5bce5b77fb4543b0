"""The Java word counts of examples/wordcount-java (the old ``mapred`` API's and the new
``mapreduce`` API's), built into one jar for the tests that run them (Hadoop's
LocalJobRunner, from the Hadoop jars pyspark bundles: docs/emulator.md; and real YARN)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.workflows import ROOT

SOURCES = sorted((ROOT / "examples" / "wordcount-java").glob("*.java"))


def hadoop_api_jar() -> Path:
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark is not installed"
    [jar] = sorted(Path(spec.origin).parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    return jar


def build_wordcount(folder: Path) -> Path:
    """``folder/wordcount.jar`` with ``org.example.WordCount$Map`` and ``$Sum`` (old API) and
    ``org.example.WordCountNewApi$Map`` and ``$Sum`` (new API)."""
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.fail("javac and jar (a JDK) are needed to build the Java MapReduce job")
    classes = folder / "classes"
    subprocess.run(["javac", "-cp", str(hadoop_api_jar()), "-d", str(classes), *map(str, SOURCES)], check=True)
    subprocess.run(["jar", "cf", str(folder / "wordcount.jar"), "-C", str(classes), "."], check=True)
    shutil.rmtree(classes)
    return folder / "wordcount.jar"
