#!/usr/bin/env python3
"""An action that always fails: ``fail.py MESSAGE ... OUTPUT_DIR`` exits 1 after printing MESSAGE."""

import sys

print(f"fail.py: {sys.argv[1] if len(sys.argv) > 1 else 'failing on purpose'}", file=sys.stderr)
sys.exit(1)
