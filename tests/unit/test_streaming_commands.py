"""Streaming commands on Oozie: Pingo keeps a mapper or reducer as an argv and writes the
one line Hadoop streaming splits back into it (docs/hadoop-protocol.md, "MapReduce
streaming"); the emulator splits as Hadoop streaming does."""

from __future__ import annotations

import pytest

from hadoop_emulator.streaming import split_args
from shared.hadoop.streaming import join_args


@pytest.mark.parametrize(
    "argv", [["python3", "m.py"], ["grep", "two words"], ["echo", "it's"], ["say", 'a "quote"'], ["x", "a'b"]]
)
def test_pingo_writes_lines_that_split_back_into_the_argv(argv):
    assert split_args(join_args(argv)) == argv


@pytest.mark.parametrize("argv", [["echo", ""], ["echo", 'it\'s "both" quoted']])
def test_an_argv_no_line_can_carry_is_refused(argv):
    with pytest.raises(ValueError):
        join_args(argv)
