"""The device plugin on the sandbox: real gRPC to a kubelet stand-in, real pods, the real Devices ledger.

Each GPU node runs `device-manager serve --backend simulated` next to a kubelet stand-in; the scheduler
binds pods by the capacity the stand-in publishes from the plugin, the stand-in calls Allocate, kwok
starts the pod once admitted. Tests use their own node where they leave state behind, and remove their
pods before they end so the next test finds free cards.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.device_manager.ledger import rebuild
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.kwok import COMPLETE_ANNOTATION
from gpustack_operator.sandbox.nodeagents import device_manager_name, kubelet_name
from tests.helpers import eventually, exposed

H100_MIB = 81559
SLICED_25 = {
    "nvidia.com/gpu.sliced": "1",
    "nvidia.com/gpu.sliced.memory-percentage": "25",
    "nvidia.com/gpu.sliced.units": "400000",
    "nvidia.com/gpu.sliced.cores-percentage": "100",
}


def gpu_pod(name: str, node: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}],
        },
    }


def allocation(pod: dict[str, Any]) -> dict[str, Any] | None:
    text = (pod["metadata"].get("annotations") or {}).get(ACCELERATOR_ALLOCATED_ANNOTATION)
    return json.loads(text) if text else None


def cards_of(pod: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(card UUID, mode, allocated units) of every card the pod's annotation records."""
    record = allocation(pod) or {}
    return [
        (acc["id"], acc["mode"], acc.get("allocated", 0))
        for entry in record.values()
        for group in entry["devices"]["groups"]
        for acc in group["accelerators"]
    ]


async def set_sliced_capacity(kube: Client, node: str, cards: int, card_mib: int) -> None:
    """What the worker's capacity controller will publish for a sliceable NVIDIA node (contract §5.2)."""
    capacity = {
        "nvidia.com/gpu.sliced.units": str(cards * 1_600_000),
        "nvidia.com/gpu.sliced.cores-percentage": str(cards * 128 * 100),
        "nvidia.com/gpu.sliced.memory-percentage": str(cards * 100),
        "nvidia.com/gpu.sliced.memory-mib": str(cards * card_mib),
    }
    status = {"capacity": capacity, "allocatable": capacity}
    await kube.patch(resources.NODES, node, {"status": status}, subresource="status")


async def running(kube: Client, namespace: str, names: Iterable[str]) -> list[dict[str, Any]] | None:
    pods = [await kube.get(resources.PODS, name, namespace) for name in names]
    for pod in pods:
        assert pod["status"].get("phase") != "Failed", pod["status"].get("message")
    return pods if all(p["status"].get("phase") == "Running" and allocation(p) for p in pods) else None


async def remove_pods(kube: Client, namespace: str) -> None:
    for pod in await kube.list(resources.PODS, namespace):
        await kube.delete(resources.PODS, pod["metadata"]["name"], namespace)

    async def gone() -> bool:
        return not await kube.list(resources.PODS, namespace)

    await eventually(gone, timeout=120, what=f"pods of {namespace} deleted")


async def ledger(kube: Client, node: str) -> dict[str, tuple[int, int]]:
    """Card UUID -> (mode, remaining) from the node's Devices.status."""
    devices = await kube.get(resources.DEVICES, node)
    return {
        acc["id"]: (acc["mode"], acc.get("remaining", 0))
        for group in (devices.get("status") or {}).get("groups", [])
        for acc in group.get("accelerators", [])
    }


async def stand_in_record(sandbox: Sandbox, node: str, namespace: str, pod: str) -> dict[str, Any]:
    assert sandbox.state is not None
    base = urlsplit(sandbox.state.agent_probes[kubelet_name(node)])
    url = f"{base.scheme}://{base.netloc}/pods/{namespace}/{pod}"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        resp.raise_for_status()
        return dict(await resp.json())


