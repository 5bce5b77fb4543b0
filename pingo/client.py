"""A small client of the gateway's HTTP API, for the CLI.

The gateway only takes JSON bodies and only answers to the host names it is configured
for (PINGO_ALLOWED_HOSTS): bodies go out with ``json=`` (``application/json``), and the
``Host`` header is the one in the base URL, so that URL must use such a name.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

# Addresses a server binds to that are not addresses to connect to: any interface.
ANY_INTERFACE = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
PAGE = 1000  # items asked for in one request of a list: the gateway's smallest ceiling


def default_url(env: Mapping[str, str] | None = None) -> str:
    """The gateway to talk to: ``PINGO_URL`` if set, else the one a server started with the
    same environment listens on (``PINGO_HOST``, ``PINGO_PORT``, as in shared/config.py)."""
    env = os.environ if env is None else env
    if url := env.get("PINGO_URL"):
        return url
    host = env.get("PINGO_HOST", "127.0.0.1").strip()
    host = ANY_INTERFACE.get(host, host)
    port = env.get("PINGO_PORT", "8080").strip()
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"PINGO_PORT must be a port number (1-65535), not {port!r}")
    return f"http://{f'[{host}]' if ':' in host else host}:{int(port)}"


def name_matches(pattern: str, name: str) -> bool:
    """``pingo list --name``: a glob pattern (with ``*``, ``?`` or ``[``) matches the whole
    name, other text any part of it; either way, whatever the case."""
    pattern, name = pattern.casefold(), name.casefold()
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def token_file(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return config / "pingo" / "token"


def default_token(env: Mapping[str, str] | None = None) -> str | None:
    """The API token to send: ``PINGO_TOKEN`` if set, else the first line of the token file
    (``~/.config/pingo/token``), else none (a Pingo with users off needs none)."""
    env = os.environ if env is None else env
    if token := env.get("PINGO_TOKEN", "").strip():
        return token
    try:
        return token_file(env).read_text().strip().splitlines()[0] or None
    except (OSError, IndexError):
        return None


def problem_lines(body: Any) -> list[str]:
    """An error answer as lines a person reads: what went wrong, then one line per violation.
    Understands RFC 9457 problem details (``detail``, else ``title``; ``violations``, or the
    ``errors``/``invalid-params`` lists others use) and the older ``{"error", "violations",
    "problems"}``."""
    if not isinstance(body, dict):
        return [str(body)]
    message = str(body.get("detail") or body.get("error") or body.get("title") or body.get("message") or body)
    if isinstance(body.get("retryAfter"), int | float):
        message += f" (try again in {body['retryAfter']} s)"
    if body.get("reference"):
        message += f" (reference {body['reference']})"
    lines = [message]
    listed = next((body[k] for k in ("violations", "errors", "invalid-params", "invalidParams") if body.get(k)), [])
    for v in listed if isinstance(listed, list) else []:
        if not isinstance(v, dict):
            lines.append(f"  - {v}")
            continue
        where = v.get("loc") or v.get("name") or v.get("pointer") or v.get("field") or "?"
        if isinstance(where, list):  # pydantic's tuple form
            where = ".".join(map(str, where))
        if v.get("in") == "query":
            where = f"query parameter {where}"
        if v.get("actionId") is not None:
            where = f"{where} (action {v['actionId']})"
        lines.append(f"  - {where}: {v.get('message') or v.get('reason') or v.get('detail') or v.get('msg')}")
    problems = body.get("problems")
    if not listed and isinstance(problems, list) and len(problems) > 1:  # one problem is the message itself
        lines += [f"  - {p}" for p in problems]
    return lines


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body
        super().__init__(f"HTTP {status}: {body}")

    def lines(self) -> list[str]:
        return problem_lines(self.body)

    @property
    def retry_after(self) -> float | None:
        after = self.body.get("retryAfter") if isinstance(self.body, dict) else None
        return float(after) if isinstance(after, int | float) else None


IDEMPOTENCY_KEY = "Idempotency-Key"
IN_FLIGHT = "tag:pingo,2026:problems/idempotency-key-in-flight"
SUBMIT_RETRY_WAITS = (1.0, 2.0, 4.0, 8.0)  # seconds before each retry of a submission


def retryable(exc: ApiError) -> bool:
    """Whether a submission that got ``exc`` is worth sending again under its key."""
    if exc.status == 0:
        # Lost on the way back (the connection dropped once the request was out); a server
        # that could not be reached at all is said at once, not after the retries.
        return not isinstance(exc.__cause__, aiohttp.ClientConnectorError)
    if exc.status == 409:
        return isinstance(exc.body, dict) and exc.body.get("type") == IN_FLIGHT
    return exc.status in (502, 503, 504)


class Client:
    def __init__(self, base_url: str | None = None, token: str | None = None) -> None:
        self.base = (base_url or default_url()).rstrip("/")
        self.token = token if token is not None else default_token()
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), headers=headers)
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

    async def pages(
        self, path: str, key: str, limit: int | None = None, params: dict[str, Any] | None = None, page: int = PAGE
    ) -> list[Any]:
        """Up to ``limit`` items (every one if None) of a list answer, following its ``next``
        cursor (sent back as ``?cursor=``) while more are wanted and the server has more,
        ``page`` items a request at most."""
        items: list[Any] = []
        params = dict(params or {})
        while True:
            params["limit"] = page if limit is None else min(page, limit - len(items))
            body = await self.call("GET", path, params=params)
            items += body.get(key, [])
            nxt = body.get("next")
            if not nxt or (limit is not None and len(items) >= limit):
                return items if limit is None else items[:limit]
            params["cursor"] = str(nxt)

    async def submit(self, workflow: Any, key: str | None = None) -> dict[str, Any]:
        """Submit ``workflow`` under an ``Idempotency-Key`` (``key``, else a new UUID), and
        submit it again under the same key when the answer may have been lost (the
        connection dropped or timed out after sending), when planning was abandoned or the
        store was away (503), or while the first try is still being planned (409): the
        gateway answers a retry with the workflow the first try made, never a second one
        (docs/api.md, "Retrying a submission")."""
        headers = {IDEMPOTENCY_KEY: key or str(uuid.uuid4())}
        for wait in (*SUBMIT_RETRY_WAITS, None):
            try:
                return await self.call("POST", "/api/v1/workflows", json=workflow, headers=headers)
            except ApiError as exc:
                if wait is None or not retryable(exc):
                    raise
                await asyncio.sleep(max(wait, float(exc.retry_after or 0)))
            except TimeoutError:  # the request went out; its answer did not come
                if wait is None:
                    raise ApiError(0, {"error": f"no answer from Pingo at {self.base} in time"}) from None
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def dry_run(self, workflow: Any) -> dict[str, Any]:
        """What submitting ``workflow`` would compute and reuse, and why; the server writes nothing."""
        return await self.call("POST", "/api/v1/workflows", json=workflow, params={"dryRun": "true"})

    async def workflows(self, limit: int, state: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` workflows in ``state`` (filtered by the server) whose name
        matches ``name`` (see ``name_matches``). The API matches a name only exactly, so a
        pattern is matched here, over the pages the server sends, until ``limit`` are found."""
        params: dict[str, Any] = {"state": state} if state else {}
        if not name:
            return await self.pages("/api/v1/workflows", "workflows", limit, params)
        found: list[dict[str, Any]] = []
        params["limit"] = PAGE
        while True:
            body = await self.call("GET", "/api/v1/workflows", params=params)
            found += [wf for wf in body.get("workflows", []) if name_matches(name, wf.get("name") or "")]
            if len(found) >= limit or not body.get("next"):
                return found[:limit]
            params["cursor"] = str(body["next"])

    async def workflow(self, wf_id: str) -> dict[str, Any]:
        return await self.call("GET", f"/api/v1/workflows/{wf_id}")

    async def kill(self, wf_id: str) -> dict[str, Any]:
        return await self.call("POST", f"/api/v1/workflows/{wf_id}/kill")

    async def datasets(self, state: str | None = None) -> dict[str, Any]:
        return await self.call("GET", "/api/v1/datasets", params={"state": state} if state else None)

    async def usage_by_user(self) -> list[dict[str, Any]]:
        """Each user's share of storage and of the time reuse saved (those the caller may see)."""
        body = await self.call("GET", "/api/v1/datasets", params={"byUser": "true", "limit": 1})
        return body.get("byUser") or []

    async def dataset(self, hash_: str) -> dict[str, Any]:
        return await self.call("GET", f"/api/v1/datasets/{hash_}")

    async def delete_dataset(self, hash_: str) -> dict[str, Any]:
        return await self.call("DELETE", f"/api/v1/datasets/{hash_}")

    async def invalidate_dataset(self, hash_: str, descendants: bool = False) -> dict[str, Any]:
        params = {"descendants": "true"} if descendants else None
        return await self.call("POST", f"/api/v1/datasets/{hash_}/invalidate", params=params)

    async def change_dataset(self, hash_: str, change: dict[str, Any]) -> dict[str, Any]:
        """``change``: ``{"pinned": bool}`` and/or ``{"expiresAt": time or None}``."""
        return await self.call("PATCH", f"/api/v1/datasets/{hash_}", json=change)

    async def logs(
        self,
        action_id: str,
        attempt: int | None = None,
        stream: str = "stdout",
        tail: int | None = None,
        follow: bool = False,
    ) -> AsyncIterator[bytes]:
        """An attempt's log, chunk by chunk as the gateway sends it (docs/api.md, "Action
        logs"). A followed log has no time limit: it ends when the attempt ends."""
        assert self.session is not None
        params: dict[str, str] = {"stream": stream}
        if attempt is not None:
            params["attempt"] = str(attempt)
        if tail is not None:
            params["tail"] = str(tail)
        if follow:
            params["follow"] = "true"
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30) if follow else None
        try:
            async with self.session.get(
                f"{self.base}/api/v1/actions/{action_id}/logs", params=params, timeout=timeout
            ) as resp:
                if resp.status >= 400:
                    text = await resp.text()
                    try:
                        body = json.loads(text)
                    except ValueError:
                        body = {"error": f"HTTP {resp.status} from {self.base}: {text[:300]}"}
                    raise ApiError(resp.status, body)
                async for chunk in resp.content.iter_any():
                    yield chunk
        except aiohttp.ClientConnectionError as exc:
            raise ApiError(0, {"error": f"cannot reach Pingo at {self.base}: {exc}"}) from exc

    async def timeline(self, wf_id: str) -> list[dict[str, Any]]:
        """Every transition of a workflow, its actions and their datasets, in time order."""
        return await self.pages(f"/api/v1/workflows/{wf_id}/timeline", "transitions")
