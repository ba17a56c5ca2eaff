"""The allocation annotation round-trips, and the pieces of a HAMi-core response are computed exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_operator.api.quantity import Quantity
from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.annotation import (
    ANNOTATION,
    AllocatedCard,
    ContainerAllocation,
    decode,
    encode,
    pod_allocations,
    read_allocations,
)
from gpustack_operator.device_manager.allocator.demand import SlicedRequest, sliced_request
from gpustack_operator.device_manager.allocator.responses.nvidia import cuda_major
from gpustack_operator.device_manager.allocator.workdirs import HostPaths, WorkDirs
from gpustack_operator.device_manager.ledger import rebuild
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError
from tests.unit.device_manager.allocator.builders import H100, container, sliced_limits


def test_annotation_round_trips_with_containers_in_name_order() -> None:
    sliced = ContainerAllocation(
        DeviceAllocationMode.SLICED,
        (
            AllocatedCard(H100, "nvidia", "GPU-0", 0, 400_000),
            AllocatedCard("a10", "nvidia", "GPU-9", 3, 400_000),
        ),
        ("h100:GPU-0:0001", "a10:GPU-9:0000"),
    )
    text = encode({"z": sliced, "a": sliced})
    assert text.index('"a"') < text.index('"z"')
    assert decode(text) == {"a": sliced, "z": sliced}
    groups = decode(text)["a"].to_json()["devices"]["groups"]
    assert [g["id"] for g in groups] == [H100, "a10"]


@pytest.mark.parametrize(
    "text",
    ["[]", "{", '{"main": {}}', '{"main": {"devices": {"groups": [{"id": "g"}]}}}',
     '{"main": {"devices": {"groups": [{"id": "g", "manufacturer": "nvidia", "accelerators": [{"id": "u", '
     '"index": 0, "mode": 1}, {"id": "v", "index": 1, "mode": 3}]}]}}}'],
    ids=["list", "truncated", "no-devices", "group-without-manufacturer", "two-modes-in-one-container"],
)  # fmt: skip
def test_annotations_we_did_not_write_are_refused(text: str, caplog: pytest.LogCaptureFixture) -> None:
    bad = {"metadata": {"name": "p", "namespace": "ns", "annotations": {ANNOTATION: text}}}
    with pytest.raises(ValueError, match=r"malformed|one mode"):
        decode(text)
    with pytest.raises(ValueError, match=r"malformed|one mode"):
        read_allocations(bad)
    assert pod_allocations(bad) == {}, "the allocator's reading logs and reads none"
    assert "ignoring allocation pod=ns/p" in caplog.text
    assert rebuild({"groups": []}, [bad]).unreadable == ["ns/p"], "the ledger reads it the same way"


def test_a_pod_without_the_annotation_holds_nothing_whichever_way_it_is_read() -> None:
    bare = {"metadata": {"name": "p", "namespace": "ns"}}
    assert read_allocations(bare) == pod_allocations(bare) == {}
    assert rebuild({"groups": []}, [bare]).unreadable == []


@pytest.mark.parametrize(
    ("version", "major"), [("12.4", 12), ("11.8", 11), ("13", 13), ("", 12), ("abc", 12), ("0.1", 12)],
    ids=["12", "11", "major-only", "unknown", "garbage", "zero"],
)  # fmt: skip
def test_cuda_major_comes_from_the_runtime_version(version: str, major: int) -> None:
    assert cuda_major(version) == major


@pytest.mark.parametrize(
    ("request_", "card", "limit", "units"),
    [(SlicedRequest(memory_percentage=Quantity(25)), 81559, 20389, 400_000),
     (SlicedRequest(memory_percentage=Quantity.parse("12.5")), 23028, 2878, 200_000),
     (SlicedRequest(memory_mib=Quantity(4096)), 40960, 4096, 160_000),
     (SlicedRequest(units=320_000, memory_percentage=Quantity(20)), 81559, 16311, 320_000)],
    ids=["pct-25", "fractional-pct", "mib", "folded-units-win"],
)  # fmt: skip
def test_memory_limit_and_units_per_card(request_: SlicedRequest, card: int, limit: int, units: int) -> None:
    assert request_.memory_limit_mib(card) == limit
    assert request_.card_units(card) == units


def test_a_slice_asking_more_mib_than_the_card_is_refused_for_units_and_limit_alike() -> None:
    over = SlicedRequest(memory_mib=Quantity(99999))
    with pytest.raises(AllocationRefusedError, match="memory-mib 99999 exceeds the card's 40960Mi"):
        over.card_units(40960)
    with pytest.raises(AllocationRefusedError, match="memory-mib 99999 exceeds the card's 40960Mi"):
        over.memory_limit_mib(40960)


def test_a_slice_without_memory_keys_is_refused() -> None:
    with pytest.raises(AllocationRefusedError, match=r"memory-percentage or \.sliced\.memory-mib"):
        SlicedRequest().memory_limit_mib(81559)
    with pytest.raises(AllocationRefusedError):
        SlicedRequest().card_units(81559)


def test_sliced_request_reads_the_containers_limits_and_defaults_cores_to_100() -> None:
    read = sliced_request(container("main", sliced_limits(pct="30")), "nvidia.com/gpu")
    assert (read.units, read.cores_percentage, read.memory_percentage) == (480_000, 100, Quantity(30))
    assert sliced_request(container("m", sliced_limits(cores="40")), "nvidia.com/gpu").cores_percentage == 40


def test_work_dirs_are_fresh_per_container_and_collected_when_the_pod_is_gone(tmp_path: Path) -> None:
    paths = HostPaths(tmp_path / "data", tmp_path / "lock")
    dirs = WorkDirs(paths)
    first = dirs.prepare("uid-1", "main", "tmp/vgpu")
    (first / "cudevshr.cache").write_text("old limits")
    again = dirs.prepare("uid-1", "main", "tmp/vgpu")
    assert again == first
    assert not (first / "cudevshr.cache").exists()
    assert oct(first.stat().st_mode & 0o777) == "0o777"
    dirs.prepare("uid-2", "main", "tmp/vgpu")
    assert dirs.collect(["uid-2"]) == ["uid-1"]
    assert sorted(p.name for p in paths.pods_dir.iterdir()) == ["uid-2"]
