"""The manufacturer table and the environment overrides a site uses to re-point it (§5.1)."""

from __future__ import annotations

import pytest

from gpustack_operator.rules.naming.manufacturers import (
    ManufacturerConfigError,
    known_manufacturers,
    manufacturer,
    manufacturers,
)


@pytest.mark.parametrize(
    ("name", "vendor", "resource", "runtime"),
    [
        pytest.param("amd", "1002", "amd.com/gpu", "amd", id="amd"),
        pytest.param("ascend", "19e5", "huawei.com/npu", "ascend", id="ascend"),
        pytest.param("cambricon", "cabc", "cambricon.com/mlu", "cambricon", id="cambricon"),
        pytest.param("hygon", "1d94", "hygon.com/dcu", "hygon", id="hygon"),
        pytest.param("iluvatar", "1e3e", "iluvatar.com/gpu", "iluvatar", id="iluvatar"),
        pytest.param("metax", "9999", "metax-tech.com/gpu", "metax", id="metax"),
        pytest.param("mthreads", "1ed5", "mthreads.com/gpu", "mthreads", id="mthreads"),
        pytest.param("nvidia", "10de", "nvidia.com/gpu", "nvidia", id="nvidia"),
        pytest.param("thead", "1ded", "alibabacloud.com/ppu", "", id="thead-has-no-runtime-class"),
    ],
)
def test_defaults(name: str, vendor: str, resource: str, runtime: str) -> None:
    known = manufacturer(name, environ={})
    assert known is not None
    assert (known.pci_vendor_id, known.pci_class, known.resource_name, known.runtime_class) == (
        vendor,
        "",
        resource,
        runtime,
    )


@pytest.mark.parametrize(
    ("name", "slices", "overcommit"),
    [
        pytest.param("nvidia", 128, True, id="nvidia-128-overcommit"),
        pytest.param("ascend", 63, True, id="ascend-63-overcommit"),
        pytest.param("cambricon", 16, False, id="cambricon-16-partitioned"),
        pytest.param("hygon", 4, False, id="hygon-4-partitioned"),
        pytest.param("mthreads", 16, False, id="mthreads-16-partitioned"),
        pytest.param("metax", 16, False, id="metax-16-partitioned"),
        pytest.param("amd", 0, False, id="amd-not-logically-sliced"),
    ],
)
def test_logical_slicing(name: str, slices: int, overcommit: bool) -> None:
    known = manufacturer(name, environ={})
    assert known is not None
    assert (known.max_logical_slices, known.compute_overcommit) == (slices, overcommit)


def test_known_manufacturers_are_the_nine_sorted() -> None:
    assert known_manufacturers() == (
        "amd",
        "ascend",
        "cambricon",
        "hygon",
        "iluvatar",
        "metax",
        "mthreads",
        "nvidia",
        "thead",
    )
    assert list(manufacturers(environ={})) == list(known_manufacturers())


def test_unknown_manufacturer_is_none() -> None:
    assert manufacturer("acme", environ={}) is None


@pytest.mark.parametrize(
    ("value", "vendor", "klass"),
    [
        pytest.param("10DE", "10de", "", id="vendor-only-lower-cased"),
        pytest.param("0302_10de", "10de", "0302", id="class-and-vendor"),
    ],
)
def test_pci_vendor_override(value: str, vendor: str, klass: str) -> None:
    known = manufacturer("nvidia", environ={"GPUSTACK_NVIDIA_PCI_VENDOR_ID": value})
    assert known is not None
    assert (known.pci_vendor_id, known.pci_class) == (vendor, klass)


def test_resource_and_runtime_overrides_touch_only_their_manufacturer() -> None:
    environ = {
        "GPUSTACK_AMD_ACCELERATABLE_RESOURCE_NAME": "amd.com/mi",
        "GPUSTACK_AMD_ACCELERATABLE_RUNTIME_NAME": "rocm",
    }
    table = manufacturers(environ)
    assert (table["amd"].resource_name, table["amd"].runtime_class) == ("amd.com/mi", "rocm")
    assert (table["nvidia"].resource_name, table["nvidia"].runtime_class) == ("nvidia.com/gpu", "nvidia")


def test_malformed_vendor_override_names_the_variable() -> None:
    with pytest.raises(ManufacturerConfigError, match="GPUSTACK_NVIDIA_PCI_VENDOR_ID"):
        manufacturers({"GPUSTACK_NVIDIA_PCI_VENDOR_ID": "nvidia"})
