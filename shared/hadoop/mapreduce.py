"""A MAP_REDUCE job's Hadoop properties (docs/hadoop-protocol.md, "The workflow
application"): the same for Oozie's ``<map-reduce>`` and for the local executor's Java
jobs on Hadoop's LocalJobRunner."""

from __future__ import annotations

from shared.executors.base import JobRequest
from shared.workflow_spec import is_streaming


def job_properties(job: JobRequest) -> dict[str, str]:
    """Inputs and output (a map-reduce job takes no arguments: every argument but the last
    is an input, the last is the output), a Java job's classes, the formats, then the
    action's own configurationParameters."""
    *inputs, output = job.arguments
    props = {"mapred.input.dir": ",".join(inputs), "mapred.output.dir": output}
    if not is_streaming(job.mapper):
        props["mapred.mapper.class"] = str(job.mapper)
        if job.reducer is not None:
            props["mapred.reducer.class"] = str(job.reducer)
    if job.input_format:
        props["mapred.input.format.class"] = job.input_format
    if job.output_format:
        props["mapred.output.format.class"] = job.output_format
    return {**props, **job.configuration}
