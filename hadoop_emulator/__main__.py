"""``python -m hadoop_emulator --root DIR``: the emulator on its own (``pingo emulate-hadoop`` runs the same)."""

from hadoop_emulator.cli import main

raise SystemExit(main(prog="python -m hadoop_emulator"))
