"""The gateway's middlewares: which requests get in, how long they may take, and that every
error, even the unexpected, is a problem document (application/problem+json).

The gateway runs workflows, and a workflow runs commands, so a web page must not be able
to reach it through a user's browser:

- **DNS rebinding.** A page on ``evil.example`` whose name is re-pointed at 127.0.0.1 is
  same-origin with the gateway as far as the browser knows, but its requests still carry
  ``Host: evil.example``. Only the names in ``allowed_hosts`` get in (400 otherwise, as
  Django answers a disallowed host). ``/healthz`` is exempt: probes call it by IP address
  and it tells nothing.
- **Cross-site requests.** A browser marks a cross-origin request with ``Origin``; one not
  in ``cors_origins`` gets 403. A body must be declared JSON: the content types a page may
  send without a CORS preflight (``text/plain``, forms) get 415, so even a browser that
  sends no ``Origin`` cannot deliver a workflow.

Limits: a body must arrive within ``body_timeout`` (408, and the connection is closed); a
GET waits at most ``request_store_timeout`` for a MongoDB that cannot be reached and at most
``request_timeout`` for a slow one (PyMongo's client-side operation timeout). Either is a
503 with ``Retry-After``, as is any store outage; anything else unexpected is a logged
500. Every error, whoever answers it, is one RFC 9457 problem document (``problems.py``).
Before any of this, the connections themselves are bounded, in number and in the time their
request's headers may take (``shared/connections.py``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import pymongo
from aiohttp import web
from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, PyMongoError, ServerSelectionTimeoutError

from shared.config import Settings
from shared.problems import (
    CROSS_ORIGIN,
    HOST_NOT_ALLOWED,
    STORE_UNAVAILABLE,
    ProblemError,
    ProblemResponse,
    problem,
)

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOOPBACK = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("", "0.0.0.0", "::")
UNGUARDED_HOST = frozenset({"/healthz"})
DEFAULT_PORTS = {"http": 80, "https": 443}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WATCH_INTERVAL = 0.05  # seconds between two looks at the store's reachability during a GET
RETRY_AFTER_OUTAGE = 5  # seconds: a failover or a restart of the store takes about that
CORS_ORIGIN = web.RequestKey("cors_origin", str)


# The name the handlers use for an error answer.
error = problem


def split_host(value: str) -> tuple[str, int | None]:
    """``name[:port]`` (``[v6]:port`` for IPv6) as a lower-case name without brackets or a
    trailing dot, and the port if one is given. Raises ValueError if it is not a host."""
    value = value.strip().lower()
    port: str | None = None
    if value.startswith("["):
        name, sep, rest = value[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(value)
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, port = value.split(":")
    else:
        name = value  # a bare IPv6 address (in a setting) or a plain name
    if port is not None and not port.isdigit():
        raise ValueError(value)
    name = name.rstrip(".")
    if not name:
        raise ValueError(value)
    return name, int(port) if port else None


class Guard:
    """The gateway's request pipeline for one set of settings; ``install`` adds it to an app."""

    def __init__(self, settings: Settings, client: AsyncMongoClient) -> None:
        self.settings = settings
        self.client = client
        configured = settings.allowed_hosts or [
            *LOOPBACK,
            *([settings.host] if settings.host not in WILDCARD_BINDS else []),
        ]
        self.any_host = "*" in configured
        self.hosts = {split_host(h)[0] for h in configured if h != "*"}
        self.origins = {o.strip().lower().rstrip("/") for o in settings.cors_origins}

    def install(self, app: web.Application) -> None:
        # Outermost first: nothing inside ``errors`` can answer an error but as a problem.
        app.middlewares.extend([self.errors, self.check_host, self.check_origin, self.check_body, self.store_deadline])
        app.on_response_prepare.append(self.cors_headers)

    # --- every answer is JSON ----------------------------------------------------------------

    @web.middleware
    async def errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await self.answer(request, handler)
        if response.status >= 400 and not isinstance(response, ProblemResponse) and not response.prepared:
            # An error answered rather than raised (a library's): a problem all the same.
            response = error(response.status, self.http_detail(request, response), headers=_kept_headers(response))
        if isinstance(response, ProblemResponse):
            response.locate(request.path_qs)
        return response

    async def answer(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ProblemError as exc:
            return exc.response
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return error(exc.status, self.http_detail(request, exc), headers=_kept_headers(exc))
        except PyMongoError as exc:
            # ConnectionFailure covers ServerSelectionTimeoutError, AutoReconnect and
            # NetworkTimeout; ``timeout`` marks the expiry of an operation's deadline.
            if not isinstance(exc, ConnectionFailure) and not exc.timeout:
                return self.internal(request, exc)
            log.warning("%s %s: the store is unavailable: %s", request.method, request.path, exc)
            return error(
                503,
                "the store (MongoDB) is unavailable or too slow; try again shortly",
                headers={"Retry-After": str(RETRY_AFTER_OUTAGE)},
                type=STORE_UNAVAILABLE,
                retryAfter=RETRY_AFTER_OUTAGE,
            )
        except Exception as exc:
            return self.internal(request, exc)

    def http_detail(self, request: web.Request, exc: web.StreamResponse) -> str:
        if exc.status == 413:
            return f"request body too large (limit {self.settings.max_body_bytes} bytes)"
        if exc.status == 404:
            return f"no route {request.path!r}: the routes are listed in /api/v1/openapi.json"
        if exc.status == 405:
            allowed = exc.headers.get("Allow", "")
            return f"{request.method} is not allowed on {request.path} (allowed: {allowed})"
        return exc.reason

    def internal(self, request: web.Request, exc: Exception) -> web.Response:
        ref = uuid.uuid4().hex[:12]
        log.error("%s %s failed (reference %s)", request.method, request.path, ref, exc_info=exc)
        return error(500, "internal error", reference=ref)

    # --- who may ask ---------------------------------------------------------------------------

    @web.middleware
    async def check_host(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.any_host or request.path in UNGUARDED_HOST:
            return await handler(request)
        raw = request.headers.get("Host", "")
        try:
            name = split_host(raw)[0]
        except ValueError:
            name = None
        if name is None or not self.host_allowed(name):
            return error(
                400, f"host {raw!r} is not allowed: add it to PINGO_ALLOWED_HOSTS to serve it", type=HOST_NOT_ALLOWED
            )
        return await handler(request)

    def host_allowed(self, name: str) -> bool:
        if name in self.hosts:
            return True
        return any(h.startswith(".") and (name.endswith(h) or name == h[1:]) for h in self.hosts)

    @web.middleware
    async def check_origin(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is None or self.same_origin(origin, request.headers.get("Host", "")):
            return await handler(request)
        normalized = origin.strip().lower().rstrip("/")
        if normalized not in self.origins:
            return error(
                403, f"cross-origin requests from {origin!r} are not allowed (PINGO_CORS_ORIGINS)", type=CROSS_ORIGIN
            )
        request[CORS_ORIGIN] = origin
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            return web.Response(
                status=204,
                headers={
                    "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE, OPTIONS",
                    "Access-Control-Allow-Headers": "Content-Type, Idempotency-Key",
                    "Access-Control-Max-Age": "600",
                },
            )
        return await handler(request)

    @staticmethod
    def same_origin(origin: str, host: str) -> bool:
        """Whether ``Origin`` names the authority this request was sent to (``Host``)."""
        try:
            parts = urlsplit(origin.strip())
            default = DEFAULT_PORTS.get(parts.scheme.lower())
            if default is None or not parts.hostname:
                return False  # "null" (sandboxed frames, file:) and non-web schemes
            theirs = (parts.hostname.rstrip("."), parts.port or default)
            name, port = split_host(host)
        except ValueError:
            return False
        return theirs == (name, port or default)

    async def cors_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        # A signal, not a middleware: error answers made outside the handler get them too.
        if origin := request.get(CORS_ORIGIN):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = "Location, Retry-After, Idempotent-Replayed"
            response.headers.add("Vary", "Origin")

    # --- what may be sent, and how long it may take ---------------------------------------------

    @web.middleware
    async def check_body(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.body_exists or request.match_info.http_exception is not None:
            return await handler(request)  # no body, or no such route or method (404, 405): nothing to read
        media, charset = request.content_type, request.charset
        is_json = media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
        if not is_json or (charset is not None and charset.lower().replace("-", "") != "utf8"):
            declared = request.headers.get("Content-Type", "")
            return error(415, f"a request body must be UTF-8 application/json, not {declared!r}")
        # Read here, under a deadline: the handler's read() then returns this body at once.
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                await request.read()
        except TimeoutError:
            response = error(408, f"the request body did not arrive within {self.settings.body_timeout:g} s")
            # Answer, then hang up after a short linger (the gateway's ``LINGER``), reading and
            # discarding what the client still sends: a socket closed with unread input
            # resets the connection, and a reset can destroy the 408 before the client reads it.
            response.force_close()
            return response
        return await handler(request)

    @web.middleware
    async def store_deadline(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A GET gives up ``request_store_timeout`` after MongoDB is seen unreachable, and in
        any case after ``request_timeout``. One deadline cannot do both: short enough for an
        outage, it would cut reads that the embedded store, under load, takes seconds over.
        Left alone, the client would wait ``serverSelectionTimeoutMS`` (10 s) for a store
        that is down."""
        # Reads only: a POST starts work (planning, a kill applied in the background) that
        # must not be cut half-way, and a task it starts would inherit a deadline set here.
        if request.method not in SAFE_METHODS:
            return await handler(request)
        # A followed log stays open as long as its job runs, reading no store while it
        # streams: cutting it at request_timeout, or when MongoDB is away, would end a
        # healthy stream. Such a handler bounds its own store reads.
        if getattr(request.match_info.handler, "long_lived", False):
            return await handler(request)
        unreachable = asyncio.timeout(None)
        watcher = asyncio.create_task(self.watch_store(unreachable))
        try:
            async with unreachable:
                with pymongo.timeout(self.settings.request_timeout):
                    return await handler(request)
        except TimeoutError:
            if not unreachable.expired():
                raise
        finally:
            watcher.cancel()
        raise ServerSelectionTimeoutError(f"unreachable for {self.settings.request_store_timeout:g} s")

    async def watch_store(self, unreachable: asyncio.Timeout) -> None:
        """Expire ``unreachable`` once no server has been known for ``request_store_timeout``."""
        loop = asyncio.get_running_loop()
        lost_at: float | None = None
        while True:
            if self.client.topology_description.has_readable_server():
                lost_at = None
            elif lost_at is None:
                lost_at = loop.time()
            elif loop.time() - lost_at >= self.settings.request_store_timeout:
                unreachable.reschedule(loop.time())
                return
            await asyncio.sleep(WATCH_INTERVAL)


def _kept_headers(exc: web.StreamResponse) -> dict[str, str]:
    """The headers of an HTTP exception worth keeping in its problem version (405's Allow)."""
    return {k: v for k, v in exc.headers.items() if k in ("Allow", "Retry-After", "Location")}


def install(app: web.Application, settings: Settings, client: AsyncMongoClient) -> None:
    Guard(settings, client).install(app)
