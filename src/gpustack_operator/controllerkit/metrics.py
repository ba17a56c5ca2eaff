"""Prometheus metrics of the controllers, their work queues, the informers, leader election and webhooks.

An operator that silently stops converging looks healthy from outside; these series answer "is it
reconciling, how often does it fail, is work piling up, are the watches relisting, who leads, how many
API calls does it make, how much CPU, memory and garbage collection does it cost" (the request counts fed
by the client's request observer, kube.client.RequestObserver). Every
metric lives in a `CollectorRegistry` owned by one `Metrics` object (not prometheus-client's global
registry), so several managers in one test process never collide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import GC_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gpustack_operator.runtime import QueueObserver

__all__ = ["Metrics", "RelistSource"]

LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

RelistSource = Callable[[], Iterable[tuple[str, int]]]
"""Yields (informer name, relists so far) at scrape time."""


class Metrics:
    """The metric families; `queue_observer(name)` adapts a WorkQueue's hooks to them."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # The process's CPU, memory and garbage collections (`process_*`, `python_gc_*`), as every
        # Prometheus exporter gives them: the collectors read the process at scrape time.
        for collector in (PROCESS_COLLECTOR, GC_COLLECTOR):
            r.register(collector)
        self.reconciles = Counter(
            "gpustack_controller_reconcile",
            "Reconciles by controller and result.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "gpustack_controller_reconcile_errors", "Reconciles that raised.", ["controller"], registry=r
        )
        self.reconcile_time = Histogram(
            "gpustack_controller_reconcile_time_seconds",
            "Time per reconcile.",
            ["controller"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.depth = Gauge("gpustack_workqueue_depth", "Keys waiting in a work queue.", ["name"], registry=r)
        self.adds = Counter("gpustack_workqueue_adds", "Keys added to a work queue.", ["name"], registry=r)
        self.retries = Counter("gpustack_workqueue_retries", "Rate-limited requeues.", ["name"], registry=r)
        self.queue_latency = Histogram(
            "gpustack_workqueue_queue_duration_seconds",
            "Time a key waits before a worker takes it.",
            ["name"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.work_duration = Histogram(
            "gpustack_workqueue_work_duration_seconds",
            "Time from a worker taking a key to done.",
            ["name"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.leader = Gauge(
            "gpustack_leader_election_status", "1 while this process holds the lease.", ["name"], registry=r
        )
        self.webhook_latency = Histogram(
            "gpustack_webhook_latency_seconds",
            "Time to answer an admission review, by webhook and outcome (allowed, denied, error: a review"
            " the hook could not decide, denied all the same); the _count is the reviews answered.",
            ["webhook", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.requests = Counter(
            "gpustack_rest_client_requests",
            "API requests sent, by method (WATCH for a watch), resource and response code (0: none came).",
            ["method", "resource", "code"],
            registry=r,
        )

    def observe_review(self, webhook: str, outcome: str, seconds: float) -> None:
        """An apiserver.webhooks.server.ReviewObserver: one admission review answered."""
        self.webhook_latency.labels(webhook, outcome).observe(seconds)

    def observe_request(self, method: str, resource: str, code: int) -> None:
        """A kube.client.RequestObserver: count one request."""
        self.requests.labels(method, resource, str(code)).inc()

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        self.reconciles.labels(controller, result).inc()
        self.reconcile_time.labels(controller).observe(seconds)
        if result in ("error", "terminal"):
            self.reconcile_errors.labels(controller).inc()

    def queue_observer(self, name: str) -> QueueObserver:
        return _QueueObserver(self, name)

    def watch_relists(self, source: RelistSource) -> None:
        """Export informer relist counters, read from `source` at every scrape."""
        self.registry.register(_RelistCollector(source))


class _QueueObserver:
    def __init__(self, metrics: Metrics, name: str) -> None:
        self._depth = metrics.depth.labels(name)
        self._adds = metrics.adds.labels(name)
        self._retries = metrics.retries.labels(name)
        self._latency = metrics.queue_latency.labels(name)
        self._work = metrics.work_duration.labels(name)

    def added(self) -> None:
        self._adds.inc()

    def depth(self, depth: int) -> None:
        self._depth.set(depth)

    def queue_latency(self, seconds: float) -> None:
        self._latency.observe(seconds)

    def work_duration(self, seconds: float) -> None:
        self._work.observe(seconds)

    def retried(self) -> None:
        self._retries.inc()


class _RelistCollector(Collector):
    def __init__(self, source: RelistSource) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "gpustack_informer_relists",
            "Lists an informer made after its first (after 410 Gone).",
            labels=["informer"],
        )
        for name, count in self._source():
            family.add_metric([name], count)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())
