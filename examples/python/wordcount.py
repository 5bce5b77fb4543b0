"""examples/wordcount.json written in Python: a corpus, then a Hadoop streaming word count.
``pingo submit examples/python/wordcount.py --wait`` runs it.
"""

from pingo.builder import Workflow

workflow = Workflow("wordcount")
corpus = workflow.shell("corpus", ["python3", "corpus.py"], folder="examples/wordcount")
workflow.map_reduce(
    "count words",
    mapper=["python3", "mapper.py"],
    reducer=["python3", "reducer.py"],
    folder="examples/wordcount",
    properties={"mapreduce.job.reduces": "2"},
    parents=[corpus],
)

if __name__ == "__main__":
    print(workflow.dumps())