async def test_gpu_nodes_show_every_mode_the_plugin_advertises(kube: Client) -> None:
    expected = {
        "h100-0": {"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "80", "nvidia.com/gpu.sliced": "1024",
                   "device.gpustack.ai/nvidia.visibility": "4096"},
        "a10-0": {"nvidia.com/gpu": "4", "nvidia.com/gpu.shared": "40", "nvidia.com/gpu.sliced": "512",
                  "device.gpustack.ai/nvidia.visibility": "2048"},
        "ascend-0": {"huawei.com/npu": "8", "huawei.com/npu.shared": "80", "huawei.com/npu.sliced": "504",
                     "device.gpustack.ai/ascend.visibility": "4096"},
    }  # fmt: skip

    async def advertised() -> bool:
        for node, counts in expected.items():
            status = (await kube.get(resources.NODES, node))["status"]
            for name, count in counts.items():
                assert status["capacity"].get(name) == count, (node, name, status["capacity"].get(name))
                assert status["allocatable"].get(name) == count, (node, name)
        return True

    await eventually(advertised, timeout=60, what="plugin resources on the GPU nodes")


async def test_a_sliced_pod_is_allocated_over_grpc_annotated_and_charged_in_the_ledger(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    node = "h100-1"
    await set_sliced_capacity(kube, node, 8, H100_MIB)
    await kube.create(resources.PODS, gpu_pod("slice", node, SLICED_25), namespace)

    async def started() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, ["slice"])

    (pod,) = await eventually(started, timeout=120, what="sliced pod Running and annotated")
    ((card, mode, units),) = cards_of(pod)
    assert (mode, units) == (3, 400_000)

    async def charged() -> dict[str, tuple[int, int]] | None:
        cards = await ledger(kube, node)
        return cards if cards.get(card) == (3, 1_200_000) else None

    cards = await eventually(charged, timeout=60, what="ledger shows the card Sliced with 1,200,000 left")
    assert {uuid: state for uuid, state in cards.items() if uuid != card} == dict.fromkeys(
        set(cards) - {card}, (0, 1_600_000)
    )
    given = (await stand_in_record(sandbox, node, namespace, "slice"))["containers"]["main"]
    envs = given["nvidia.com/gpu.sliced"]["envs"]
    assert envs["NVIDIA_VISIBLE_DEVICES"] == card
    assert envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{H100_MIB * 25 // 100}m"
    assert envs["CUDA_DEVICE_SM_LIMIT"] == "100"
    assert envs["LIBCUDA_LOG_LEVEL"] == "0"
    mounts = {m["containerPath"]: m["hostPath"] for m in given["nvidia.com/gpu.sliced"]["mounts"]}
    assert mounts["/usr/local/vgpu/libvgpu.so"].endswith("/operator/lib/nvidia/cuda-12/libvgpu.so")
    assert pod["metadata"]["uid"] in mounts["/tmp/vgpu"]

    await remove_pods(kube, namespace)

    async def freed() -> bool:
        return (await ledger(kube, node)).get(card) == (0, 1_600_000)

    await eventually(freed, timeout=60, what="card free again once the pod is gone")


async def test_a_hundred_concurrent_pods_never_share_an_exclusive_card(
    kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    node = "h100-0"
    names = [f"gpu-{i:03d}" for i in range(100)]
    await asyncio.gather(
        *(kube.create(resources.PODS, gpu_pod(n, node, {"nvidia.com/gpu": "1"}), namespace) for n in names)
    )

    async def active(count: int) -> list[dict[str, Any]] | None:
        pods = await kube.list(resources.PODS, namespace)
        failed = [p["status"].get("message") for p in pods if p["status"].get("phase") == "Failed"]
        assert not failed, failed
        busy = [p for p in pods if p["status"].get("phase") == "Running" and allocation(p)]
        return busy if len(busy) == count else None

    async def eight() -> list[dict[str, Any]] | None:
        return await active(8)

    first = await eventually(eight, timeout=300, what="8 pods running, one per card")
    assert len({cards_of(p)[0][0] for p in first}) == 8
    for pod in first[:4]:
        patch = {"metadata": {"annotations": {COMPLETE_ANNOTATION: "true"}}}
        await kube.patch(resources.PODS, pod["metadata"]["name"], patch, namespace=namespace)

    async def refilled() -> list[dict[str, Any]] | None:
        pods = await active(8)
        done = [
            p for p in await kube.list(resources.PODS, namespace) if p["status"].get("phase") == "Succeeded"
        ]
        return pods if pods is not None and len(done) == 4 else None

    second = await eventually(refilled, timeout=300, what="finished pods' cards reused by 4 more pods")
    cards = [card for p in second for card, _, _ in cards_of(p)]
    assert len(cards) == len(set(cards)) == 8
    assert all(mode == 1 for p in second for _, mode, _ in cards_of(p))
    assert len({p["metadata"]["name"] for p in first} | {p["metadata"]["name"] for p in second}) == 12
    await remove_pods(kube, namespace)


def recorded_as_given(pod: dict[str, Any], given: dict[str, Any], resource: str) -> None:
    """Every container is recorded with exactly the IDs the kubelet stand-in allocated it."""
    recorded = allocation(pod) or {}
    assert {c: entry["deviceIDs"] for c, entry in recorded.items()} == {
        c: by_resource[resource]["deviceIDs"] for c, by_resource in given.items() if resource in by_resource
    }, f"{pod['metadata']['name']}: recorded {recorded}, the kubelet gave {given}"


async def test_every_container_of_pods_admitted_together_gets_the_ids_the_kubelet_gave_it(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    node, gpu = "h100-0", {"nvidia.com/gpu": "1"}

    def one_gpu(name: str) -> dict[str, Any]:
        return {"name": name, "image": "busybox", "resources": {"limits": gpu}}

    pods = {name: gpu_pod(name, node, gpu) for name in ("pair-0", "pair-1", "init")}
    for name in ("pair-0", "pair-1"):
        pods[name]["spec"]["containers"] = [one_gpu("a"), one_gpu("b")]
    pods["init"]["spec"]["initContainers"] = [one_gpu("setup")]
    # Created together: same creation second, bound in whatever order the scheduler picks, admitted by
    # the stand-in in random order within a second; the device manager must follow the kubelet.
    await asyncio.gather(*(kube.create(resources.PODS, pod, namespace) for pod in pods.values()))

    async def started() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, pods)

    admitted = await eventually(started, timeout=120, what="two-container and init-container pods Running")
    cards: dict[str, set[str]] = {}
    for pod in admitted:
        name = pod["metadata"]["name"]
        given = (await stand_in_record(sandbox, node, namespace, name))["containers"]
        recorded_as_given(pod, given, "nvidia.com/gpu")
        cards[name] = {card for card, _, _ in cards_of(pod)}
    assert sorted(len(held) for held in cards.values()) == [1, 2, 2], "the app reuses its init's card"
    assert len(set().union(*cards.values())) == 5, "no card is given to two pods"
    await remove_pods(kube, namespace)


async def test_a_dozen_three_container_pods_created_at_once_are_each_recorded_as_the_kubelet_allocated(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    node, shared = "h100-0", {"nvidia.com/gpu.shared": "1"}
    names = [f"trio-{i:02d}" for i in range(12)]
    pods = {name: gpu_pod(name, node, shared) for name in names}
    for pod in pods.values():
        pod["spec"]["containers"] = [
            {"name": c, "image": "busybox", "resources": {"limits": shared}} for c in ("x", "y", "z")
        ]
    await asyncio.gather(*(kube.create(resources.PODS, pod, namespace) for pod in pods.values()))

    async def started() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, pods)

    admitted = await eventually(started, timeout=180, what="twelve three-container shared pods Running")
    tokens: list[str] = []
    for pod in admitted:
        given = (await stand_in_record(sandbox, node, namespace, pod["metadata"]["name"]))["containers"]
        recorded_as_given(pod, given, "nvidia.com/gpu.shared")
        tokens += [t for entry in (allocation(pod) or {}).values() for t in entry["deviceIDs"]]
    assert len(tokens) == len(set(tokens)) == 36, "no shared token recorded twice"
    await remove_pods(kube, namespace)


async def test_killing_the_device_manager_and_starting_it_again_leaves_the_ledger_identical(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    node = "h100-1"
    await set_sliced_capacity(kube, node, 8, H100_MIB)
    workloads = {
        "whole": {"nvidia.com/gpu": "1"},
        "share-a": {"nvidia.com/gpu.shared": "1"},
        "share-b": {"nvidia.com/gpu.shared": "1"},
        "slice": SLICED_25,
    }
    for name, limits in workloads.items():
        await kube.create(resources.PODS, gpu_pod(name, node, limits), namespace)

    async def started() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, workloads)

    await eventually(started, timeout=120, what="four pods of three modes Running")

    async def settled() -> dict[str, Any] | None:
        devices = await kube.get(resources.DEVICES, node)
        pods = await kube.list(resources.PODS, field_selector=f"spec.nodeName={node}")
        expected = rebuild(devices["spec"], pods).status
        return devices if devices.get("status") == expected else None

    before = await eventually(settled, timeout=60, what="ledger rebuilt from the four pods")
    modes = {acc["mode"] for group in before["status"]["groups"] for acc in group["accelerators"]}
    assert {1, 2, 3} <= modes

    await sandbox.restart(device_manager_name(node), kill=True)

    after = await kube.get(resources.DEVICES, node)
    assert after["status"] == before["status"]
    await kube.create(resources.PODS, gpu_pod("after", node, SLICED_25), namespace)

    async def allocated_after() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, ["after"])

    (late,) = await eventually(allocated_after, timeout=120, what="a pod allocated by the restarted manager")
    final = await eventually(settled, timeout=60, what="ledger rebuilt after the restart")
    changed = {card for card, _, _ in cards_of(late)}
    old = {a["id"]: a for g in before["status"]["groups"] for a in g["accelerators"]}
    new = {a["id"]: a for g in final["status"]["groups"] for a in g["accelerators"]}
    assert {card: new[card] for card in new if card not in changed} == {
        card: old[card] for card in old if card not in changed
    }
    assert all(old[card]["mode"] in (0, 3) for card in changed)
    await remove_pods(kube, namespace)


def sliced_percent(pct: int) -> dict[str, str]:
    """A slice of `pct` % of a card, as the pod webhook leaves its limits."""
    return {
        "nvidia.com/gpu.sliced": "1",
        "nvidia.com/gpu.sliced.memory-percentage": str(pct),
        "nvidia.com/gpu.sliced.units": str(pct * 16_000),
    }


async def units_per_card(kube: Client, namespace: str) -> dict[str, int]:
    """Card UUID -> units the namespace's active pods' annotations hold on it."""
    held: dict[str, int] = {}
    for pod in await kube.list(resources.PODS, namespace):
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for card, _, units in cards_of(pod):
            held[card] = held.get(card, 0) + units
    return held


async def ledger_matches(kube: Client, node: str, held: dict[str, int]) -> bool:
    """Every card's ledger remaining is the card minus what its pods hold."""
    cards = await ledger(kube, node)
    return all(remaining == 1_600_000 - held.get(card, 0) for card, (_, remaining) in cards.items())


async def scrape(sandbox: Sandbox, node: str) -> str:
    """The node's device manager's /metrics."""
    assert sandbox.state is not None
    url = sandbox.state.agent_metrics[device_manager_name(node)]
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        resp.raise_for_status()
        return await resp.text()


async def metric(sandbox: Sandbox, node: str, name: str, /, **labels: str) -> float:
    """One sample of the node's device manager, summed over the series whose labels include `labels`."""
    return exposed(await scrape(sandbox, node), name, **labels)


async def test_half_card_slices_spread_over_cards_fill_a_node_exactly_and_the_next_is_refused_at_allocate(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    """Issue 22: six halves used to land on one card; now two per card, and a 17th half is refused."""
    namespace, node = kueue_namespace, "h100-0"
    await set_sliced_capacity(kube, node, 8, H100_MIB)
    names = [f"half-{i:02d}" for i in range(16)]
    for name in names[:6]:  # one by one, each Running before the next
        await kube.create(resources.PODS, gpu_pod(name, node, sliced_percent(50)), namespace)

        async def up(name: str = name) -> list[dict[str, Any]] | None:
            return await running(kube, namespace, [name])

        await eventually(up, timeout=120, what=f"{name} Running")
    held = await units_per_card(kube, namespace)
    assert sorted(held.values()) == [1_600_000] * 3, f"two halves on each of three cards, got {held}"
    await asyncio.gather(  # the rest together
        *(kube.create(resources.PODS, gpu_pod(n, node, sliced_percent(50)), namespace) for n in names[6:])
    )

    async def all_up() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, names)

    await eventually(all_up, timeout=180, what="sixteen halves Running")
    held = await units_per_card(kube, namespace)
    assert held == dict.fromkeys(held, 1_600_000), held
    assert len(held) == 8

    async def booked() -> bool:
        return await ledger_matches(kube, node, held)

    await eventually(booked, timeout=60, what="ledger shows every card exactly full")
    refused_before = await metric(sandbox, node, "gpustack_device_manager_allocate_refusals_total")

    # The scheduler would stop a 17th at the node's .sliced.units; say the node has twice the units so
    # it reaches the kubelet, as a stale capacity or a pod bound by name would.
    await set_sliced_capacity(kube, node, 16, H100_MIB)
    await kube.create(resources.PODS, gpu_pod("seventeenth", node, sliced_percent(50)), namespace)

    async def failed() -> dict[str, Any] | None:
        pod = await kube.get(resources.PODS, "seventeenth", namespace)
        return pod if pod["status"].get("phase") == "Failed" else None

    pod = await eventually(failed, timeout=120, what="the 17th half failed at admission")
    assert pod["status"]["reason"] == "UnexpectedAdmissionError"
    message = pod["status"]["message"]
    assert "has 0 of 1600000 units left" in message, message
    assert "the container needs 800000" in message
    assert "refused rather than oversell the card" in message
    assert allocation(pod) is None, "never recorded"
    assert await ledger_matches(kube, node, held)
    assert await metric(sandbox, node, "gpustack_device_manager_allocate_refusals_total") > refused_before
    await set_sliced_capacity(kube, node, 8, H100_MIB)
    await remove_pods(kube, namespace)


async def test_mixed_slices_created_together_never_oversell_a_card(
    kube: Client, kueue_namespace: str
) -> None:
    namespace, node = kueue_namespace, "h100-1"
    await set_sliced_capacity(kube, node, 8, H100_MIB)
    sizes = [30, 30, 30, 70, 50, 20, 40, 60, 30, 30, 50, 30]
    names = [f"mix-{i:02d}-{pct}" for i, pct in enumerate(sizes)]
    await asyncio.gather(
        *(
            kube.create(resources.PODS, gpu_pod(name, node, sliced_percent(pct)), namespace)
            for name, pct in zip(names, sizes, strict=True)
        )
    )

    async def all_up() -> list[dict[str, Any]] | None:
        return await running(kube, namespace, names)

    await eventually(all_up, timeout=180, what="twelve mixed slices Running")
    held = await units_per_card(kube, namespace)
    assert all(units <= 1_600_000 for units in held.values()), held
    assert sum(held.values()) == sum(sizes) * 16_000

    async def booked() -> bool:
        return await ledger_matches(kube, node, held)

    await eventually(booked, timeout=60, what="ledger remaining = card minus its pods")
    await remove_pods(kube, namespace)


async def test_an_overcommit_recorded_earlier_is_shown_in_the_ledger_and_counted(
    sandbox: Sandbox, kube: Client, kueue_namespace: str
) -> None:
    """Two pods whose annotations (an older version's, or written by hand) give one card 1.5 cards."""
    namespace, node = kueue_namespace, "h100-1"
    card = next(iter(await ledger(kube, node)))
    group = (await kube.get(resources.DEVICES, node))["spec"]["groups"][0]["id"]
    for n in range(2):
        record = {
            "main": {
                "devices": {
                    "groups": [
                        {
                            "id": group,
                            "manufacturer": "nvidia",
                            "accelerators": [{"id": card, "index": 0, "mode": 3, "allocated": 1_200_000}],
                        }
                    ]
                },
                "deviceIDs": [f"{group}:{card}:{n:04d}"],
            }
        }
        legacy = gpu_pod(f"legacy-{n}", node, {})
        legacy["metadata"]["annotations"] = {ACCELERATOR_ALLOCATED_ANNOTATION: json.dumps(record)}
        await kube.create(resources.PODS, legacy, namespace)

    async def shown() -> dict[str, Any] | None:
        devices = await kube.get(resources.DEVICES, node)
        rows = [a for g in devices.get("status", {}).get("groups", []) for a in g["accelerators"]]
        row = next(a for a in rows if a["id"] == card)
        return row if row.get("oversold") else None

    row = await eventually(shown, timeout=60, what="the card shown oversold")
    assert row["remaining"] == -800_000
    assert row["mode"] == 3

    async def counted() -> bool:
        return await metric(sandbox, node, "gpustack_device_manager_oversold_cards") == 1

    await eventually(counted, timeout=30, what="the oversold card counted in the device manager's metrics")
    await remove_pods(kube, namespace)

    async def cleared() -> bool:
        return await metric(sandbox, node, "gpustack_device_manager_oversold_cards") == 0

    await eventually(cleared, timeout=60, what="no card oversold once the pods are gone")
