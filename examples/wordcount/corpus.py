#!/usr/bin/env python3
"""``corpus.py OUTPUT_DIR``: copies the ``*.txt`` files beside it (shipped with the action
folder) into OUTPUT_DIR, the input of the word-count examples.

On the Hadoop emulator paths are HDFS paths: it tells jobs where its namespace lives on
disk in PINGO_EMULATOR_HDFS_ROOT, as examples/jobs/synth.py explains.
"""

import os
import shutil
import sys
from pathlib import Path


def local(path: str) -> Path:
    root = os.environ.get("PINGO_EMULATOR_HDFS_ROOT")
    if path.startswith("hdfs://"):
        path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
    return Path(root, path.lstrip("/")) if root and path.startswith("/") else Path(path)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    output = local(argv[0])
    output.mkdir(parents=True)
    texts = sorted(Path.cwd().glob("*.txt"))
    for text in texts:
        shutil.copyfile(text, output / text.name)
    print(f"corpus: {len(texts)} texts into {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
