#!/usr/bin/env python3
"""``env_dump.py [INPUT ...] OUTPUT_DIR``: writes the environment it was started with to
OUTPUT_DIR/env.json (and a part-00000), so that a test sees what a job sees."""

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    output = Path(argv[-1])
    output.mkdir(parents=True)
    (output / "env.json").write_text(json.dumps(dict(os.environ), sort_keys=True))
    (output / "part-00000").write_text("env\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
