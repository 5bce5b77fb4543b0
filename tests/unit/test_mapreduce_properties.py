"""A MAP_REDUCE job's Hadoop properties (shared/hadoop/mapreduce.py): the names of each Java
API, as Oozie's ``<map-reduce>`` and the local executor hand them to Hadoop's JobClient."""

from __future__ import annotations

from typing import Any

from shared.executors.base import JobRequest
from shared.hadoop.mapreduce import job_properties
from shared.workflow_spec import ActionType


def job(**fields: Any) -> JobRequest:
    base: dict[str, Any] = dict(
        action_id="wf.2", external_id="ext", type=ActionType.MAP_REDUCE, name="count", action_folder="/jars",
        main_class=None, command=None, arguments=["/in/a", "/in/b", "/attempts/out"],
        configuration={"mapreduce.job.reduces": "2"}, notify_url="http://callback/x",
    )  # fmt: skip
    return JobRequest(**{**base, **fields})


def test_an_old_api_job_names_its_classes_and_paths_with_the_mapred_properties() -> None:
    props = job_properties(job(mapper="org.example.M", reducer="org.example.R",
                               input_format="org.apache.hadoop.mapred.TextInputFormat"))  # fmt: skip
    assert props == {
        "mapred.input.dir": "/in/a,/in/b",
        "mapred.output.dir": "/attempts/out",
        "mapred.mapper.class": "org.example.M",
        "mapred.reducer.class": "org.example.R",
        "mapred.input.format.class": "org.apache.hadoop.mapred.TextInputFormat",
        "mapreduce.job.reduces": "2",
    }


def test_a_new_api_job_sets_both_new_api_flags_and_no_old_class_property() -> None:
    props = job_properties(job(mapper="org.example.M", reducer="org.example.R", mapreduce_api="mapreduce",
                               output_format="org.apache.hadoop.mapreduce.lib.output.TextOutputFormat"))  # fmt: skip
    assert props == {
        "mapreduce.input.fileinputformat.inputdir": "/in/a,/in/b",
        "mapreduce.output.fileoutputformat.outputdir": "/attempts/out",
        "mapred.mapper.new-api": "true",
        "mapred.reducer.new-api": "true",
        "mapreduce.job.map.class": "org.example.M",
        "mapreduce.job.reduce.class": "org.example.R",
        "mapreduce.job.outputformat.class": "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
        "mapreduce.job.reduces": "2",
    }


def test_a_streaming_job_keeps_the_old_names_whatever_api_it_is_given() -> None:
    props = job_properties(job(mapper=["cat"], mapreduce_api="mapreduce"))
    assert props == {"mapred.input.dir": "/in/a,/in/b", "mapred.output.dir": "/attempts/out",
                     "mapreduce.job.reduces": "2"}  # fmt: skip
