"""The records confirmed against the kubelet's PodResources: a disagreement is found and named."""

from __future__ import annotations

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation
from gpustack_operator.device_manager.allocator.audit import Mismatch, mismatches
from gpustack_operator.device_manager.podresources.model import KubeletPods
from gpustack_operator.rules.naming.resources import is_known_acceleratable_resource_name
from tests.unit.device_manager.allocator.builders import H100, container, pod, uuid


def held(*ids: str) -> ContainerAllocation:
    cards = tuple(AllocatedCard(H100, "nvidia", uuid(i), i, 1_600_000) for i in range(len(ids)))
    return ContainerAllocation(DeviceAllocationMode.EXCLUSIVE, cards, ids)


def test_agreeing_records_uncommitted_ids_init_containers_and_unlisted_pods_are_not_mismatches() -> None:
    pods = [
        pod("agrees", container("a"), container("b"), allocations={"a": held("d0"), "b": held("d1")}),
        pod("in-flight", allocations={"main": held("d2")}),
        pod("with-init", init=[container("setup")], allocations={"setup": held("d3"), "main": held("d3")}),
        pod("not-listed", allocations={"main": held("d9")}),
    ]
    gpu, sidecar = "nvidia.com/gpu", "device.gpustack.ai/nvidia.visibility"
    kubelet = KubeletPods(
        {
            ("ns", "agrees"): {"a": {gpu: ("d0",), sidecar: ("v0",)}, "b": {gpu: ("d1",)}},
            ("ns", "in-flight"): {"main": {}},
            ("ns", "with-init"): {"main": {gpu: ("d3",)}},
        }
    )
    assert mismatches(kubelet, pods, is_known_acceleratable_resource_name) == []


def test_a_container_recorded_with_ids_the_kubelet_gave_another_is_named() -> None:
    pods = [pod("p", container("a"), container("b"), allocations={"a": held("d1")})]
    kubelet = KubeletPods({("ns", "p"): {"a": {"nvidia.com/gpu": ("d0",)}, "b": {"nvidia.com/gpu": ("d1",)}}})
    found = mismatches(kubelet, pods, is_known_acceleratable_resource_name)
    assert found == [Mismatch("ns/p", "a", ("d1",), ("d0",))]
    assert str(found[0]) == "pod=ns/p container=a recorded=d1 kubelet=d0"
