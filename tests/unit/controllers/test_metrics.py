"""The worker's domain metrics as Prometheus scrapes them: pools from the cached InstanceTypes, decisions."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.watches import reads
from gpustack_operator.controllers.metrics import DomainMetrics
from gpustack_operator.controllers.node_devices_admission_check import decision_reason
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.rules.admission.placement import Plan
from tests.unit.controllerkit.fakes import FakeInformers


def view(once: str, remaining: str, capacity: str) -> dict[str, str]:
    return {"onceMaxRequest": once, "remaining": remaining, "capacity": capacity}


def it(name: str, **status: object) -> JSONObj:
    return {"metadata": {"name": name}, "status": status}


def metrics_over(*types: JSONObj, watched: bool = True) -> tuple[CollectorRegistry, DomainMetrics]:
    informers, cache, registry = FakeInformers(), Cache(), CollectorRegistry()
    if watched:
        cache.register(reads(INSTANCE_TYPES), informers.informer(INSTANCE_TYPES))
    for obj in types:
        informers.informer(INSTANCE_TYPES).add(obj)
    return registry, DomainMetrics(registry, cache)


def scrape(*types: JSONObj, watched: bool = True) -> str:
    return generate_latest(metrics_over(*types, watched=watched)[0]).decode()


def test_each_pool_view_is_a_series_in_its_unit_and_an_inactive_pool_says_so() -> None:
    text = scrape(
        it(
            "h100",
            phase="Active",
            accelerator=view("8", "12", "16"),
            acceleratorShared=view("80", "120", "160"),
            acceleratorSliced=view("100", "1250", "1600"),
        ),
        it("cpu", phase="Inactive", cpu=view("96", "1500m", "192")),
        it("new"),  # no status yet: active 0, no views
    )
    lines = set(text.splitlines())
    for line in (
        'gpustack_pool_capacity_cards{pool="h100"} 16.0',
        'gpustack_pool_remaining_cards{pool="h100"} 12.0',
        'gpustack_pool_once_max_request_cards{pool="h100"} 8.0',
        'gpustack_pool_remaining_shares{pool="h100"} 120.0',
        'gpustack_pool_remaining_slices{pool="h100"} 1250.0',
        'gpustack_pool_remaining_cpus{pool="cpu"} 1.5',
        'gpustack_pool_active{pool="h100"} 1.0',
        'gpustack_pool_active{pool="cpu"} 0.0',
        'gpustack_pool_active{pool="new"} 0.0',
    ):
        assert line in lines, line
    assert 'gpustack_pool_remaining_cards{pool="cpu"}' not in text


def test_a_process_without_instancetypes_cached_exports_no_pool() -> None:
    text = scrape(watched=False)
    assert 'pool="' not in text


def test_decisions_are_counted_by_result_and_reason() -> None:
    registry, metrics = metrics_over()
    metrics.decided("Ready", "fits", 0.002)
    metrics.decided("Retry", "no-room", 0.004)
    metrics.decided("Retry", "no-room", 0.001)
    text = generate_latest(registry).decode()
    assert 'gpustack_admission_check_decision_seconds_count{reason="no-room",result="Retry"} 2.0' in text
    assert 'gpustack_admission_check_decision_seconds_count{reason="fits",result="Ready"} 1.0' in text


def test_the_reason_of_a_decision() -> None:
    assert decision_reason(Plan(cards={}, pods=()), {}) == "fits"
    assert decision_reason(None, {"node-a": {}}) == "no-cards"
    assert decision_reason(None, {}) == "no-cards"
    assert decision_reason(None, {"node-a": {"card-0": object()}}) == "no-room"  # type: ignore[dict-item]
