"""Prometheus metrics of the device manager: what an admin needs to see of a node's cards without a GPU shell.

The ledger can show a card oversold (its holders were given more than it has: records written by an older
version, or by hand) and Allocate refuses what does not fit or is held in another mode; both are silent to
anyone not reading the node's logs, so they are counted here. Every series lives in a registry owned by
one `DeviceMetrics` (not prometheus-client's global one), so tests can run several managers in one process.
`serve_metrics` exposes it with prometheus-client's own HTTP server, in a daemon thread: scrapes never wait
on the event loop, and the loop never waits on a scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

log = logging.getLogger(__name__)

__all__ = ["DeviceMetrics", "parse_bind_address", "serve_metrics"]


class DeviceMetrics:
    """The device manager's metric families."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.oversold_cards = Gauge(
            "gpustack_device_manager_oversold_cards",
            "Cards of this node whose holders were given more units than the card has (the ledger shows "
            "them with a negative remaining and oversold: true).",
            ["node"],
            registry=self.registry,
        )
        self.allocate_refusals = Counter(
            "gpustack_device_manager_allocate_refusals",
            "Allocate calls refused: capacity (a card without room for the demand), conflict (a card held "
            "in another mode), other (bad IDs, unhealthy cards, no pod asking).",
            ["resource", "reason"],
            registry=self.registry,
        )


def parse_bind_address(text: str) -> tuple[str, int] | None:
    """`host:port` -> (host, port); `0` turns serving off (None). ValueError for anything else."""
    if text.strip() == "0":
        return None
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port (or 0 to turn metrics off)")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve_metrics(metrics: DeviceMetrics, address: tuple[str, int]) -> Callable[[], None]:
    """Serve `/metrics` on `address`; returns the function that stops the server."""
    server, thread = start_http_server(address[1], address[0], registry=metrics.registry)
    log.info("serving metrics on http://%s:%d/metrics", address[0], server.server_port)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
