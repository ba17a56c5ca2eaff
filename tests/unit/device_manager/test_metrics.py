"""The device manager's metrics move with what they describe: each Allocate is timed under its resource,
mode and result; the cards follow the health monitor through a fault and its recovery; the ledger's
holders and oversold cards follow each rebuild. Values are read from the exposition text, as a scrape
sees them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
from prometheus_client import generate_latest

from gpustack_operator.device_manager.health import HealthGate
from gpustack_operator.device_manager.metrics import DeviceMetrics
from gpustack_operator.device_manager.monitor import DetectLoop
from gpustack_operator.device_manager.plugin.handler import AllocateError
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.serve import LedgerWriter
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.kube.client import Client
from tests.helpers import eventually, exposed
from tests.unit.device_manager.allocator.builders import (
    EXCLUSIVE,
    SHARED,
    SLICED,
    container,
    device_id,
    group,
    pod,
    sliced_limits,
)
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator
from tests.unit.device_manager.test_ledger import EXCLUSIVE as HELD_EXCLUSIVE
from tests.unit.device_manager.test_ledger import SLICED as HELD_SLICED
from tests.unit.device_manager.test_ledger import pod as held_pod
from tests.unit.device_manager.test_monitor import INVENTORY
from tests.unit.device_manager.test_serve import DevicesApi

ALLOCATE = "gpustack_device_manager_allocate_seconds"


def value(metrics: DeviceMetrics, sample: str, **labels: str) -> float:
    """`sample` summed over the series whose labels include `labels`, as a scrape reads it."""
    return exposed(generate_latest(metrics.registry).decode(), sample, **labels)


def allocations(metrics: DeviceMetrics, resource: str, mode: str, result: str) -> float:
    return value(metrics, f"{ALLOCATE}_count", resource=resource, mode=mode, result=result)


async def test_each_allocate_is_timed_under_its_resource_mode_and_result(tmp_path: Path) -> None:
    metrics = DeviceMetrics()
    cluster = FakeCluster()
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(count=4)]))
    allocator.on_refused = metrics.allocate_refused
    allocator.on_finished = metrics.allocate_finished
    cluster.add(
        pod("whole", container("main", {"nvidia.com/gpu": "1"})),
        pod("share", container("main", {"nvidia.com/gpu.shared": "1"})),
        pod("slice", container("main", sliced_limits(pct="50"))),
    )
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    await allocator.allocate(SHARED, [device_id(1, 160_000)])
    await allocator.allocate(SLICED, [device_id(2, 3)])
    cluster.add(pod("late", container("main", sliced_limits(pct="25")), minute=1))
    with pytest.raises(AllocateError):  # card 0 is held exclusive: a slice of it is refused
        await allocator.allocate(SLICED, [device_id(0, 7)])
    cluster.add(pod("unrecorded", container("main", {"nvidia.com/gpu": "1"}), minute=2))
    cluster.fail_writes = True
    with pytest.raises(AllocateError):  # decided, but the record cannot be written
        await allocator.allocate(EXCLUSIVE, [device_id(3)])

    assert allocations(metrics, "nvidia.com/gpu", "exclusive", "ok") == 1
    assert allocations(metrics, "nvidia.com/gpu.shared", "shared", "ok") == 1
    assert allocations(metrics, "nvidia.com/gpu.sliced", "sliced", "ok") == 1
    assert allocations(metrics, "nvidia.com/gpu.sliced", "sliced", "refused") == 1
    assert allocations(metrics, "nvidia.com/gpu", "exclusive", "error") == 1
    assert value(metrics, f"{ALLOCATE}_count") == 5, "nothing else was observed"
    refusals = value(metrics, "gpustack_device_manager_allocate_refusals_total")
    assert refusals == value(metrics, f"{ALLOCATE}_count", result="refused") == 1
    assert value(metrics, f"{ALLOCATE}_bucket", le="+Inf") == 5
    assert value(metrics, f"{ALLOCATE}_sum") > 0


def cards(metrics: DeviceMetrics) -> tuple[float, float]:
    """(healthy, unhealthy) cards of node a10-0, as exposed."""
    name = "gpustack_device_manager_cards"
    return (
        value(metrics, name, node="a10-0", health="healthy"),
        value(metrics, name, node="a10-0", health="unhealthy"),
    )


async def test_the_cards_follow_the_health_monitor_through_a_fault_and_its_recovery() -> None:
    metrics = DeviceMetrics()
    backend = SimulatedBackend(INVENTORY, "a10-0")
    detect = DetectLoop(
        backend,
        health=HealthGate(2),
        listeners=[lambda groups: metrics.observe_cards("a10-0", groups)],
    )
    await detect.step()
    assert cards(metrics) == (4, 0)
    sick = backend.detect()[1].uuid
    backend.mark_unhealthy(sick)
    await detect.step()
    assert cards(metrics) == (3, 1)
    backend.clear_faults()
    await detect.step()
    assert cards(metrics) == (3, 1), "one healthy reading is not yet a recovery"
    await detect.step()
    assert cards(metrics) == (4, 0)
    backend.remove(sick)
    await detect.step()
    assert cards(metrics) == (3, 0), "a card gone from the bus is no card of the node"


async def test_the_ledger_holders_and_oversold_cards_follow_each_rebuild() -> None:
    metrics = DeviceMetrics()
    api = DevicesApi(cards=2)
    api.pods = [
        held_pod("pair", {"a": [(HELD_SLICED, "GPU-0", 1_000_000)], "b": [(HELD_SLICED, "GPU-0", 900_000)]}),
        held_pod("whole", {"main": [(HELD_EXCLUSIVE, "GPU-1", 1_600_000)]}),
        held_pod("done", {"main": [(HELD_SLICED, "GPU-0", 400_000)]}, phase="Succeeded"),
        held_pod("clash", {"main": [(HELD_SLICED, "GPU-1", 400_000)]}, created="2026-01-01T00:00:01Z"),
        held_pod("cpu"),
    ]
    writer = LedgerWriter(cast(Client, api), "node-a", metrics=metrics)
    task = asyncio.ensure_future(writer.run())
    holders, oversold = "gpustack_device_manager_ledger_holders", "gpustack_device_manager_oversold_cards"
    try:
        writer.kick()
        await eventually(lambda: value(metrics, holders, node="node-a") == 3)
        assert value(metrics, oversold, node="node-a") == 1, "the pair's slices add up to more than GPU-0"
        api.pods = []
        writer.kick()
        await eventually(lambda: value(metrics, holders, node="node-a") == 0)
        assert value(metrics, oversold, node="node-a") == 0
    finally:
        task.cancel()
