"""The catalogue's record of the storage it describes (docs/planning.md, "One catalogue,
one storage").

A catalogue (the store: the embedded one of a ``PINGO_DATA_DIR``, or a database of
``PINGO_MONGO_URL``) lists datasets of one storage. A process whose settings name another
storage would look for those datasets where they are not, and mark them all LOST: it is
refused at start instead. The first process to use a catalogue records its storage, with
one insert on a fixed ``_id``, so two starters racing on an empty catalogue agree on
whichever came first. A catalogue made before this record existed adopts the storage of
the first process that starts on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from typing import Any

from pymongo.errors import DuplicateKeyError

from shared.errors import PingoError
from shared.storage.identity import StorageIdentity
from shared.store.client import Store

log = logging.getLogger(__name__)
COLLECTION = "catalogue"
STORAGE_ID = "storage"
CALLBACK_KEY_ID = "callback_key"


class StorageMismatch(PingoError):
    """The catalogue describes another storage than these settings name."""

    def __init__(self, recorded: StorageIdentity, wanted: StorageIdentity, where: str) -> None:
        self.recorded, self.wanted = recorded, wanted
        super().__init__(
            f"{where} describes the datasets of {recorded.describe()}, but this process is set for "
            f"{wanted.describe()}. A catalogue serves one storage: looking for its datasets on another would "
            f"mark them all lost. Give this process a catalogue of its own: another PINGO_DATA_DIR "
            f"(e.g. PINGO_DATA_DIR=.pingo-{wanted.kind}), or another PINGO_MONGO_DB with PINGO_MONGO_URL; or "
            f"start it with the settings of {recorded.describe()}."
        )


async def recorded_storage(store: Store) -> StorageIdentity | None:
    """The storage the catalogue describes; None before any process recorded it."""
    doc = await store.db[COLLECTION].find_one({"_id": STORAGE_ID})
    return StorageIdentity.from_doc(doc) if doc else None


async def bind_storage(store: Store, wanted: StorageIdentity, where: str) -> StorageIdentity:
    """Check that the catalogue describes ``wanted``, recording it if the catalogue has no
    record yet; raise ``StorageMismatch`` if it describes another storage. ``where``
    names the catalogue in the message (the data dir or the database)."""
    recorded = await recorded_storage(store)
    if recorded is None:
        adopted = await store.datasets.find_one({}, {"_id": 1}) is not None
        doc: dict[str, Any] = {
            "_id": STORAGE_ID, **wanted.as_doc(), "recorded_at": time.time(),
            "recorded_by": f"{socket.gethostname()}:{os.getpid()}", "adopted": adopted,
        }  # fmt: skip
        try:
            await store.db[COLLECTION].insert_one(doc)
        except DuplicateKeyError:
            pass  # another starter recorded first: its record is the catalogue's
        else:
            if adopted:
                log.warning(
                    "%s held datasets but no record of their storage: it now describes %s (adopted from these "
                    "settings; docs/planning.md, \"One catalogue, one storage\")", where, wanted.describe(),
                )  # fmt: skip
            else:
                log.info("%s now describes %s", where, wanted.describe())
            return wanted
        recorded = await recorded_storage(store)
        assert recorded is not None
    if recorded.key != wanted.key:
        raise StorageMismatch(recorded, wanted, where)
    return recorded


async def callback_key(store: Store) -> bytes:
    """The key callback tokens are signed with when no PINGO_CALLBACK_KEY is set: made at
    random by the first process to ask, one insert on a fixed ``_id``, so every service
    on the catalogue agrees on it (``shared.callback_tokens``). Whoever can read it could
    read the actions' stored secrets too."""
    coll = store.db[COLLECTION]
    doc = await coll.find_one({"_id": CALLBACK_KEY_ID})
    if doc is None:
        with contextlib.suppress(DuplicateKeyError):  # another process made it first: theirs
            await coll.insert_one({"_id": CALLBACK_KEY_ID, "key": os.urandom(32).hex()})
        doc = await coll.find_one({"_id": CALLBACK_KEY_ID})
    if doc is None or not doc.get("key"):
        raise PingoError("the catalogue's callback key could not be made")
    return bytes.fromhex(doc["key"])
