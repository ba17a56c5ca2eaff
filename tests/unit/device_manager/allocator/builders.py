"""Builders for the allocator and device-plugin tests: Devices groups, inventories, pods, device IDs."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpustack_operator.api.types.devices import DeviceAllocationMode, DevicesGroup
from gpustack_operator.device_manager.allocator.annotation import (
    ANNOTATION,
    AllocatedCard,
    ContainerAllocation,
    encode,
)
from gpustack_operator.device_manager.plugin.handler import ResourceSpec
from gpustack_operator.device_manager.plugin.ids import format_id
from gpustack_operator.device_manager.plugin.inventory import Inventory

H100 = "h100-80gb-hbm3"
H100_MIB = 81559
EXCLUSIVE = ResourceSpec("nvidia.com/gpu", "nvidia", DeviceAllocationMode.EXCLUSIVE)
SHARED = ResourceSpec("nvidia.com/gpu.shared", "nvidia", DeviceAllocationMode.SHARED)
SLICED = ResourceSpec("nvidia.com/gpu.sliced", "nvidia", DeviceAllocationMode.SLICED)
VISIBILITY = ResourceSpec("device.gpustack.ai/nvidia.visibility", "nvidia", DeviceAllocationMode.VISIBILITY)
_uids = itertools.count()


def uuid(index: int, group: str = H100) -> str:
    return f"GPU-{group}-{index}"


def group(
    *,
    gid: str = H100,
    manufacturer: str = "nvidia",
    count: int = 2,
    memory: int = H100_MIB,
    runtime: str = "12.4",
    max_slices: int = 128,
    unhealthy: Iterable[int] = (),
    first_index: int = 0,
) -> DevicesGroup:
    """A Devices spec group of `count` cards (indexes from `first_index`)."""
    sick = set(unhealthy)
    indexes = range(first_index, first_index + count)
    doc: DevicesGroup = {
        "id": gid,
        "manufacturer": manufacturer,
        "name": gid.upper(),
        "memory": memory,
        "accelerators": [
            {
                "id": uuid(i, gid),
                "index": i,
                "physicalIndexes": [i],
                "topology": {
                    "pciBusId": "",
                    "pciRootId": "",
                    "pciClass": "",
                    "numaAffinity": "0",
                    "cpuAffinity": "",
                },
                "status": {"unhealthy": i in sick},
            }
            for i in indexes
        ],
    }
    if runtime:
        doc["runtimeVersion"] = runtime
    if max_slices:
        doc["acceleratorsFeature"] = {"logicalSliced": {"maxSize": max_slices}}
    return doc


def inventory(*groups: DevicesGroup, manufacturer: str = "nvidia") -> Inventory:
    return Inventory(manufacturer, groups or (group(),))


def device_id(index: int, idx: int = 0, gid: str = H100) -> str:
    return format_id(gid, uuid(index, gid), idx)


def whole(card: int) -> ContainerAllocation:
    """An exclusive allocation of card `card`, as the annotation records it."""
    return ContainerAllocation(
        DeviceAllocationMode.EXCLUSIVE,
        (AllocatedCard(H100, "nvidia", uuid(card), card, 1_600_000),),
        (device_id(card),),
    )


def container(
    name: str = "main", limits: Mapping[str, str] | None = None, env: Sequence[str] = ()
) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "resources": {"limits": dict(limits or {})},
        "env": [{"name": var, "value": "1"} for var in env],
    }


def pod(
    name: str,
    *containers: dict[str, Any],
    minute: int = 0,
    phase: str = "Pending",
    init: Sequence[dict[str, Any]] = (),
    allocations: Mapping[str, ContainerAllocation] | None = None,
    deleting: bool = False,
    uid: str | None = None,
    namespace: str = "ns",
) -> dict[str, Any]:
    """A pod bound to the node, created at 10:<minute>, with its allocation annotation if given."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}-{next(_uids)}",
        "creationTimestamp": f"2026-01-01T10:{minute:02d}:00Z",
        "annotations": {},
    }
    if allocations:
        meta["annotations"][ANNOTATION] = encode(allocations)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    spec: dict[str, Any] = {"nodeName": "node-a", "containers": list(containers) or [container()]}
    if init:
        spec["initContainers"] = list(init)
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def sliced_limits(
    *, count: int = 1, pct: str | None = "25", mib: str | None = None, cores: str | None = None
) -> dict[str, str]:
    """A sliced container's limits as the pod webhook leaves them (units folded from the percentage)."""
    limits = {"nvidia.com/gpu.sliced": str(count)}
    if pct is not None:
        limits["nvidia.com/gpu.sliced.memory-percentage"] = pct
        limits["nvidia.com/gpu.sliced.units"] = str(int(pct) * 16000)
    if mib is not None:
        limits["nvidia.com/gpu.sliced.memory-mib"] = mib
    if cores is not None:
        limits["nvidia.com/gpu.sliced.cores-percentage"] = cores
    return limits
