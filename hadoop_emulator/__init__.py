"""A protocol-faithful emulator of Apache Oozie (web services API v1/v2) and WebHDFS
(NameNode + DataNode), for tests and for running Pingo without a cluster.

A program of its own: it imports nothing from Pingo, and Pingo's services never import it.
``start_emulator(root)`` serves the three endpoints in the running event loop;
``python -m hadoop_emulator`` (or ``pingo emulate-hadoop``) runs them until SIGINT/SIGTERM.
See docs/emulator.md.

The package import is kept light (the command line builds its parser from :mod:`.faults`);
the server modules are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hadoop_emulator.faults import Faults
    from hadoop_emulator.server import Emulator, start_emulator

__all__ = ["Emulator", "Faults", "start_emulator"]


def __getattr__(name: str) -> Any:
    if name in ("Emulator", "start_emulator"):
        from hadoop_emulator import server

        return getattr(server, name)
    if name == "Faults":
        from hadoop_emulator.faults import Faults

        return Faults
    raise AttributeError(name)
