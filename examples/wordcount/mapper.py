#!/usr/bin/env python3
"""Word count, map side (Hadoop streaming): each word of each input line as ``word<TAB>1``.
Words are lowercased runs of letters (and inner apostrophes)."""

import re
import sys

WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")

for line in sys.stdin:
    for word in WORD.findall(line.lower()):
        print(f"{word}\t1")
