"""The token of a job's callback URL: an HMAC of the action id (and of the dataset it
computes) under a key every service shares, so the callback service checks a
notification without reading the action (docs/architecture.md, "callback").

The dataset's hash rides in the URL beside it, signed, so the notification's end can
read the dataset while it takes the finish lease (docs/performance.md, "A chain's hop").
A URL made before tokens existed carries the action's stored ``secret`` instead: the
callback service still checks that one against the store.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

# Bytes of the HMAC-SHA256 kept in the URL: 192 bits, as hard to guess as the key.
TOKEN_BYTES = 24


def sign(key: bytes, action_id: str, dataset: str | None) -> str:
    """The token for the callback of ``action_id``, computing ``dataset`` (None: unmanaged)."""
    mac = hmac.new(key, f"{action_id}\0{dataset or ''}".encode(), hashlib.sha256).digest()[:TOKEN_BYTES]
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def valid(key: bytes, action_id: str, dataset: str | None, token: str) -> bool:
    """Whether ``token`` is this action's (and this dataset's), in constant time."""
    return hmac.compare_digest(sign(key, action_id, dataset).encode(), token.encode())
