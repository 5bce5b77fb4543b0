"""Hadoop streaming's semantics on local files: the emulator's MapReduce engine, and the
program the local executor runs for a streaming MAP_REDUCE action (docs/emulator.md,
"MapReduce streaming"). Run as ``python -m hadoop_emulator.streaming``.

What it keeps of Hadoop streaming (``hadoop-streaming.jar`` with the old ``mapred`` API):

- input: each ``--input`` is a file or a folder whose files (not sub-folders; names
  starting with ``_`` or ``.`` are hidden, as FileInputFormat's filter has it) are read;
  each file is one map task. A missing input fails the job: "Input path does not exist".
- output: must not exist ("Output directory ... already exists"); ``part-NNNNN`` files,
  then an empty ``_SUCCESS`` once every task succeeded.
- a task is its command (an argv: never a shell) started in the task's working folder,
  where the shipped files are, with the job configuration in its environment, every
  character of a name that is not a letter or digit turned into ``_``
  (``mapreduce.job.reduces`` -> ``mapreduce_job_reduces``). A relative program is looked
  up in that folder first, then in ``PATH``. The mapper reads the input's lines on its
  standard input (TextInputFormat: the values only, not the offsets).
- records: each output line splits at its first tab into key and value; a line without a
  tab is all key, with an empty value (written back as ``key\\t``).
- shuffle: records go to reducer ``(hash(key) & 0x7fffffff) % reduces``, Java's
  ``Text.hashCode``, and each reducer reads its records sorted by the key's bytes (a
  stable sort: equal keys keep their map order), as ``key\\tvalue`` lines. With no reducer
  the records are written sorted (IdentityReducer); with 0 reduces (``mapreduce.job.reduces``
  or ``mapred.reduce.tasks``) each map task writes its part file as is.
- a task that exits non-zero fails the job ("PipeMapRed.waitOutputThreads(): subprocess
  failed with code N"), unless ``stream.non.zero.exit.is.failure`` is ``false``.

Not kept: splits within a file, combiners, partitioner and comparator classes, record
readers, other input and output formats, counters.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

HIDDEN = ("_", ".")
TAB = b"\t"


def split_args(command: str) -> list[str]:
    """A streaming command line as Hadoop streaming splits it (PipeMapRed.splitArgs): at
    spaces outside quotes; a single or double quote opens and closes a token and is not
    part of it. No escapes, no shell."""
    out: list[str] = []
    quote: str | None = None
    start = 0
    for i, ch in enumerate([*command, None]):
        boundary = ch is None
        if ch in ("'", '"'):
            if quote is None:
                quote, boundary = ch, True
            elif quote == ch:
                quote, boundary = None, True
        elif ch == " " and quote is None:
            boundary = True
        if boundary:
            if i > start:
                out.append(command[start:i])
            start = i + 1
    return out


def text_hash(key: bytes) -> int:
    """Java's ``Text.hashCode``: 31 * h + b over the signed bytes, from 1, in 32 bits."""
    h = 1
    for b in key:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h


def partition(key: bytes, reduces: int) -> int:
    """HashPartitioner: ``(key.hashCode() & Integer.MAX_VALUE) % reduces``."""
    return (text_hash(key) & 0x7FFFFFFF) % reduces


def record(line: bytes) -> tuple[bytes, bytes]:
    key, _, value = line.rstrip(b"\n").removesuffix(b"\r").partition(TAB)
    return key, value


def env_name(name: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name)


class JobFailed(Exception):
    pass


