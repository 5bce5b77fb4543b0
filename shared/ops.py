"""The operations endpoint of a process: ``/metrics`` (Prometheus text), ``/healthz``
(the process answers) and ``/readyz`` (its store and its broker are reachable).

One per process, on ``PINGO_METRICS_PORT`` (unset: none): ``pingo dev`` runs the five
services in one process and one registry, so one endpoint serves them all; each
``python -m services.<name>`` pod serves its own. Kubernetes probes and Prometheus
scrapes use it (deploy/kubernetes/).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from shared import problems as problem_answers
from shared.bus import Bus
from shared.store import Store

log = logging.getLogger(__name__)
# A readiness probe must answer before the kubelet's own timeout (1 s by default).
PING_TIMEOUT = 0.8


async def problems(store: Store, bus: Bus) -> list[str]:
    """What is not reachable now: empty when ready."""
    down: list[str] = []
    try:
        await asyncio.wait_for(store.client.admin.command("ping"), PING_TIMEOUT)
    except Exception as exc:  # any failure means not ready; the reason is reported
        down.append(f"store: {type(exc).__name__}")
    # The in-process bus has no ``available``: it is always there.
    if not getattr(bus, "available", True):
        down.append("broker: not connected")
    return down


def ops_app(store: Store, bus: Bus) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(_: web.Request) -> web.Response:
        down = await problems(store, bus)
        if not down:
            return web.json_response({"ready": True})
        # RFC 9457 problem body, naming each component that is down.
        return web.json_response(
            {"type": "about:blank", "title": "Not ready", "status": 503, "detail": "; ".join(down), "down": down},
            status=503,
            content_type="application/problem+json",
        )

    # No such route, wrong method: problem documents too, as on every Pingo endpoint.
    app = web.Application(middlewares=[problem_answers.middleware])
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


class OpsServer:
    name = "ops"

    def __init__(self, store: Store, bus: Bus, host: str, port: int) -> None:
        self.runner = web.AppRunner(ops_app(store, bus), access_log=None)
        self.host, self.port = host, port

    async def start(self) -> None:
        await self.runner.setup()
        await web.TCPSite(self.runner, self.host, self.port).start()
        log.info("metrics and probes on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        await self.runner.cleanup()
