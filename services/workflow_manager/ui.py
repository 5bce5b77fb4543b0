"""The web view: four pages served by the gateway, same origin as the API they read.

No build step: each page is a static HTML file under ``static/`` with its own script; the
scripts read the JSON API (``/api/v1/...``) and redraw. Front-end libraries are vendored
in ``static/vendor/`` with their licences. Pages are not API routes: they are left out of
the OpenAPI document. The page scripts run under a strict Content-Security-Policy (no
inline script, nothing from another origin), so a value shown on a page cannot run.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parent / "static"
ASSETS = "/ui"  # where the scripts, styles and vendored libraries are served
PAGES = {"/": "workflows", "/workflows/{id}": "workflow", "/storage": "storage", "/history": "history"}
POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def page(name: str) -> web.RequestHandler:
    path = STATIC / f"{name}.html"

    async def serve(_: web.Request) -> web.StreamResponse:
        return web.FileResponse(path, headers={**SECURITY_HEADERS, "Content-Type": "text/html; charset=utf-8"})

    return serve


def install(app: web.Application) -> None:
    for route, name in PAGES.items():
        app.router.add_get(route, page(name))
    app.router.add_static(ASSETS, STATIC, append_version=False)


def is_page(path: str) -> bool:
    """Whether a route belongs to the web view rather than the API."""
    return path in PAGES or path.startswith(ASSETS + "/") or path == ASSETS
