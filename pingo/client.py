"""A small client of the gateway's HTTP API, for the CLI.

The gateway only takes JSON bodies and only answers to the host names it is configured
for (PINGO_ALLOWED_HOSTS): bodies go out with ``json=`` (``application/json``), and the
``Host`` header is the one in the base URL, so that URL must use such a name.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body
        super().__init__(f"HTTP {status}: {body}")


class Client:
    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.session is not None
        await self.session.close()

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self.session is not None
        try:
            async with self.session.request(method, self.base + path, **kwargs) as resp:
                text = await resp.text()
                try:
                    body = json.loads(text) if text else None
                except ValueError:
                    # Not the gateway (a proxy's error page, another server on the port).
                    detail = {"error": f"HTTP {resp.status} from {self.base}: {text[:300]}"}
                    raise ApiError(resp.status, detail) from None
                if resp.status >= 400:
                    raise ApiError(resp.status, body)
                return body
        except aiohttp.ClientConnectionError as exc:
            raise ApiError(0, {"error": f"cannot reach Pingo at {self.base}: {exc}"}) from exc

    async def submit(self, workflow: Any) -> dict[str, Any]:
        return await self.call("POST", "/api/v1/workflows", json=workflow)

    async def workflow(self, wf_id: str) -> dict[str, Any]:
        return await self.call("GET", f"/api/v1/workflows/{wf_id}")

    async def kill(self, wf_id: str) -> dict[str, Any]:
        return await self.call("POST", f"/api/v1/workflows/{wf_id}/kill")

    async def datasets(self, state: str | None = None) -> dict[str, Any]:
        return await self.call("GET", "/api/v1/datasets", params={"state": state} if state else None)

    async def timeline(self, wf_id: str) -> dict[str, Any]:
        return await self.call("GET", f"/api/v1/workflows/{wf_id}/timeline")
