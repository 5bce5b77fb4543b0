"""examples/diamond.json written in Python: the same workflow, the same lineage hashes.
``pingo validate examples/python/diamond.py`` checks it, ``pingo submit
examples/python/diamond.py --wait`` runs it, ``python examples/python/diamond.py`` prints
the JSON it builds.
"""

from pingo.builder import Workflow

workflow = Workflow("diamond (thesis format)")


def synth(name: str, label: str, seconds: str, size_kb: str, parents=()):
    """One step of the diamond: examples/jobs/synth.py writing ``size_kb`` KiB after ``seconds``."""
    return workflow.shell(
        name,
        ["python3", "synth.py"],
        folder="examples/jobs",
        inputs=dict(label=label, seconds=seconds, sizeKB=size_kb),
        parents=parents,
    )


ingest = synth("ingest", "ingest", "1", "256")
clean = synth("clean", "clean", "1", "128", parents=[ingest])
stats = synth("statistics", "stats", "1", "64", parents=[ingest])
report = synth("report", "report", "0.5", "16", parents=[clean, stats])
workflow.start, workflow.end = ingest, report

if __name__ == "__main__":
    print(workflow.dumps())
