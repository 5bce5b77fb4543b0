"""Apache Sqoop's ``import`` with Hadoop's LocalJobRunner, its output then left as HDFS
would hold it: the emulator runs it for a ``<sqoop>`` action, Pingo's local executor for a
SQOOP action (docs/planning.md, "SQOOP actions").

Run as ``python sqoop.py OUTPUT -- JAVA ARG...``: it runs the Sqoop JVM's argv (never a
shell) and, once the import succeeded, removes the ``.<name>.crc`` side files Hadoop's
local file system wrote beside the output in ``OUTPUT`` (a local folder). HDFS keeps
checksums in its blocks, so a real cluster's output has none (docs/hadoop-protocol.md,
"Emulator and real cluster"). Its exit code is the JVM's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def argv(output: str, jvm: list[str]) -> list[str]:
    """The command that runs ``jvm`` (Sqoop's) and then tidies ``output``."""
    return [sys.executable, str(Path(__file__).resolve()), output, "--", *jvm]


def drop_checksum_files(folder: Path) -> None:
    for crc in folder.rglob(".*.crc"):
        if crc.is_file() and crc.with_name(crc.name[1:-4]).exists():
            crc.unlink()


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: sqoop.py OUTPUT -- JAVA ARG...", file=sys.stderr)
        return 2
    output, _, *jvm = args
    # Killed with its process group (the runner's and the emulator's kill), like the JVM.
    code = subprocess.run(jvm, check=False).returncode
    if code == 0:
        drop_checksum_files(Path(output))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
