"""A card held under one group ID stays held after its group is renamed under the running pod.

The device plugin records each card under the group ID of the moment (`a100-sxm4-80gb:<uuid>:0000`).
Turning GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY on, or a driver that spells the product differently, gives
the same card a new group ID; the pods already running still hold it and must not read as free.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.api.types.devices import DeviceAllocationMode, DevicesSpec
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation, encode
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.ledger import rebuild, remaining_of
from gpustack_operator.device_manager.model import Card

EXCLUSIVE, SLICED = DeviceAllocationMode.EXCLUSIVE, DeviceAllocationMode.SLICED
WITH_MEMORY = {"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true"}
A100 = "NVIDIA A100-SXM4-80GB"


def node_cards(product: str = A100) -> list[Card]:
    return [Card("nvidia", product, 81920, f"GPU-{i}", i, minor=i) for i in range(2)]


def spec(cards: list[Card], environ: dict[str, str]) -> DevicesSpec:
    return {"groups": group_cards(cards, environ)}


def allocated_pod(
    name: str, group: str, mode: DeviceAllocationMode, uuid: str, units: int, second: int = 0
) -> dict[str, Any]:
    """A running pod created at ``second`` carrying the annotation the device plugin writes at Allocate."""
    card = AllocatedCard(group, "nvidia", uuid, int(uuid[-1]), units)
    record = ContainerAllocation(mode, (card,), (f"{group}:{uuid}:0000",))
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z",
            "annotations": {ACCELERATOR_ALLOCATED_ANNOTATION: encode({"main": record})},
        },
        "status": {"phase": "Running"},
    }


def ledger(devices: DevicesSpec, pods: list[dict[str, Any]]) -> dict[str, tuple[str, int, int]]:
    """card -> (group, mode, remaining units) as Devices.status says."""
    return {
        entry["id"]: (group["id"], entry["mode"], remaining_of(entry))
        for group in rebuild(devices, pods).status["groups"]
        for entry in group.get("accelerators", [])
    }


@pytest.mark.parametrize(
    ("before", "after", "renamed"),
    [
        pytest.param(
            spec(node_cards(), {}),
            spec(node_cards(), WITH_MEMORY),
            "a100-sxm4-80gb-80g",
            id="memory-suffix-turned-on",
        ),
        pytest.param(
            spec(node_cards(), WITH_MEMORY),
            spec(node_cards(), {}),
            "a100-sxm4-80gb",
            id="memory-suffix-turned-off",
        ),
        pytest.param(
            spec(node_cards(), {}),
            spec(node_cards("NVIDIA A100 SXM4 80GB HBM2e"), {}),
            "a100-sxm4-80gb-hbm2e",
            id="driver-respells-the-product",
        ),
    ],
)
def test_a_held_card_stays_held_after_its_group_is_renamed(
    before: DevicesSpec, after: DevicesSpec, renamed: str
) -> None:
    (old,) = [g["id"] for g in before["groups"]]
    assert old != renamed
    pods = [allocated_pod("whole", old, EXCLUSIVE, "GPU-0", 1_600_000)]
    assert ledger(before, pods)["GPU-0"] == (old, EXCLUSIVE, 0)
    assert ledger(after, pods) == {
        "GPU-0": (renamed, EXCLUSIVE, 0),
        "GPU-1": (renamed, 0, 1_600_000),
    }


def test_a_pod_under_the_new_name_cannot_slice_a_card_held_whole_under_the_old_name() -> None:
    after = spec(node_cards(), WITH_MEMORY)
    whole = allocated_pod("whole", "a100-sxm4-80gb", EXCLUSIVE, "GPU-0", 1_600_000)
    sliced = allocated_pod("sliced-later", "a100-sxm4-80gb-80g", SLICED, "GPU-0", 400_000, second=5)
    result = rebuild(after, [sliced, whole])
    assert result.conflicts == ["ns/sliced-later"]
    assert ledger(after, [sliced, whole])["GPU-0"] == ("a100-sxm4-80gb-80g", EXCLUSIVE, 0)


def test_slices_recorded_under_both_names_add_up_on_the_one_card() -> None:
    after = spec(node_cards(), WITH_MEMORY)
    pods = [
        allocated_pod("old", "a100-sxm4-80gb", SLICED, "GPU-1", 400_000),
        allocated_pod("newer", "a100-sxm4-80gb-80g", SLICED, "GPU-1", 600_000, second=5),
    ]
    assert ledger(after, pods)["GPU-1"] == ("a100-sxm4-80gb-80g", SLICED, 600_000)
