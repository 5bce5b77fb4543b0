"""examples/fanout/regions.json written in Python: one summary per region, then a report
that gathers them all.

``pingo submit examples/python/regions.py --dry-run`` shows the six actions it becomes.
"""

from pingo.builder import ITEM, Workflow

workflow = Workflow("regions")


def synth(name: str, label: str, seconds: str, size_kb: str, **options):
    inputs = {"label": label, "seconds": seconds, "sizeKB": size_kb}
    return workflow.shell(name, ["python3", "synth.py"], folder="examples/jobs", inputs=inputs, **options)


reference = synth("reference data", "reference", "0.5", "64")
summaries = synth(
    f"summarize {ITEM}", f"summary of {ITEM}", "0.5", "16", parents=[reference],
    for_each=["north", "south", "east", "west"],
)  # fmt: skip
synth("report", "report", "0.5", "8", parents=[summaries])

if __name__ == "__main__":
    print(workflow.dumps())
