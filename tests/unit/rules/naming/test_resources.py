"""Every accelerator mode's resource name, and which names count as a card request (§5.2, §7.8)."""

from __future__ import annotations

import pytest

from gpustack_operator.rules.environ import FrozenEnviron
from gpustack_operator.rules.naming.resources import (
    ResourceKind,
    acceleratable_bases,
    acceleratable_resource_name,
    credits_resource_name,
    is_acceleratable_credits_resource_name,
    is_known_acceleratable_resource_name,
    split_acceleratable_resource_name,
)


@pytest.mark.parametrize(
    ("kind", "want"),
    [
        pytest.param(ResourceKind.EXCLUSIVE, "nvidia.com/gpu", id="exclusive"),
        pytest.param(ResourceKind.SHARED, "nvidia.com/gpu.shared", id="shared"),
        pytest.param(ResourceKind.SLICED, "nvidia.com/gpu.sliced", id="sliced"),
        pytest.param(ResourceKind.SLICED_UNITS, "nvidia.com/gpu.sliced.units", id="sliced-units"),
        pytest.param(
            ResourceKind.SLICED_CORES_PERCENTAGE,
            "nvidia.com/gpu.sliced.cores-percentage",
            id="cores-percentage",
        ),
        pytest.param(
            ResourceKind.SLICED_MEMORY_PERCENTAGE,
            "nvidia.com/gpu.sliced.memory-percentage",
            id="memory-percentage",
        ),
        pytest.param(ResourceKind.SLICED_MEMORY_MIB, "nvidia.com/gpu.sliced.memory-mib", id="memory-mib"),
        pytest.param(ResourceKind.VISIBILITY, "device.gpustack.ai/nvidia.visibility", id="visibility"),
    ],
)
def test_nvidia_resource_names(kind: ResourceKind, want: str) -> None:
    assert acceleratable_resource_name("nvidia", kind, environ={}) == want


def test_resource_names_follow_the_resource_override() -> None:
    environ = {"GPUSTACK_NVIDIA_ACCELERATABLE_RESOURCE_NAME": "example.com/card"}
    assert acceleratable_resource_name("nvidia", ResourceKind.SHARED, environ) == "example.com/card.shared"
    assert is_known_acceleratable_resource_name("example.com/card.sliced", environ)
    assert not is_known_acceleratable_resource_name("nvidia.com/gpu", environ)


def test_unknown_manufacturer_has_no_resource() -> None:
    assert acceleratable_resource_name("acme", ResourceKind.EXCLUSIVE, environ={}) is None
    assert acceleratable_resource_name("acme", ResourceKind.VISIBILITY, environ={}) is None


@pytest.mark.parametrize(
    ("name", "known"),
    [
        pytest.param("nvidia.com/gpu", True, id="exclusive"),
        pytest.param("nvidia.com/gpu.shared", True, id="shared"),
        pytest.param("nvidia.com/gpu.sliced", True, id="sliced"),
        pytest.param("nvidia.com/gpu.sliced.units", True, id="sliced-units"),
        pytest.param("huawei.com/npu.shared", True, id="other-manufacturer"),
        pytest.param("nvidia.com/gpu.sliced.cores-percentage", False, id="cores-percentage-is-not-a-card"),
        pytest.param("nvidia.com/gpu.sliced.memory-mib", False, id="memory-mib-is-not-a-card"),
        pytest.param("credits.gpustack.ai/nvidia", False, id="credits"),
        pytest.param("device.gpustack.ai/nvidia.visibility", False, id="visibility"),
        pytest.param("nvidia.com/gpu.shared.shared", False, id="double-suffix"),
        pytest.param("example.com/gpu", False, id="unknown-base"),
        pytest.param("cpu", False, id="cpu"),
    ],
)
def test_is_known_acceleratable_resource_name(name: str, known: bool) -> None:
    assert is_known_acceleratable_resource_name(name, environ={}) is known


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param(
            "nvidia.com/gpu.sliced.units", ("nvidia.com/gpu", ResourceKind.SLICED_UNITS), id="units"
        ),
        pytest.param(
            "amd.com/gpu.sliced.memory-percentage",
            ("amd.com/gpu", ResourceKind.SLICED_MEMORY_PERCENTAGE),
            id="memory-percentage",
        ),
        pytest.param("amd.com/gpu", ("amd.com/gpu", ResourceKind.EXCLUSIVE), id="exclusive"),
        pytest.param("memory", None, id="not-an-accelerator"),
    ],
)
def test_split_names_base_and_kind(name: str, want: tuple[str, ResourceKind] | None) -> None:
    assert split_acceleratable_resource_name(name, environ={}) == want


def test_credits_resource_name() -> None:
    assert credits_resource_name("nvidia") == "credits.gpustack.ai/nvidia"


@pytest.mark.parametrize(
    ("name", "credits"),
    [
        pytest.param("credits.gpustack.ai/nvidia", True, id="nvidia"),
        pytest.param("credits.gpustack.ai/amd", True, id="amd"),
        pytest.param("credits.gpustack.ai/acme", False, id="unknown-manufacturer"),
        pytest.param("credits.gpustack.ai/", False, id="bare-prefix"),
        pytest.param("nvidia.com/gpu", False, id="device-resource"),
        pytest.param("cpu", False, id="cpu"),
        pytest.param("credits", False, id="word-credits"),
    ],
)
def test_is_acceleratable_credits_resource_name(name: str, credits: bool) -> None:
    assert is_acceleratable_credits_resource_name(name) is credits


def test_a_frozen_environment_splits_every_name_as_the_live_one_does() -> None:
    environ = {"GPUSTACK_THEAD_ACCELERATABLE_RESOURCE_NAME": "example.com/ppu"}
    names = [base + kind.value for base in acceleratable_bases(environ) for kind in ResourceKind]
    names += ["nvidia.com/gpu.sliced.units.sliced", "cpu", "nvidia.com/gpux", "alibabacloud.com/ppu"]
    for name in names:
        assert split_acceleratable_resource_name(name, FrozenEnviron(environ)) == (
            split_acceleratable_resource_name(name, environ)
        ), name
