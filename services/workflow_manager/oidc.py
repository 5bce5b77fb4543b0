"""JWTs from a site's identity provider (OpenID Connect), verified with PyJWT.

The provider's signing keys come from its JWKS (``jwks_uri`` of its discovery document,
or ``PINGO_OIDC_JWKS_URL``), fetched with the gateway's own HTTP client and kept; a token
signed with a key id not seen yet makes one refetch (the provider rotated its keys), at
most every ``REFETCH_AFTER`` seconds so that forged key ids cannot make the gateway hammer
the provider. Signature, ``exp``/``nbf`` (with ``LEEWAY``), ``iss`` and ``aud`` are
checked by PyJWT; the algorithms are the configured ones only (never ``none``, never
whatever the token's header asks for).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt

from shared.config import Settings
from shared.errors import PingoError

LEEWAY = 30  # seconds of clock difference tolerated on exp and nbf
REFETCH_AFTER = 30.0  # seconds between two fetches of the key set
FETCH_TIMEOUT = 10.0


class InvalidToken(PingoError):
    """Why a JWT is refused (the message is safe to show the caller)."""


@dataclass(frozen=True)
class Claims:
    user: str
    groups: tuple[str, ...]


class Verifier:
    def __init__(self, settings: Settings) -> None:
        assert settings.oidc_issuer and settings.oidc_audience
        self.settings = settings
        self.issuer = settings.oidc_issuer
        self.audience = settings.oidc_audience
        self.keys: dict[str, jwt.PyJWK] = {}
        self.fetched_at = -REFETCH_AFTER
        self.lock = asyncio.Lock()
        self.http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()

    async def _get(self, url: str) -> Any:
        if self.http is None:
            self.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT))
        async with self.http.get(url) as resp:
            resp.raise_for_status()
            return await resp.json(content_type=None)

    async def _refresh(self) -> None:
        async with self.lock:
            if time.monotonic() - self.fetched_at < REFETCH_AFTER:
                return
            self.fetched_at = time.monotonic()
            url = self.settings.oidc_jwks_url
            if url is None:
                discovery = await self._get(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
                url = discovery["jwks_uri"]
            jwks = jwt.PyJWKSet.from_dict(await self._get(url))
            self.keys = {k.key_id: k for k in jwks.keys if k.key_id}

    async def key_for(self, kid: str | None) -> jwt.PyJWK:
        if kid is None:
            raise InvalidToken("the token's header names no key (kid)")
        if kid not in self.keys:
            try:
                await self._refresh()
            except (aiohttp.ClientError, TimeoutError, KeyError, ValueError, jwt.PyJWKSetError) as exc:
                raise InvalidToken(f"the identity provider's keys could not be read: {exc}") from exc
        if kid not in self.keys:
            raise InvalidToken(f"no key {kid!r} in the identity provider's key set")
        return self.keys[kid]

    async def verify(self, token: str) -> Claims:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"not a JWT: {exc}") from exc
        key = await self.key_for(header.get("kid"))
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=self.settings.oidc_algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from exc
        user = claims.get(self.settings.oidc_user_claim)
        if not isinstance(user, str) or not user:
            raise InvalidToken(f"the token has no {self.settings.oidc_user_claim!r} claim")
        groups = claims.get(self.settings.oidc_groups_claim) or []
        return Claims(user=user, groups=tuple(g for g in groups if isinstance(g, str)))
