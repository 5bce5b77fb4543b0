"""All five services in one process, for a laptop (``pingo dev``) and the demo.

Two ``pingo dev`` can run side by side: each uses the embedded MongoDB of its own data
directory (``shared.store.embedded``; the same directory, the same store), and each needs
ports of its own. A port already taken is refused before anything starts, rather than
silently talking to whatever listens there; and if the catalogue of this data directory
describes another storage than this one's settings, the refusal says to use a data
directory of its own, not only other ports (docs/planning.md, "One catalogue, one storage").
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from urllib.parse import quote_plus

from services.action_manager.service import ActionManager
from services.callback.service import CallbackService
from services.dataset_manager.service import DatasetManager
from services.decision.service import DecisionService
from services.workflow_manager.service import WorkflowManager
from shared.config import Settings
from shared.runtime import Context, catalogue_name
from shared.storage.identity import StorageIdentity
from shared.store.catalogue import recorded_storage
from shared.store.client import UNREACHABLE, connect
from shared.store.embedded_server import socket_path

# How long the port-conflict message waits for the catalogue's answer, seconds.
LOOK_TIMEOUT = 2.0

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


async def other_storage(settings: Settings) -> StorageIdentity | None:
    """The storage the catalogue of these settings records, if it is not the one they name.
    Only a look: nothing is started or created (no embedded server, no data dir), and a
    catalogue that cannot be reached at once, or that records nothing, is None."""
    url = settings.mongo_url
    if url is None:
        sock = socket_path((settings.data_dir / "mongo").resolve())
        try:
            folder = os.lstat(sock.parent)
        except OSError:
            return None
        # The embedded server's socket is trusted only in a folder private to this user.
        if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.getuid() or stat.S_IMODE(folder.st_mode) != 0o700:
            return None
        if not sock.exists():
            return None
        url = f"mongodb://{quote_plus(str(sock))}"
    try:
        store = await connect(url, settings.mongo_db, indexes=False, timeout=LOOK_TIMEOUT)
    except UNREACHABLE:
        return None
    try:
        recorded = await recorded_storage(store)
    finally:
        await store.close()
    if recorded is None or recorded.key == StorageIdentity.of(settings).key:
        return None
    return recorded


def port_conflict(settings: Settings, taken: list[str], recorded: StorageIdentity | None) -> str:
    """Why ``pingo dev`` does not start on ports already in use, and what to do."""
    said = f"dev: {' and '.join(taken)} already in use, by another pingo dev or another program; "
    if recorded is None:
        return said + "give this one ports of its own: pingo dev --port N (callbacks on N+1)"
    wanted = StorageIdentity.of(settings)
    own = (
        f"a data folder of its own as well: PINGO_DATA_DIR={settings.data_dir}-{wanted.kind}"
        if settings.mongo_url is None
        else f"a database of its own as well: PINGO_MONGO_DB={settings.mongo_db}-{wanted.kind}"
    )
    return said + (
        f"{catalogue_name(settings)} describes {recorded.describe()}, and this one is set for {wanted.describe()}: "
        f"other ports alone would share that catalogue, and this one would be refused. Give it {own} "
        "pingo dev --port N (callbacks on N+1)"
    )
