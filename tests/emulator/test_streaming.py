"""The streaming engine (hadoop_emulator/streaming.py): Hadoop streaming's semantics, as
the emulator's map-reduce actions and the local executor's MAP_REDUCE jobs run them."""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hadoop_emulator.streaming import partition, split_args, text_hash
from tests.support.workflows import ROOT

WORDCOUNT = ROOT / "examples" / "wordcount"
WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hadoop_emulator.streaming", *args], cwd=tmp, capture_output=True, text=True, check=False
    )


def expected_counts() -> collections.Counter:
    words = collections.Counter()
    for text in WORDCOUNT.glob("*.txt"):
        words.update(WORD.findall(text.read_text().lower()))
    return words


def read_parts(out: Path) -> list[list[str]]:
    return [p.read_text().splitlines() for p in sorted(out.glob("part-*"))]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    books = tmp_path / "books"
    books.mkdir()
    for text in WORDCOUNT.glob("*.txt"):
        (books / text.name).write_text(text.read_text())
    (books / "_SUCCESS").write_text("")  # hidden: FileInputFormat skips names starting with _ or .
    (books / ".crc").write_text("not words")
    return books


def test_word_count_with_two_reducers_partitions_by_java_hash_and_sorts_each_part(tmp_path, corpus):
    proc = run(
        tmp_path, "--mapper", '["python3", "mapper.py"]', "--reducer", '["python3", "reducer.py"]',
        "--input", str(corpus), "--output", "out", "--files", str(WORDCOUNT), "--conf", "mapreduce.job.reduces=2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert (out / "_SUCCESS").is_file()
    parts = read_parts(out)
    assert len(parts) == 2
    counts = {}
    for r, lines in enumerate(parts):
        keys = [line.split("\t")[0] for line in lines]
        assert keys == sorted(keys, key=str.encode), f"part {r} is not sorted by key"
        for line in lines:
            word, n = line.split("\t")
            assert partition(word.encode(), 2) == r, f"{word} is in the wrong part"
            counts[word] = int(n)
    assert counts == dict(expected_counts())


def test_without_a_reducer_the_records_come_out_sorted_and_a_tabless_line_gets_a_tab(tmp_path, corpus):
    # "cat" emits whole lines: no tab, so each is all key with an empty value ("key\t").
    proc = run(tmp_path, "--mapper", '["cat"]', "--input", str(corpus), "--output", "out")
    assert proc.returncode == 0, proc.stderr
    [lines] = read_parts(tmp_path / "out")
    source = [line for t in sorted(WORDCOUNT.glob("*.txt")) for line in t.read_text().splitlines()]
    assert lines == [f"{line}\t" for line in sorted(source, key=str.encode)]


def test_map_only_writes_one_part_per_input_file_in_map_order(tmp_path, corpus):
    proc = run(
        tmp_path, "--mapper", '["cat"]', "--input", str(corpus), "--output", "out", "--conf", "mapred.reduce.tasks=0"
    )
    assert proc.returncode == 0, proc.stderr
    texts = sorted(WORDCOUNT.glob("*.txt"))
    assert read_parts(tmp_path / "out") == [[f"{line}\t" for line in t.read_text().splitlines()] for t in texts]


def test_the_job_configuration_reaches_tasks_as_environment_variables(tmp_path, corpus):
    script = tmp_path / "env.py"
    script.write_text("import os, sys\nsys.stdin.read()\nprint('limit\\t' + os.environ['wordcount_min_length'])\n")
    proc = run(
        tmp_path, "--mapper", json.dumps(["python3", str(script)]), "--input", str(corpus / "rivers.txt"),
        "--output", "out", "--conf", "wordcount.min-length=3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert read_parts(tmp_path / "out") == [["limit\t3"]]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mapper", '["false"]'], "subprocess failed with code 1"),
        (["--mapper", '["no-such-program-here"]'], 'Cannot run program "no-such-program-here"'),
        (["--mapper", '["cat"]', "--input", "missing"], "Input path does not exist"),
    ],
)
def test_a_failing_job_exits_non_zero_and_says_why(tmp_path, corpus, args, says):
    inputs = [] if "--input" in args else ["--input", str(corpus)]
    proc = run(tmp_path, *args, *inputs, "--output", "out")
    assert proc.returncode == 1
    assert says in proc.stderr and "Streaming Command Failed!" in proc.stderr
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_an_existing_output_directory_is_refused(tmp_path, corpus):
    (tmp_path / "out").mkdir()
    proc = run(tmp_path, "--mapper", '["cat"]', "--input", str(corpus), "--output", "out")
    assert proc.returncode == 1 and "already exists" in proc.stderr
    assert list((tmp_path / "out").iterdir()) == []


def test_text_hash_is_javas():
    # Text.hashCode: h = 31 * h + (signed byte), from 1, in 32 bits.
    assert text_hash(b"a") == 31 + 97
    assert text_hash(b"ab") == 31 * (31 + 97) + 98
    assert text_hash("é".encode()) == (31 * (31 * 1 - 61) - 87) & 0xFFFFFFFF
    assert partition(b"ab", 3) == (31 * (31 + 97) + 98) % 3


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("python3 mapper.py", ["python3", "mapper.py"]),
        ("  cut  -f 1 ", ["cut", "-f", "1"]),
        ("grep 'a b' x", ["grep", "a b", "x"]),
        ('echo "it\'s"', ["echo", "it's"]),
        ("a'b c'd", ["a", "b c", "d"]),
    ],
)
def test_command_lines_split_as_hadoop_streaming_splits_them(line, argv):
    assert split_args(line) == argv
