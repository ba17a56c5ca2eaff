"""The chart's Grafana dashboard queries only metrics the worker and the device manager export."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.metrics import Metrics
from gpustack_operator.controllers.metrics import DomainMetrics
from gpustack_operator.device_manager.metrics import DeviceMetrics

DASHBOARD = Path(__file__).parents[3] / "charts/gpustack-operator/files/dashboards/gpustack-operator.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported() -> set[str]:
    """Every series name the two processes expose (as Prometheus scrapes them)."""
    worker = Metrics()
    DomainMetrics(worker.registry, Cache())
    names: set[str] = set()
    registry: CollectorRegistry
    for registry in (worker.registry, DeviceMetrics().registry):
        for family in registry.collect():
            names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_panel_query_names_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    names = exported()
    unknown = {
        (title, metric)
        for title, expr in queries(dashboard)
        for metric in re.findall(r"\bgpustack_[a-z0-9_]+", expr)
        if metric not in names
    }
    assert not unknown, f"panels query metrics nobody exports: {sorted(unknown)}"
    assert len(queries(dashboard)) >= 10


def test_the_check_itself_catches_a_misspelt_metric() -> None:
    names = exported()
    assert "gpustack_pool_remaining_cards" in names
    assert "gpustack_controller_reconcile_total" in names
    assert "gpustack_pool_remaining_card" not in names
