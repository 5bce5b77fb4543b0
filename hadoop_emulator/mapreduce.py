"""Java MapReduce jobs run by Hadoop itself: the ``LocalJobRunner`` of the Hadoop client
jars that Spark's Python distribution bundles (``pingo[spark]``; docs/emulator.md,
"Java MapReduce"). The emulator runs it for a ``<map-reduce>`` action without
``<streaming>``, and Pingo's local executor for a MAP_REDUCE action with Java classes.

A PySpark program, run by ``spark-submit`` with the job's jars on the driver's class path
(:func:`argv`): it builds a ``JobConf`` from the ``--conf`` properties (the job's classes,
``mapred.input.dir``, ``mapred.output.dir``, ...), runs it with ``JobClient.runJob`` in
Spark's JVM, and exits 1 with Hadoop's error when the job fails.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# Spark's own chatter stays out of the job's log; Hadoop's job log (INFO) stays in.
QUIET = ("--conf", "spark.ui.enabled=false", "--conf", "spark.log.level=WARN")


def argv(spark_submit: str, classpath: list[str], conf: dict[str, str]) -> list[str]:
    """The command that runs a Java MapReduce job of ``conf``, its classes from ``classpath``."""
    out = [spark_submit, "--master", "local[1]", *QUIET]
    if classpath:
        out += ["--driver-class-path", os.pathsep.join(classpath)]
    out.append(str(Path(__file__).resolve()))
    for k, v in conf.items():
        out += ["--conf", f"{k}={v}"]
    return out


def drop_checksum_files(jvm: Any, job: Any) -> None:
    """HDFS keeps a file's checksums in its blocks; Hadoop's local file system writes them
    beside it, ``.<name>.crc``, and the job's output on a real cluster has no such file
    (docs/hadoop-protocol.md, "Emulator and real cluster"). Removed once the job succeeded."""
    out = jvm.org.apache.hadoop.mapred.FileOutputFormat.getOutputPath(job)
    if out is None:
        return
    real = out.getFileSystem(job).resolvePath(out).toUri()  # through the emulator's view file system
    if real.getScheme() != "file":
        return
    for crc in Path(real.getPath()).rglob(".*.crc"):
        if crc.is_file() and crc.with_name(crc.name[1:-4]).exists():
            crc.unlink()


def main(args: list[str]) -> int:
    conf: dict[str, str] = {}
    for flag, value in zip(args[::2], args[1::2], strict=False):
        if flag != "--conf" or "=" not in value:
            print(f"usage: mapreduce.py --conf KEY=VALUE ...; not {flag} {value}", file=sys.stderr)
            return 2
        key, _, val = value.partition("=")
        conf[key] = val
    from pyspark.sql import SparkSession  # a program of pingo[spark]: only here

    spark = SparkSession.builder.getOrCreate()
    jvm = spark._jvm  # type: ignore[attr-defined]
    job = jvm.org.apache.hadoop.mapred.JobConf()
    for k, v in conf.items():
        job.set(k, v)
    job.set("mapreduce.framework.name", "local")
    try:
        jvm.org.apache.hadoop.mapred.JobClient.runJob(job)
        drop_checksum_files(jvm, job)
    except Exception as exc:  # py4j's Py4JJavaError: the Java exception, as Java prints it
        cause = getattr(exc, "java_exception", None)
        print(f"ERROR mapreduce: {cause.toString() if cause is not None else exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
