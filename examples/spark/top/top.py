"""PySpark: the N most frequent words of a word count. ``top.py N COUNTS_DIR OUTPUT_DIR``
(an additionalInput value, the parent's output, this action's output)."""

import sys

from pyspark.sql import SparkSession

n, counts_dir, output = int(sys.argv[1]), sys.argv[2], sys.argv[3]
spark = SparkSession.builder.getOrCreate()
counts = spark.sparkContext.textFile(counts_dir).map(lambda line: line.split("\t")).map(lambda kv: (kv[0], int(kv[1])))
top = counts.takeOrdered(n, key=lambda kv: (-kv[1], kv[0]))
spark.sparkContext.parallelize([f"{w}\t{c}" for w, c in top], 1).saveAsTextFile(output)
spark.stop()
