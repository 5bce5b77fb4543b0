"""Local TCP ports."""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Ports the kernel hands out for binding port 0 come from the ephemeral range, the same
# range it takes source ports of outgoing connections from: a port found free that way
# can be taken by a client connection (to the broker, the store, the emulator) before the
# service binds it, and two calls can return the same port. Below the range only
# listeners compete, and a port is never handed out twice in one run.
_given: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    low = 20000
    high = max(low + 1000, _ephemeral_low())
    for _ in range(1000):
        port = random.randrange(low, high)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high}")


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
