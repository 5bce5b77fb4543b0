#!/usr/bin/env python3
"""A synthetic action: ``synth.py LABEL SECONDS SIZE_KB [INPUT_DIR ...] OUTPUT_DIR``.

Follows Pingo's argument contract (additionalInput values, then the parents' outputs
by parent id, then its own output path last). It reads every input, sleeps SECONDS,
and writes OUTPUT_DIR/part-00000 (SIZE_KB kilobytes, deterministic) plus OUTPUT_DIR/_lineage
naming what it read. If PINGO_EXEC_LOG (its configuration) or SYNTH_EXEC_LOG (a variable
an operator passes to every job, PINGO_JOB_ENV_PASS) is set, it appends one line per
execution there.
If SYNTH_FAIL_ONCE names a file that does not exist yet, it creates it and fails (exit 4)
instead: a computation that fails its first attempt only. With SYNTH_FAIL_TIMES=N as well,
the file counts attempts (one line each) and the first N fail. SYNTH_FAIL=always: every attempt.
If SYNTH_WAIT_FOR names a file (a local path, also on the emulator), the job, once its
SECONDS are over, waits until that file exists before it fails or writes: a test holds
the job running for as long as its steps take, however slow the machine, then creates the
file. It waits WAIT_LIMIT seconds at most, then fails (exit 5), so that a test that never
opens its gate leaves no job behind.

On the Hadoop emulator (``pingo emulate-hadoop``) paths are HDFS paths: the emulator
tells jobs where its HDFS namespace lives on disk in PINGO_EMULATOR_HDFS_ROOT, the way a
real job would go through the Hadoop FileSystem API.
"""

import hashlib
import os
import sys
import time
from pathlib import Path


def local(path: str) -> Path:
    """An HDFS path (``/a/b`` or ``hdfs://nn:8020/a/b``) on the emulator's disk; else as given."""
    root = os.environ.get("PINGO_EMULATOR_HDFS_ROOT")
    if path.startswith("hdfs://"):
        path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
    if root and path.startswith("/"):
        return Path(root, path.lstrip("/"))
    return Path(path)


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    label, seconds, size_kb = argv[0], float(argv[1]), int(float(argv[2]))
    inputs, output = argv[3:-1], local(argv[-1])
    # What it does, on stdout, so that `pingo logs` shows the job at work (the dataset it
    # writes does not depend on it).
    print(f"synth {label}: reading {len(inputs)} input(s), then {seconds:g} s of work", flush=True)
    digest = hashlib.sha256(label.encode())
    for d in inputs:
        part = local(d) / "part-00000"
        if not part.is_file():
            print(f"synth: input {d} has no part-00000", file=sys.stderr)
            return 3
        digest.update(part.read_bytes()[:4096])
    time.sleep(seconds)
    gate = os.environ.get("SYNTH_WAIT_FOR")
    if gate and not wait_for(Path(gate)):
        print(f"synth: {label} waited {WAIT_LIMIT:g} s for {gate}, which never came", file=sys.stderr)
        return 5
    marker = os.environ.get("SYNTH_FAIL_ONCE")
    if os.environ.get("SYNTH_FAIL") == "always" or (marker and failing(Path(marker))):
        if marker:
            with open(marker, "a") as f:
                f.write("failed\n")
        log_run(f"{label} failed")
        print(f"synth: {label} fails as asked", file=sys.stderr)
        return 4
    output.mkdir(parents=True)  # Hadoop convention: the action creates its output directory
    block = digest.hexdigest().encode()
    with open(output / "part-00000", "wb") as f:
        for _ in range(size_kb * 1024 // len(block) + 1):
            f.write(block)
        f.truncate(size_kb * 1024)
    (output / "_lineage").write_text(f"{label}\n" + "".join(f"{i}\n" for i in inputs))
    log_run(label)
    print(f"synth {label}: wrote {size_kb} KB to {argv[-1]}", flush=True)
    return 0


WAIT_LIMIT = 120.0


def wait_for(gate: Path) -> bool:
    """Whether ``gate`` exists within WAIT_LIMIT seconds."""
    deadline = time.monotonic() + WAIT_LIMIT
    while not gate.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def failing(marker: Path) -> bool:
    """This attempt fails: the first one (no marker yet), or one of the first SYNTH_FAIL_TIMES."""
    times = os.environ.get("SYNTH_FAIL_TIMES")
    if times is None:
        return not marker.exists()
    done = len(marker.read_text().splitlines()) if marker.exists() else 0
    return done < int(times)


def log_run(what: str) -> None:
    if log := os.environ.get("PINGO_EXEC_LOG") or os.environ.get("SYNTH_EXEC_LOG"):
        with open(log, "a") as f:
            f.write(f"{os.environ.get('PINGO_ACTION_ID') or os.environ.get('OOZIE_JOB_ID', '?')} {what}\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
