"""Which URLs a webhook may call (docs/webhooks.md, "Which URLs"). A workflow is written by
a user, and a URL of their choosing would be called from inside the installation's
network: it could reach internal services (SSRF). So a workflow's own webhooks may only
call the hosts the operator listed (``PINGO_WEBHOOK_HOSTS``); the installation's own
(``PINGO_WEBHOOKS``) are the operator's and need no list. A URL may carry a token (in its
path or query, as many receivers want): logs and errors show ``redacted(url)`` only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from shared.config import Settings
    from shared.workflow_spec import Violation

MAX_URL = 2048
MAX_PER_WORKFLOW = 5


def redacted(url: str) -> str:
    """``scheme://host[:port]/…``: what a log line may say of a URL."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unreadable URL>"
    return f"{parts.scheme}://{host}{port}/…"


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a webhook, whatever its host."""
    if len(url) > MAX_URL:
        return f"a webhook URL is at most {MAX_URL} characters"
    if any(c.isspace() or ord(c) < 32 for c in url):
        return "a webhook URL holds no spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        return f"{redacted(url)} is not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{redacted(url)}: a webhook is an http:// or https:// URL with a host"
    if parts.username is not None or parts.password is not None:
        return f"{redacted(url)}: a webhook URL carries no user or password (deliveries are signed instead)"
    return None


def host_allowed(url: str, hosts: list[str]) -> bool:
    """Whether ``url``'s host is one of ``hosts``: ``name`` (any port), ``name:port``, or
    ``.domain`` (it and its subdomains). Names are compared as written, lower-cased: a
    listed name is trusted to resolve where the operator means."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for entry in (h.strip().lower() for h in hosts):
        name, _, wanted = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if wanted and str(port) != wanted:
            continue
        if name.startswith(".") and (host == name[1:] or host.endswith(name)):
            return True
        if host == name.strip("[]"):
            return True
    return False


def refused_webhooks(body: Any, settings: Settings) -> list[Violation]:
    """A 422 violation for each of a submitted workflow's webhooks whose host the operator
    did not list (``PINGO_WEBHOOK_HOSTS``). Their form is the language's to check
    (``shared.workflow_spec``): a URL it refuses is not reported again here."""
    from shared.workflow_spec import Violation

    urls = body.get("webhooks") if isinstance(body, dict) else None
    if not isinstance(urls, list):
        return []
    out = []
    for i, url in enumerate(urls):
        if not isinstance(url, str) or url_problem(url) or host_allowed(url, settings.webhook_hosts):
            continue
        listed = ", ".join(settings.webhook_hosts) if settings.webhook_hosts else "none"
        message = (f"{redacted(url)}: a workflow's webhooks may call only the hosts the operator listed "
                   f"(PINGO_WEBHOOK_HOSTS: {listed})")  # fmt: skip
        out.append(Violation(loc=f"webhooks[{i}]", field="webhooks", message=message))
    return out
