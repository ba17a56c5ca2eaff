"""A running device manager's /metrics against what the objects say, on the sandbox.

The A10 node (a10-0, 4 cards) runs `device-manager serve --backend simulated` next to a kubelet stand-in.
Three Pods, one per mode, are admitted by the stand-in through real Allocate calls; each shows once in
the Allocate histogram under its resource and mode, with result ok. The ledger's holders equal the Pod
containers the node's Pods record cards for, and what the ledger rebuilt from the node's Devices and
Pods counts. A card faulted through the sandbox's faults file is counted unhealthy as the node's Devices
object reports it, and healthy again once it heals; the holders drop to none once the Pods are gone.
"""

from __future__ import annotations

from typing import Any

from gpustack_operator.device_manager.ledger import rebuild
from gpustack_operator.device_manager.simulated import Faults
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox import nodeagents
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually, exposed
from tests.integration.test_device_plugin import (
    SLICED_25,
    allocation,
    gpu_pod,
    ledger,
    metric,
    remove_pods,
    running,
    scrape,
    set_sliced_capacity,
)

NODE = "a10-0"
A10_MIB = 23028
ALLOCATE = "gpustack_device_manager_allocate_seconds_count"
MODES = {
    "whole": ("nvidia.com/gpu", "exclusive", {"nvidia.com/gpu": "1"}),
    "share": ("nvidia.com/gpu.shared", "shared", {"nvidia.com/gpu.shared": "1"}),
    "slice": ("nvidia.com/gpu.sliced", "sliced", SLICED_25),
}
HOLDERS = "gpustack_device_manager_ledger_holders"
LONG = 240.0
"""Seconds a convergence may take at most (a limit on a loaded machine, not an expectation)."""


async def node_pods(kube: Client) -> list[dict[str, Any]]:
    return await kube.list(resources.PODS, field_selector=f"spec.nodeName={NODE}")


def recorded_containers(pods: list[dict[str, Any]]) -> int:
    """Containers the node's active Pods record cards for, read from their annotations."""
    return sum(
        1
        for pod in pods
        if pod["status"].get("phase") not in ("Succeeded", "Failed")
        for entry in (allocation(pod) or {}).values()
        if any(group["accelerators"] for group in entry["devices"]["groups"])
    )


async def card_health(kube: Client) -> tuple[int, int]:
    """(healthy, unhealthy) cards as the node's Devices object reports them."""
    devices = await kube.get(resources.DEVICES, NODE)
    health = [
        acc["status"]["unhealthy"]
        for group in (devices.get("spec") or {}).get("groups") or []
        for acc in group.get("accelerators") or []
    ]
    return health.count(False), health.count(True)


async def counted_cards(sandbox: Sandbox) -> tuple[int, int]:
    """(healthy, unhealthy) cards as the device manager's metrics count them."""
    text = await scrape(sandbox, NODE)
    name = "gpustack_device_manager_cards"
    return (
        int(exposed(text, name, node=NODE, health="healthy")),
        int(exposed(text, name, node=NODE, health="unhealthy")),
    )


async def test_the_device_managers_metrics_count_its_allocations_cards_and_holders(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    await set_sliced_capacity(kube, NODE, 4, A10_MIB)
    before = await scrape(sandbox, NODE)
    for name, (_, _, limits) in MODES.items():
        await kube.create(resources.PODS, gpu_pod(name, NODE, limits), namespace)

    async def started() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, MODES)

    await eventually(started, timeout=LONG, what="one Pod of each mode Running")
    after = await scrape(sandbox, NODE)
    for resource, mode, _ in MODES.values():
        labels = {"resource": resource, "mode": mode, "result": "ok"}
        assert exposed(after, ALLOCATE, **labels) - exposed(before, ALLOCATE, **labels) == 1, labels
    assert exposed(after, ALLOCATE) - exposed(before, ALLOCATE) == 3, "no other Allocate, none refused"

    async def holders_settled() -> tuple[float, int, int] | None:
        held = await metric(sandbox, NODE, HOLDERS, node=NODE)
        pods = await node_pods(kube)
        devices = await kube.get(resources.DEVICES, NODE)
        rebuilt = rebuild(devices["spec"], pods)
        return (held, recorded_containers(pods), rebuilt.holders) if held == rebuilt.holders else None

    held, recorded, rebuilt = await eventually(holders_settled, timeout=60, what="holders counted")
    assert held == recorded == rebuilt == 3
    modes = {mode for mode, _ in (await ledger(kube, NODE)).values()}
    assert {1, 2, 3} <= modes, "the ledger holds a card in each mode"

    async def health_agrees() -> tuple[int, int] | None:
        shown, counted = await card_health(kube), await counted_cards(sandbox)
        return counted if counted == shown else None

    assert await eventually(health_agrees, timeout=LONG, what="cards counted as Devices shows") == (4, 0)
    free = [card for card, (mode, _) in (await ledger(kube, NODE)).items() if mode == 0]
    assert free, "a free card to fault"
    faults = nodeagents.faults_file(sandbox.run_dir, NODE)
    Faults(unhealthy={free[0]}).save(faults)
    try:

        async def faulted() -> tuple[int, int] | None:
            counted = await health_agrees()
            return counted if counted == (3, 1) else None

        await eventually(faulted, timeout=LONG, what="the faulted card counted unhealthy, as Devices shows")
    finally:
        Faults().save(faults)

    async def healed() -> tuple[int, int] | None:
        counted = await health_agrees()
        return counted if counted == (4, 0) else None

    await eventually(healed, timeout=LONG, what="the card counted healthy again, as Devices shows")
    await remove_pods(kube, namespace)

    async def released() -> bool:
        return (
            await metric(sandbox, NODE, HOLDERS, node=NODE) == 0
            and recorded_containers(await node_pods(kube)) == 0
        )

    await eventually(released, timeout=LONG, what="no holders once the Pods are gone")
