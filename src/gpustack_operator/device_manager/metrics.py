"""Prometheus metrics of the device manager: what an admin needs to see of a node's cards without a GPU shell.

The ledger can show a card oversold (its holders were given more than it has: records written by an older
version, or by hand) and Allocate refuses what does not fit or is held in another mode; both are silent to
anyone not reading the node's logs, so they are counted here. So is what a dashboard of the node needs:
how long Allocate takes, and how it ends, per resource (the kubelet waits on it, and the Pod's start with
it), how many of the node's cards are healthy, and how many containers hold cards in the ledger.

The values are set where the state changes, not read at scrape time: Allocate observes its latency as it
returns (`allocate_finished`, a dict lookup and a bucket increment on that path), the detect loop's
listener sets the cards when the detected groups change (`observe_cards`), and the ledger writer sets the
holders and the oversold cards after each rebuild (`observe_ledger`). A collector reading the state at
scrape time would have to cross from the metrics thread into the event loop's objects; these updates are
as cheap and stay on the loop. Labels are bounded: node, resource name, mode, result, reason, health;
never a Pod.

Every series lives in a registry owned by one `DeviceMetrics` (not prometheus-client's global one), so
tests can run several managers in one process. `serve_metrics` exposes it with prometheus-client's own
HTTP server, in a daemon thread: scrapes never wait on the event loop, and the loop never waits on a scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager.plugin.handler import ResourceSpec

log = logging.getLogger(__name__)

__all__ = ["ALLOCATE_BUCKETS", "DeviceMetrics", "parse_bind_address", "serve_metrics"]

ALLOCATE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0)
"""Seconds: a few ms when the pod is found at once, up to the retry window (15 s by default) while no
pending pod matches yet, and the resource server's 60 s timeout."""


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
        self.allocate_seconds = Histogram(
            "gpustack_device_manager_allocate_seconds",
            "Allocate calls by resource, its mode (exclusive, shared, sliced; visibility for the SSH "
            "sidecar's resource) and how they ended, and how long they took: ok (the container got its "
            "cards), refused (a card without room, held in another mode, unknown or unhealthy, no pod "
            "asking: the calls allocate_refusals counts), error (the allocation could not be recorded, "
            "or the call failed otherwise or timed out).",
            ["resource", "mode", "result"],
            buckets=ALLOCATE_BUCKETS,
            registry=self.registry,
        )
        self.cards = Gauge(
            "gpustack_device_manager_cards",
            "This node's detected cards by health as the health monitor reports them (a faulted card "
            "stays unhealthy until it has read healthy enough checks in a row; a card gone from the bus "
            "is not counted).",
            ["node", "health"],
            registry=self.registry,
        )
        self.ledger_holders = Gauge(
            "gpustack_device_manager_ledger_holders",
            "Holder records in this node's ledger: one per Pod container the ledger counts as holding cards.",
            ["node"],
            registry=self.registry,
        )

    def allocate_refused(self, resource: str, reason: str) -> None:
        """One Allocate of `resource` was refused for `reason` (capacity, conflict, other)."""
        self.allocate_refusals.labels(resource, reason).inc()

    def allocate_finished(self, resource: ResourceSpec, result: str, seconds: float) -> None:
        """One Allocate ended with `result` (ok, refused, error) after `seconds`."""
        self.allocate_seconds.labels(resource.name, resource.mode.name.lower(), result).observe(seconds)

    def observe_cards(self, node: str, groups: Sequence[DevicesGroup]) -> None:
        """The cards as just detected (after the health gate)."""
        health = [acc["status"]["unhealthy"] for group in groups for acc in group.get("accelerators") or []]
        self.cards.labels(node, "healthy").set(health.count(False))
        self.cards.labels(node, "unhealthy").set(health.count(True))

    def observe_ledger(self, node: str, holders: int, oversold: int) -> None:
        """The ledger as just rebuilt: its holder records and its oversold cards."""
        self.ledger_holders.labels(node).set(holders)
        self.oversold_cards.labels(node).set(oversold)


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
