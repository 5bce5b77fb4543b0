"""Signing a delivery as the Standard Webhooks specification says (docs/webhooks.md,
"Verifying a delivery"), with its reference library ``standardwebhooks``: the headers
``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` (``v1,<base64 HMAC-SHA256
of "<id>.<timestamp>.<body>">``), keyed by the shared secret ``whsec_<base64>``. A
receiver verifies with the same library in any language, or with a few lines of HMAC."""

from __future__ import annotations

import binascii
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook


def secret_problem(secret: str) -> str | None:
    """Why ``secret`` cannot sign, if it cannot: it is base64 (``whsec_`` before it, as the
    specification writes it), of at least 24 bytes (the specification asks 24 to 64)."""
    try:
        key = Webhook(secret)._whsecret
    except (binascii.Error, ValueError) as exc:
        return f"not base64 ({exc}); make one as docs/webhooks.md says"
    except Exception as exc:  # the library's own: an empty secret
        return str(exc)
    if len(key) < 24:
        return f"{len(key)} bytes: at least 24"
    return None


def headers(secret: str, message_id: str, body: str, now: float) -> dict[str, str]:
    """The headers that sign ``body``, sent as message ``message_id`` (the same in every
    attempt, so that a receiver can drop a repeat) at ``now`` (each attempt's own)."""
    at = datetime.fromtimestamp(int(now), tz=UTC)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now)),
        "webhook-signature": Webhook(secret).sign(message_id, at, body),
        "content-type": "application/json",
    }
