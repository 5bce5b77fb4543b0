"""A protocol-faithful emulator of Apache Oozie (web services API v1/v2) and WebHDFS
(NameNode + DataNode), for tests and for running Pingo without a cluster.

``start_emulator(root)`` serves the three endpoints in the running event loop; ``pingo
emulate-hadoop`` runs them until SIGINT/SIGTERM. See docs/emulator.md.

The package import is kept light (the CLI builds its parser from :mod:`.faults`); the
server modules are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pingo.emulator.faults import Faults
    from pingo.emulator.server import Emulator, start_emulator

__all__ = ["Emulator", "Faults", "start_emulator"]


def __getattr__(name: str) -> Any:
    if name in ("Emulator", "start_emulator"):
        from pingo.emulator import server

        return getattr(server, name)
    if name == "Faults":
        from pingo.emulator.faults import Faults

        return Faults
    raise AttributeError(name)
