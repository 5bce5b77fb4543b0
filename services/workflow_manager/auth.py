"""Who is asking: the gateway's authentication (docs/users.md).

Credentials are ``Authorization: Bearer <credential>``: a Pingo API token (``pingo_…``,
``pingo users add``) or, where ``PINGO_OIDC_ISSUER`` is set, a JWT of that identity
provider. Whether they are needed is ``PINGO_AUTH``: ``auto`` asks for them once a user
exists (or an issuer is set), ``required`` always, ``off`` never (a single-user Pingo,
which then refuses to listen beyond loopback: ``check_exposure``). Beyond loopback, more
than one user with local jobs that no sandbox isolates is refused too (``check_isolation``).

Replicas share users through the store and each trusts what it read for at most
``PINGO_AUTH_CACHE_SECONDS``: a revoked token stops working on every replica within that.
The web view's pages and scripts hold no data and are served to anyone; the API they call
is not. ``/healthz`` answers probes without credentials.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass

from aiohttp import web

from services.workflow_manager import ui
from services.workflow_manager.guard import Handler
from services.workflow_manager.oidc import InvalidToken, Verifier
from shared.config import Settings
from shared.errors import CannotStart
from shared.executors.sandbox import isolation_problem
from shared.problems import UNAUTHENTICATED, ProblemError, problem
from shared.store import users
from shared.store.client import Store
from shared.store.records import UserRecord

log = logging.getLogger(__name__)
OPEN_PATHS = frozenset({"/healthz"})
PAGE_METHODS = frozenset({"GET", "HEAD"})
CACHE_LIMIT = 10_000  # credentials remembered per replica (a burst of bad ones cannot grow it further)


@dataclass(frozen=True)
class Identity:
    """``name`` None: authentication is off and the one user of this Pingo sees everything."""

    name: str | None
    admin: bool

    def sees(self, owner: str | None) -> bool:
        """Whether this caller may read and kill a workflow of ``owner``."""
        return self.admin or owner == self.name


ANYONE = Identity(name=None, admin=True)
IDENTITY = web.RequestKey("identity", Identity)


def identity(request: web.Request) -> Identity:
    return request.get(IDENTITY, ANYONE)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def check_exposure(settings: Settings, store: Store) -> None:
    """Refuse to serve anyone who can reach a non-loopback address without credentials."""
    if loopback(settings.host):
        return
    if settings.auth == "off":
        raise CannotStart(
            f"PINGO_HOST={settings.host} is reachable from other machines and PINGO_AUTH=off lets anyone run "
            "commands there: set PINGO_AUTH=auto or required and add users (pingo users add NAME), or bind "
            "PINGO_HOST=127.0.0.1"
        )
    if settings.auth == "auto" and not settings.oidc_issuer and not await users.any_active(store):
        raise CannotStart(
            f"PINGO_HOST={settings.host} is reachable from other machines and no authentication is configured: "
            "add a user first (pingo users add NAME --admin), set PINGO_OIDC_ISSUER, or set PINGO_AUTH=required "
            "to start with nobody allowed in yet"
        )


async def check_isolation(settings: Settings, store: Store) -> None:
    """Refuse to serve more than one user beyond loopback when their local jobs would not
    be isolated from each other and from Pingo (no sandbox: docs/users.md, "What a job can
    reach"). One user, or loopback, is served as before: that person runs what they like."""
    if settings.executor != "local" or loopback(settings.host) or settings.auth == "off":
        return  # Oozie runs each job as its user; auth off beyond loopback is refused already
    problem = isolation_problem(settings)
    if problem is None:
        return
    if settings.oidc_issuer:
        who = "anyone the OIDC issuer vouches for may sign in"
    else:
        active = [u for u in await users.all_users(store) if u.active]
        if len(active) <= 1:
            return
        who = f"{len(active)} users may sign in"
    raise CannotStart(
        f"PINGO_HOST={settings.host} is reachable from other machines, {who}, and the local executor cannot "
        f"isolate their jobs from each other and from Pingo ({problem}): each job could read and change every "
        "user's data and Pingo's own. Install bubblewrap (apt-get install bubblewrap) and leave "
        "PINGO_JOB_SANDBOX=auto, run jobs on Hadoop (PINGO_EXECUTOR=oozie), or bind PINGO_HOST=127.0.0.1"
    )


def unauthenticated(detail: str, given: bool) -> ProblemError:
    # RFC 6750: a request without credentials gets the bare challenge; a bad token says so.
    challenge = 'Bearer realm="pingo"' + (', error="invalid_token"' if given else "")
    return ProblemError(problem(401, detail, type=UNAUTHENTICATED, headers={"WWW-Authenticate": challenge}))


class Authenticator:
    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.verifier = Verifier(settings) if settings.oidc_issuer else None
        self.ttl = settings.auth_cache_seconds
        self._required: tuple[float, bool] = (-1e9, False)
        self._seen: dict[str, tuple[float, UserRecord | None]] = {}

    def install(self, app: web.Application) -> None:
        app.middlewares.append(self.authenticate)
        app.on_cleanup.append(self._close)

    async def _close(self, _: web.Application) -> None:
        if self.verifier is not None:
            await self.verifier.close()

    async def required(self) -> bool:
        if self.settings.auth == "off":
            return False
        if self.settings.auth == "required" or self.verifier is not None:
            return True
        at, value = self._required
        if time.monotonic() - at > self.ttl:
            value = await users.any_active(self.store)
            self._required = (time.monotonic(), value)
        return value

    @web.middleware
    async def authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        # The web view's pages are read with GET (or HEAD) only: no other request asks for one.
        page = request.method in PAGE_METHODS and ui.serves_page(request)
        if request.path in OPEN_PATHS or page or not await self.required():
            return await handler(request)
        request[IDENTITY] = await self.identify(request.headers.get("Authorization"))
        return await handler(request)

    async def identify(self, header: str | None) -> Identity:
        if not header:
            raise unauthenticated("credentials required: send Authorization: Bearer <token>", given=False)
        scheme, _, credential = header.partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise unauthenticated("the Authorization header must be 'Bearer <token>'", given=True)
        if credential.startswith(users.TOKEN_PREFIX):
            user = await self.token_holder(credential)
            if user is None:
                raise unauthenticated("the token is unknown or revoked", given=True)
            return Identity(name=user.name, admin=user.admin)
        if self.verifier is None:
            raise unauthenticated("not a Pingo API token (they start with 'pingo_')", given=True)
        return await self.from_jwt(credential)

    async def token_holder(self, token: str) -> UserRecord | None:
        key = users.digest(token)
        now = time.monotonic()
        cached = self._seen.get(key)
        if cached is not None and now - cached[0] <= self.ttl:
            return cached[1]
        # Found by its digest: no secret is compared byte by byte, so the time an answer
        # takes tells nothing about how close a guess came.
        user = await users.holder(self.store, token)
        if len(self._seen) >= CACHE_LIMIT:
            self._seen.clear()
        self._seen[key] = (now, user)
        return user

    async def from_jwt(self, token: str) -> Identity:
        assert self.verifier is not None
        try:
            claims = await self.verifier.verify(token)
        except InvalidToken as exc:
            raise unauthenticated(f"the token was refused: {exc}", given=True) from None
        if (why := users.check_name(claims.user)) is not None:
            raise unauthenticated(f"the token's {self.settings.oidc_user_claim} claim: {why}", given=True)
        known = await users.get(self.store, claims.user)
        if known is not None and not known.active:
            raise unauthenticated(f"user {claims.user!r} is revoked", given=True)
        group = self.settings.oidc_admin_group
        admin = bool(known and known.admin) or (group is not None and group in claims.groups)
        return Identity(name=claims.user, admin=admin)
