"""The four `.sliced.*` node capacities: computed from the Devices groups, presence-gated, stale removed."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.rules.capacity.nodes import sliced_capacities

H100_MIB, H20_MIB = 81559, 97871


def group(mfr: str, cards: int, mib: int, slices: int, overcommit: bool | None = None) -> DevicesGroup:
    feature: dict[str, Any] = {"maxSize": slices}
    if overcommit is not None:
        feature["coresPercentageOvercommit"] = overcommit
    return {
        "id": f"{mfr}-{mib}",
        "manufacturer": mfr,
        "name": "x",
        "memory": mib,
        "accelerators": [{"id": f"c{i}"} for i in range(cards)],  # type: ignore[typeddict-item]
        "acceleratorsFeature": {"logicalSliced": feature},  # type: ignore[typeddict-item]
    }


NV, MLU = "nvidia.com/gpu.sliced", "cambricon.com/mlu.sliced"


@pytest.mark.parametrize(
    ("capacity", "groups", "expected"),
    [
        pytest.param(
            {NV: "1024"},
            [group("nvidia", 8, H100_MIB, 128, True)],
            {f"{NV}.units": "12800000", f"{NV}.cores-percentage": "102400",
             f"{NV}.memory-percentage": "800", f"{NV}.memory-mib": str(8 * H100_MIB)},
            id="eight-h100-overcommit-compute",
        ),
        pytest.param(
            {NV: "256"},
            [group("nvidia", 1, H100_MIB, 128), group("nvidia", 1, H20_MIB, 128)],
            {f"{NV}.units": "3200000", f"{NV}.cores-percentage": "25600",
             f"{NV}.memory-percentage": "200", f"{NV}.memory-mib": str(H100_MIB + H20_MIB)},
            id="mixed-vram-models-sum-per-model",
        ),
        pytest.param(
            {MLU: "32"},
            [group("cambricon", 2, 24576, 16)],
            {f"{MLU}.units": "3200000", f"{MLU}.cores-percentage": "200",
             f"{MLU}.memory-percentage": "200", f"{MLU}.memory-mib": "49152"},
            id="partitioned-compute-caps-cores-at-100-per-card",
        ),
        pytest.param(
            {NV: "0", f"{NV}.units": "1600000", f"{NV}.memory-mib": "5"},
            [group("nvidia", 1, H100_MIB, 128)],
            {f"{NV}.units": None, f"{NV}.memory-mib": None},
            id="sliced-gone-stale-removed",
        ),
        pytest.param(
            {NV: "128"}, [group("nvidia", 1, H100_MIB, 0)], {}, id="model-that-cannot-slice-gets-none"
        ),
        pytest.param({}, [group("acme", 1, 1, 8)], {}, id="unknown-manufacturer-ignored"),
        pytest.param(
            {NV: "128", f"{NV}.units": "1600000", f"{NV}.cores-percentage": "12800",
             f"{NV}.memory-percentage": "100", f"{NV}.memory-mib": str(H100_MIB)},
            [group("nvidia", 1, H100_MIB, 128)],
            {},
            id="up-to-date-node-needs-no-write",
        ),
        pytest.param(
            {NV: "128", f"{NV}.units": "1600k", f"{NV}.cores-percentage": "12800",
             f"{NV}.memory-percentage": "100", f"{NV}.memory-mib": str(H100_MIB)},
            [group("nvidia", 1, H100_MIB, 128)],
            {},
            id="server-canonical-form-counts-as-equal",
        ),
        pytest.param(
            {NV: "garbage"}, [group("nvidia", 1, H100_MIB, 128)], {}, id="malformed-capacity-is-absent"
        ),
    ],
)  # fmt: skip
def test_sliced_capacities(
    capacity: dict[str, str], groups: list[DevicesGroup], expected: dict[str, str | None]
) -> None:
    assert sliced_capacities(capacity, groups) == expected
