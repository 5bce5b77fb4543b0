"""A small client of the gateway's HTTP API, for the CLI."""

from __future__ import annotations

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
                body = await resp.json(content_type=None) if resp.content_length != 0 else None
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
