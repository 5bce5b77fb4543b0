#!/usr/bin/env python3
"""A test action that writes known lines: ``talk.py WORD [INPUT_DIR ...] OUTPUT_DIR``.

Prints ``WORD out 1`` to stdout and ``WORD err 1`` to stderr, then, if TALK_WAIT_FOR names
a file, waits until that file exists (a test decides when the action goes on), then prints
``WORD out 2`` and ``WORD err 2`` and writes OUTPUT_DIR/part-00000. If TALK_FAIL_ONCE names
a file that does not exist yet, it creates it, prints ``WORD failing`` to both streams and
fails (exit 3): a first attempt that fails. Paths under the Hadoop emulator are HDFS paths
on its disk (PINGO_EMULATOR_HDFS_ROOT), as in examples/jobs/synth.py.
"""

import os
import sys
import time
from pathlib import Path


def local(path: str) -> Path:
    root = os.environ.get("PINGO_EMULATOR_HDFS_ROOT")
    if path.startswith("hdfs://"):
        path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
    return Path(root, path.lstrip("/")) if root and path.startswith("/") else Path(path)


def say(out: str, err: str) -> None:
    print(out, flush=True)
    print(err, file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    word, output = argv[0], local(argv[-1])
    marker = os.environ.get("TALK_FAIL_ONCE")
    if marker and not Path(marker).exists():
        Path(marker).touch()
        say(f"{word} failing", f"{word} failing")
        return 3
    say(f"{word} out 1", f"{word} err 1")
    if wait_for := os.environ.get("TALK_WAIT_FOR"):
        deadline = time.time() + 120  # never hang a test run for ever
        while not Path(wait_for).exists() and time.time() < deadline:
            time.sleep(0.05)
    say(f"{word} out 2", f"{word} err 2")
    output.mkdir(parents=True)
    (output / "part-00000").write_text(word)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
