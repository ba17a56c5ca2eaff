"""The worker's domain metrics: what each pool offers now, and how the per-card AdmissionCheck decides.

Why this module exists: controllerkit's metrics say whether the controllers run (reconciles, queues,
relists); an admin watching a GPU fleet asks other questions: how many cards, shares and slices each pool
has free right now, and whether the admission check says Ready or Retry, why, and how long a decision
takes. Both live in the manager's registry, so they are scraped from the same `/metrics`.

- Pools are read from the cached InstanceTypes at scrape time (the status the InstanceType reconciler
  writes from the ledgers, the same numbers `kubectl get instancetypes` shows), so a scrape costs one pass
  over the types and nothing is updated on the hot path. One series per pool (the InstanceType's name) and
  view, the view's unit in the name: `cards` (exclusive), `shares` (tenths of a card), `slices`
  (hundredths), `cpus` (a CPU pool). `gpustack_pool_active` is 1 while the type's phase is Active.
- Decisions are observed by the check's reconciler (controllers.node_devices_admission_check) around the
  placement: one histogram by result (Ready, Retry) and reason (`fits`; `no-room`: some Pod fits on no node
  of the assigned flavors; `no-cards`: those nodes report no card at all), whose `_count` counts them.
Labels are bounded: pool names and fixed words, never a Pod or Workload name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.controllerkit.cache import Cache, NotCachedError
from gpustack_operator.kube.resources import INSTANCE_TYPES

__all__ = ["DECISION_BUCKETS", "VIEWS", "DomainMetrics", "PoolCollector"]

VIEWS: Final = (
    ("accelerator", "cards"),
    ("acceleratorShared", "shares"),
    ("acceleratorSliced", "slices"),
    ("cpu", "cpus"),
)
"""(InstanceType status key, unit in the metric names) of each view."""
FIELDS: Final = (
    ("capacity", "capacity", "everything the pool has"),
    ("remaining", "remaining", "what is free now"),
    ("onceMaxRequest", "once_max_request", "the largest single request that fits now"),
)
"""(view field, metric name part, what it says) of each number of a view."""
DECISION_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class PoolCollector(Collector):
    """Each pool's views, from the InstanceTypes in the cache at scrape time."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache

    def _types(self) -> list[JSONObj]:
        try:
            return self._cache.list(INSTANCE_TYPES)
        except NotCachedError:  # no controller watches InstanceTypes in this process: no pools to tell
            return []

    def collect(self) -> Iterator[Metric]:
        families = {
            (key, field): GaugeMetricFamily(
                f"gpustack_pool_{part}_{unit}", f"Pool {what}, in {unit}.", labels=["pool"]
            )
            for key, unit in VIEWS
            for field, part, what in FIELDS
        }
        active = GaugeMetricFamily(
            "gpustack_pool_active", "1 while the pool's InstanceType is Active.", labels=["pool"]
        )
        for it in self._types():
            name, status = str(it["metadata"]["name"]), it.get("status") or {}
            active.add_metric([name], 1.0 if status.get("phase") == "Active" else 0.0)
            for key, _ in VIEWS:
                view = status.get(key)
                if not isinstance(view, dict):
                    continue
                for field, _, _ in FIELDS:
                    value = _number(view.get(field))
                    if value is not None:
                        families[(key, field)].add_metric([name], value)
        yield active
        yield from families.values()

    def describe(self) -> Iterator[Metric]:
        return iter(())


def _number(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(Quantity.parse(text).exact)
    except ValueError:
        return None


class DomainMetrics:
    """The worker's domain metric families, registered in the manager's registry."""

    def __init__(self, registry: CollectorRegistry, cache: Cache) -> None:
        registry.register(PoolCollector(cache))
        self.decisions = Histogram(
            "gpustack_admission_check_decision_seconds",
            "Time to decide one workload of the gpustack-node-devices AdmissionCheck, by result (Ready, "
            "Retry) and reason (fits, no-room, no-cards); the _count is the decisions made.",
            ["result", "reason"],
            buckets=DECISION_BUCKETS,
            registry=registry,
        )

    def decided(self, result: str, reason: str, seconds: float) -> None:
        """A node_devices_admission_check.DecisionObserver."""
        self.decisions.labels(result, reason).observe(seconds)