class Job:
    def __init__(
        self,
        mapper: list[str],
        reducer: list[str] | None,
        inputs: list[Path],
        output: Path,
        reduces: int,
        conf: dict[str, str],
        workdir: Path,
    ) -> None:
        self.mapper, self.reducer = mapper, reducer
        self.inputs, self.output, self.reduces = inputs, output, reduces
        self.conf, self.workdir = conf, workdir
        self.fail_on_exit = conf.get("stream.non.zero.exit.is.failure", "true").lower() != "false"

    def splits(self) -> list[Path]:
        files: list[Path] = []
        for path in self.inputs:
            if not path.exists():
                raise JobFailed(f"Input path does not exist: {path}")
            if path.is_file():
                files.append(path)
                continue
            for child in sorted(path.iterdir()):
                if child.name.startswith(HIDDEN):
                    continue
                if child.is_dir():
                    raise JobFailed(f"Not a file: {child}")
                files.append(child)
        return files

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        env.update({env_name(k): v for k, v in {**self.conf, **extra}.items()})
        env.setdefault("TMPDIR", tempfile.gettempdir())
        return env

    def _program(self, argv: list[str]) -> list[str]:
        prog = argv[0]
        if os.path.isabs(prog):
            return argv
        local = self.workdir / prog
        if local.is_file():
            local.chmod(local.stat().st_mode | 0o111)
            return [str(local), *argv[1:]]
        found = shutil.which(prog)
        if found is None:
            raise JobFailed(f'Cannot run program "{prog}": error=2, No such file or directory')
        return [found, *argv[1:]]

    def _task(self, name: str, argv: list[str], stdin: Path, stdout: Path, extra: dict[str, str]) -> None:
        print(f"{name}: {' '.join(argv)} < {stdin.name}", file=sys.stderr, flush=True)
        with open(stdin, "rb") as src, open(stdout, "wb") as dst:
            try:
                proc = subprocess.run(  # an argv list, never a shell
                    self._program(argv), stdin=src, stdout=dst, cwd=self.workdir, env=self._env(extra), check=False
                )
            except OSError as exc:
                raise JobFailed(f'Cannot run program "{argv[0]}": {exc}') from None
        if proc.returncode != 0 and self.fail_on_exit:
            raise JobFailed(f"{name}: PipeMapRed.waitOutputThreads(): subprocess failed with code {proc.returncode}")

    def run(self) -> None:
        if self.output.exists():
            raise JobFailed(f"Output directory {self.output} already exists")
        splits = self.splits()
        with tempfile.TemporaryDirectory(prefix="streaming-") as tmp:
            scratch = Path(tmp)
            maps = []
            for i, split in enumerate(splits):
                out = scratch / f"map-{i:05d}"
                extra = {"mapreduce.map.input.file": str(split), "map.input.file": str(split)}
                self._task(f"attempt_m_{i:06d}", self.mapper, split, out, extra)
                maps.append(out)
            self.output.mkdir(parents=True)
            if self.reduces == 0:
                for i, out in enumerate(maps):
                    self._write(self.output / f"part-{i:05d}", (record(line) for line in _lines(out)))
            else:
                self._reduce(maps, scratch)
        (self.output / "_SUCCESS").touch()

    def _reduce(self, maps: list[Path], scratch: Path) -> None:
        buckets: list[list[tuple[bytes, bytes]]] = [[] for _ in range(self.reduces)]
        for out in maps:
            for line in _lines(out):
                key, value = record(line)
                buckets[partition(key, self.reduces)].append((key, value))
        for r, bucket in enumerate(buckets):
            bucket.sort(key=lambda kv: kv[0])
            part = self.output / f"part-{r:05d}"
            if self.reducer is None:
                self._write(part, iter(bucket))
                continue
            sorted_in, reduced = scratch / f"reduce-in-{r:05d}", scratch / f"reduce-out-{r:05d}"
            self._write(sorted_in, iter(bucket))
            self._task(f"attempt_r_{r:06d}", self.reducer, sorted_in, reduced, {})
            self._write(part, (record(line) for line in _lines(reduced)))

    @staticmethod
    def _write(path: Path, records: Iterable[tuple[bytes, bytes]]) -> None:
        with open(path, "wb") as f:
            for key, value in records:
                f.write(key + TAB + value + b"\n")


def _lines(path: Path) -> list[bytes]:
    with open(path, "rb") as f:
        return f.readlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hadoop_emulator.streaming", description=__doc__.split("\n")[0])
    parser.add_argument("--mapper", required=True, help="the mapper's argv, as a JSON list")
    parser.add_argument("--reducer", help="the reducer's argv, as a JSON list (none: IdentityReducer)")
    parser.add_argument("--input", action="append", required=True, type=Path)
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a job property")
    parser.add_argument("--workdir", type=Path, help="the tasks' working folder (default: a new one)")
    parser.add_argument("--files", type=Path, help="a folder whose files are shipped into the working folder")
    args = parser.parse_args(argv)
    conf = dict(c.partition("=")[::2] for c in args.conf)
    reduces = conf.get("mapreduce.job.reduces", conf.get("mapred.reduce.tasks", "1"))
    # A kill (SIGTERM to the job's process group) ends the task and then this process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="streaming-task-") as own:
        workdir = args.workdir or Path(own)
        if args.files is not None:
            for f in sorted(args.files.iterdir()):
                if f.is_file():
                    shutil.copy2(f, workdir / f.name)
        try:
            job = Job(
                json.loads(args.mapper),
                json.loads(args.reducer) if args.reducer else None,
                [p.absolute() for p in args.input],
                args.output.absolute(),
                int(reduces),
                conf,
                workdir,
            )
            job.run()
        except (JobFailed, ValueError) as exc:
            print(f"ERROR streaming.StreamJob: {exc}", file=sys.stderr)
            print("Streaming Command Failed!", file=sys.stderr)
            return 1
    print(f"INFO streaming.StreamJob: Output directory: {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
