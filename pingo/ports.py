"""Free local TCP ports for servers Pingo starts on this machine (the mini cluster's, the
tests').

A port found free by binding port 0 comes from the kernel's ephemeral range, the range it
also takes the source ports of outgoing connections from: such a port can be taken by a
client connection (to the broker, the store, the emulator) before the server binds it, and
two calls can return the same port. Below that range only listeners compete."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOW = 20000


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int, avoid: set[int] | None = None, tries: int = 1000) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now, below the ephemeral range, none of
    ``avoid`` (which receives them)."""
    avoid = set() if avoid is None else avoid
    high = max(LOW + 1000, ephemeral_low())
    picked: list[int] = []
    for _ in range(tries):
        if len(picked) == count:
            return picked
        port = random.randrange(LOW, high)
        if port in avoid:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        avoid.add(port)
        picked.append(port)
    if len(picked) == count:
        return picked
    raise RuntimeError(f"no {count} free ports in {LOW}-{high}")


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
