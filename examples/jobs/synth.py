#!/usr/bin/env python3
"""A synthetic action: ``synth.py LABEL SECONDS SIZE_KB [INPUT_DIR ...] OUTPUT_DIR``.

Follows Pingo's argument contract (additionalInput values, then the parents' outputs
by parent id, then its own output path last). It reads every input, sleeps SECONDS,
and writes OUTPUT_DIR/part-00000 (SIZE_KB kilobytes, deterministic) plus OUTPUT_DIR/_lineage
naming what it read. If PINGO_EXEC_LOG is set, it appends one line per execution there.
"""

import hashlib
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    label, seconds, size_kb = argv[0], float(argv[1]), int(float(argv[2]))
    inputs, output = argv[3:-1], Path(argv[-1])
    digest = hashlib.sha256(label.encode())
    for d in inputs:
        part = Path(d, "part-00000")
        if not part.is_file():
            print(f"synth: input {d} has no part-00000", file=sys.stderr)
            return 3
        digest.update(part.read_bytes()[:4096])
    time.sleep(seconds)
    output.mkdir(parents=True)  # Hadoop convention: the action creates its output directory
    block = digest.hexdigest().encode()
    with open(output / "part-00000", "wb") as f:
        for _ in range(size_kb * 1024 // len(block) + 1):
            f.write(block)
        f.truncate(size_kb * 1024)
    (output / "_lineage").write_text(f"{label}\n" + "".join(f"{i}\n" for i in inputs))
    if log := os.environ.get("PINGO_EXEC_LOG"):
        with open(log, "a") as f:
            f.write(f"{os.environ.get('PINGO_ACTION_ID', '?')} {label}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
