"""The web view: four pages served by the gateway, same origin as the API they read.

No build step: every page is the one shell ``static/page.html`` with the page's own script
(``static/<page>.js``, plus the vendored libraries it draws with); the scripts read the JSON
API (``/api/v1/...``) and redraw (docs/web-ui.md). Front-end libraries are vendored
in ``static/vendor/`` with their licences. Pages are not API routes: they are left out of
the OpenAPI document. The page scripts run under a strict Content-Security-Policy (no
inline script, nothing from another origin), so a value shown on a page cannot run.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).parent / "static"
STATIC_ROOT = STATIC.resolve()
ASSETS = "/ui"  # where the scripts, styles and vendored libraries are served
PAGES = {"/": "workflows", "/workflows/{id}": "workflow", "/storage": "storage", "/history": "history"}
TITLES = {"workflows": "Workflows", "workflow": "Workflow", "storage": "Storage", "history": "History"}
LIBRARIES = {"workflow": ["dagre.min.js"], "storage": ["uPlot.iife.min.js"], "history": ["uPlot.iife.min.js"]}
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
    scripts = "\n  ".join(f'<script src="{ASSETS}/vendor/{lib}" defer></script>' for lib in LIBRARIES.get(name, []))
    html = (STATIC / "page.html").read_text().format(title=TITLES[name], page=name, scripts=scripts)

    async def serve(_: web.Request) -> web.StreamResponse:
        return web.Response(text=html, content_type="text/html", charset="utf-8", headers=SECURITY_HEADERS)

    return serve


async def asset(request: web.Request) -> web.StreamResponse:
    """A file of ``static/``. A missing one is an HTTP 404 raised here, which the gateway
    answers as a problem document: aiohttp's own static route answers it from the file
    response with an empty body, past every middleware."""
    try:
        path = (STATIC / request.match_info["path"]).resolve()
        found = path.is_relative_to(STATIC_ROOT) and path.is_file()
    except (OSError, ValueError):  # a NUL in the path, a name too long
        found = False
    if not found:
        raise web.HTTPNotFound()
    return web.FileResponse(path)


def install(app: web.Application) -> None:
    for route, name in PAGES.items():
        app.router.add_get(route, page(name))
    app.router.add_get(ASSETS + "/{path:.+}", asset)


def is_page(route: str) -> bool:
    """Whether a route (its pattern, e.g. ``/workflows/{id}``) belongs to the web view."""
    return route in PAGES or route == ASSETS or route.startswith(ASSETS + "/")


def serves_page(request: web.Request) -> bool:
    """Whether ``request`` was routed to a page or an asset of the web view. Judged by the
    route it matched, not by its path: ``/workflows/wf-1`` is the page ``/workflows/{id}``,
    while a path that matched no route (a 404) is not a page."""
    resource = request.match_info.route.resource
    return resource is not None and is_page(resource.canonical)
