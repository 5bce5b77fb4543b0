"""All five services in one process, for a laptop (``pingo dev``) and the demo.

Two ``pingo dev`` can run side by side: each uses the embedded MongoDB of its own data
directory (``shared.store.embedded``; the same directory, the same store), and each needs
ports of its own. A port already taken is refused before anything starts, rather than
silently talking to whatever listens there.
"""

from __future__ import annotations

import errno
import socket

from services.action_manager.service import ActionManager
from services.callback.service import CallbackService
from services.dataset_manager.service import DatasetManager
from services.decision.service import DecisionService
from services.workflow_manager.service import WorkflowManager
from shared.config import Settings
from shared.runtime import Context

SERVICES = {
    "workflow_manager": WorkflowManager,
    "action_manager": ActionManager,
    "callback": CallbackService,
    "dataset_manager": DatasetManager,
    "decision": DecisionService,
}


def all_services(ctx: Context) -> list:
    return [cls(ctx) for cls in SERVICES.values()]


def taken_ports(settings: Settings) -> list[str]:
    """The addresses ``pingo dev`` would listen on that another program already holds
    (bound as aiohttp binds them, with SO_REUSEADDR: a port only lingering in TIME_WAIT is free)."""
    taken = []
    for what, host, port in (
        ("gateway", settings.host, settings.port),
        ("callbacks", settings.callback_host, settings.callback_port),
    ):
        for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(address)
                except OSError as exc:
                    if exc.errno != errno.EADDRINUSE:
                        raise
                    taken.append(f"{host}:{port} ({what})")
                    break
    return taken
