"""PySpark word count: ``count.py INPUT_DIR... OUTPUT_DIR``. Reads every text file of the
inputs (Pingo's argument contract: the parents' outputs, then this action's output last)
and writes ``word<TAB>count`` lines, most frequent first."""

import sys

from pyspark.sql import SparkSession

*inputs, output = sys.argv[1:]
spark = SparkSession.builder.getOrCreate()
lines = spark.sparkContext.textFile(",".join(f"{path}/*.txt" for path in inputs))
counts = (
    lines.flatMap(lambda line: line.lower().replace(",", " ").replace(".", " ").replace(";", " ").split())
    .map(lambda word: (word, 1))
    .reduceByKey(lambda a, b: a + b)
    .sortBy(lambda kv: (-kv[1], kv[0]))
)
counts.map(lambda kv: f"{kv[0]}\t{kv[1]}").coalesce(1).saveAsTextFile(output)
spark.stop()
