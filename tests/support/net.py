"""Local TCP ports."""

from __future__ import annotations

from pingo.ports import free_ports

# Never the same port twice in one run (pingo/ports.py says why they are picked as they are).
_given: set[int] = set()


def free_port() -> int:
    return free_ports(1, _given)[0]
