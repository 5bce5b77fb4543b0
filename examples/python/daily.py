"""examples/parameters/daily.json written in Python: a report for one day, ``day`` a parameter.

``pingo submit examples/python/daily.py -p day=2026-11-21 --wait`` reports on that day,
computing its ingest and report and reusing the reference data of any earlier day.
"""

from pingo.builder import Workflow

workflow = Workflow("daily report {{day}}")
day = workflow.parameter("day", default="2026-11-20", description="the day to report on, YYYY-MM-DD")


def synth(name: str, label: str, seconds: str, size_kb: str, parents=()):
    return workflow.shell(
        name,
        ["python3", "synth.py"],
        folder="examples/jobs",
        inputs={"label": label, "seconds": seconds, "sizeKB": size_kb},
        parents=parents,
    )


reference = synth("reference data", "reference", "1", "64")
ingest = synth("ingest", f"ingest {day}", "1", "32")
synth("report", f"report {day}", "0.5", "8", parents=[reference, ingest])

if __name__ == "__main__":
    print(workflow.dumps())
