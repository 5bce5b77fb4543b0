"""A MAP_REDUCE job's Hadoop properties (docs/hadoop-protocol.md, "The workflow
application"): the same for Oozie's ``<map-reduce>`` and for the local executor's Java
jobs on Hadoop's LocalJobRunner."""

from __future__ import annotations

from shared.executors.base import JobRequest
from shared.workflow_spec import is_streaming

# The properties naming a job's inputs, output, classes and formats, in each Java API.
# Hadoop's JobClient (which Oozie's MapReduceMain submits with) runs the old API unless
# both new-api flags say otherwise, and refuses an old-API class property in a new-API job.
OLD_API = {
    "input": "mapred.input.dir",
    "output": "mapred.output.dir",
    "mapper": "mapred.mapper.class",
    "reducer": "mapred.reducer.class",
    "input_format": "mapred.input.format.class",
    "output_format": "mapred.output.format.class",
}
NEW_API = {
    "input": "mapreduce.input.fileinputformat.inputdir",
    "output": "mapreduce.output.fileoutputformat.outputdir",
    "mapper": "mapreduce.job.map.class",
    "reducer": "mapreduce.job.reduce.class",
    "input_format": "mapreduce.job.inputformat.class",
    "output_format": "mapreduce.job.outputformat.class",
}
NEW_API_FLAGS = {"mapred.mapper.new-api": "true", "mapred.reducer.new-api": "true"}


def job_properties(job: JobRequest) -> dict[str, str]:
    """Inputs and output (a map-reduce job takes no arguments: every argument but the last
    is an input, the last is the output), a Java job's classes, the formats, then the
    action's own configurationParameters. A streaming job and an old-API job use the old
    API's names; a new-API job (``mapreduce_api`` "mapreduce") the new ones, and the flags."""
    new = job.mapreduce_api == "mapreduce" and not is_streaming(job.mapper)
    names = NEW_API if new else OLD_API
    *inputs, output = job.arguments
    props = {names["input"]: ",".join(inputs), names["output"]: output}
    if new:
        props.update(NEW_API_FLAGS)
    if not is_streaming(job.mapper):
        props[names["mapper"]] = str(job.mapper)
        if job.reducer is not None:
            props[names["reducer"]] = str(job.reducer)
    if job.input_format:
        props[names["input_format"]] = job.input_format
    if job.output_format:
        props[names["output_format"]] = job.output_format
    return {**props, **job.configuration}
