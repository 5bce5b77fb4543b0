"""``tail=N`` of the action logs route: the last N lines of a log read in chunks that cut
lines anywhere (shared/executors/log_tail.py)."""

from __future__ import annotations

import pytest

from shared.executors.log_tail import LineTail

LOG = b"one\ntwo\nthree\nfour"  # the last line not ended yet, as a running job leaves it


@pytest.mark.parametrize("size", [1, 2, 3, 5, 100])
@pytest.mark.parametrize(("n", "expected"), [(0, b""), (1, b"four"), (2, b"three\nfour"), (9, LOG)])
def test_the_last_lines_whatever_the_chunks(size: int, n: int, expected: bytes) -> None:
    tail = LineTail(n)
    for i in range(0, len(LOG), size):
        tail.feed(LOG[i : i + size])
    assert tail.text() == expected


def test_an_ended_last_line_and_an_empty_log() -> None:
    tail = LineTail(2)
    tail.feed(b"a\nb\nc\n")
    assert tail.text() == b"b\nc\n"
    assert LineTail(3).text() == b""
