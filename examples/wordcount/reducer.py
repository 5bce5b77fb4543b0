#!/usr/bin/env python3
"""Word count, reduce side (Hadoop streaming): its input is sorted by word, so the counts
of one word arrive together; writes ``word<TAB>count``."""

import sys

word, total = None, 0
for line in sys.stdin:
    key, _, value = line.rstrip("\n").partition("\t")
    if key != word:
        if word is not None:
            print(f"{word}\t{total}")
        word, total = key, 0
    total += int(value or 0)
if word is not None:
    print(f"{word}\t{total}")
