"""Composition root of `worker-gateway`: the fleet, the API, /metrics, /readyz, /livez, and serving on
the unix socket (default) or over HTTPS (`--secure-port`), until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpustack_operator.apiserver import health, serving
from gpustack_operator.runtime import Supervisor, run_until_signal

from .cluster import ClusterState
from .events import Hub
from .fleet import Fleet
from .http import add_routes
from .options import GatewayOptions

__all__ = ["build_app", "run"]

log = logging.getLogger(__name__)


class _Metrics(Collector):
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def collect(self) -> Iterable[Metric]:
        clusters = GaugeMetricFamily(
            "gpustack_worker_gateway_clusters", "Subscribed clusters by state", labels=["state"]
        )
        for state in ClusterState:
            count = sum(1 for c in self.fleet.clusters.values() if c.state is state)
            clusters.add_metric([str(state)], count)
        yield clusters
        yield GaugeMetricFamily(
            "gpustack_worker_gateway_watchers", "Open watch streams", value=self.fleet.hub.watchers()
        )
        yield CounterMetricFamily(
            "gpustack_worker_gateway_events", "Events published", value=self.fleet.hub.published
        )


def build_app(fleet: Fleet) -> web.Application:
    """The API with /metrics, /livez, /healthz and /readyz (notes name each cluster not synced)."""
    registry = CollectorRegistry()
    registry.register(_Metrics(fleet))

    def unsynced() -> str | None:
        waiting = [f"{c.name} {c.state}" for c in fleet.clusters.values() if not c.synced]
        return ", ".join(sorted(waiting)) or None

    app = health.build_app(
        registry=registry,
        live={"ping": lambda: True},
        ready={"serving": lambda: True},
        notes={"clusters-not-synced": unsynced},
    )
    add_routes(app, fleet)
    return app


async def _serve(app: web.Application, options: GatewayOptions) -> None:
    runner = web.AppRunner(
        app, handle_signals=False, access_log=None, handler_cancellation=True, shutdown_timeout=2.0
    )
    await runner.setup()
    try:
        if options.secure_port:
            hosts = ["localhost", "127.0.0.1"]
            certs = await asyncio.to_thread(serving.load_or_create, options.cert_dir, hosts)
            ctx = serving.ssl_context(certs, "")
            site: web.BaseSite = web.TCPSite(
                runner, options.bind_address, options.secure_port, ssl_context=ctx
            )
            where = f"https://{options.bind_address}:{options.secure_port}"
        else:
            path = options.unix_socket
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_socket():
                path.unlink()
            site = web.UnixSite(runner, str(path))
            where = f"unix:{path}"
        await site.start()
        if not options.secure_port:
            os.chmod(options.unix_socket, 0o660)
        log.info("worker-gateway serving on %s (mode %s)", where, options.mode)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


async def run(options: GatewayOptions) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code."""
    fleet = Fleet(options, Hub())

    async def setup(sup: Supervisor) -> None:
        app = build_app(fleet)

        async def on_cleanup(_: web.Application) -> None:
            await fleet.close()

        app.on_cleanup.append(on_cleanup)
        sup.spawn("gateway-http", lambda: _serve(app, options), restart="on-failure")

    return await run_until_signal(setup)
