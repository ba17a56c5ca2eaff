"""The device manager's reports and ledger on a real control plane, with the simulated backend.

Each test gets its own Node (no status, so the scheduler never places anything on it, and no kwok
management, so the pods bound to it stay put) and an inventory file giving it four A10s.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from gpustack_operator.api import crds
from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.device_manager import ledger
from gpustack_operator.device_manager.monitor import DetectLoop
from gpustack_operator.device_manager.reporting import Reporter
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import conditions
from tests.helpers import eventually

SYSTEM_NAMESPACE = "gpustack-system"
KEY = "acceleratable.feature.gpustack.ai/nvidia-a10"
EXCLUSIVE, SLICED = 1, 3


async def install_devices_crd(kube: Client) -> None:
    (crd,) = [
        c for c in crds.custom_resource_definitions() if c["metadata"]["name"] == "devices.worker.gpustack.ai"
    ]
    await kube.apply(resources.CRDS, crd)

    async def established() -> bool:
        got = await kube.get(resources.CRDS, crd["metadata"]["name"])
        return conditions(got).get("Established", {}).get("status") == "True"

    await eventually(established, timeout=60, what="Devices CRD Established")


async def ensure_namespace(kube: Client, name: str) -> None:
    with contextlib.suppress(errors.AlreadyExists):
        await kube.create(resources.NAMESPACES, {"metadata": {"name": name}})


@pytest_asyncio.fixture(loop_scope="session")
async def node(kube: Client) -> AsyncIterator[dict[str, Any]]:
    await install_devices_crd(kube)
    await ensure_namespace(kube, SYSTEM_NAMESPACE)
    name = f"dm-{uuid.uuid4().hex[:8]}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    created = await kube.create(resources.NODES, {"metadata": {"name": name, "labels": labels}})
    try:
        yield created
    finally:
        await kube.delete(resources.NODES, name)
        await kube.delete(resources.NODE_FEATURES, f"{name}-gpustack-device-manager", SYSTEM_NAMESPACE)
        await kube.delete(resources.DEVICES, name)


def backend_for(node: dict[str, Any], tmp_path: Path) -> SimulatedBackend:
    name = node["metadata"]["name"]
    gpus = [{"manufacturer": "nvidia", "product": "NVIDIA A10", "count": 4, "memoryMiB": 23028}]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump({"nodes": [{"name": name, "cpu": {"cores": 8}, "gpus": gpus}]}))
    return SimulatedBackend(inventory, name)


async def versions(kube: Client, name: str) -> tuple[str, str]:
    feature = await kube.get(resources.NODE_FEATURES, f"{name}-gpustack-device-manager", SYSTEM_NAMESPACE)
    devices = await kube.get(resources.DEVICES, name)
    return feature["metadata"]["resourceVersion"], devices["metadata"]["resourceVersion"]


async def test_reports_appear_with_contract_labels_and_owner_and_unchanged_input_writes_nothing(
    kube: Client, node: dict[str, Any], tmp_path: Path
) -> None:
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]
    loop = DetectLoop(backend_for(node, tmp_path), Reporter(kube, name, SYSTEM_NAMESPACE), resync_every=1)
    await loop.step()

    feature = await kube.get(resources.NODE_FEATURES, f"{name}-gpustack-device-manager", SYSTEM_NAMESPACE)
    assert feature["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] == name
    assert [(o["kind"], o["uid"]) for o in feature["metadata"]["ownerReferences"]] == [("Node", uid)]
    labels = feature["spec"]["labels"]
    assert labels["feature.gpustack.ai/acceleratable"] == "true"
    assert (labels[KEY], labels[KEY + ".count"], labels[KEY + ".memory"]) == ("true", "4", "22Gi")

    devices = await kube.get(resources.DEVICES, name)
    assert devices["metadata"]["labels"] == {
        KEY: "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    assert [(o["kind"], o["uid"]) for o in devices["metadata"]["ownerReferences"]] == [("Node", uid)]
    (group,) = devices["spec"]["groups"]
    assert (group["id"], len(group["accelerators"])) == ("a10", 4)
    assert [a["remaining"] for a in devices["status"]["groups"][0]["accelerators"]] == [1_600_000] * 4

    before = await versions(kube, name)
    for _ in range(3):
        await loop.step()
    assert await versions(kube, name) == before, "an unchanged node must not be rewritten"


async def test_a_card_turning_unhealthy_or_vanishing_is_re_reported(
    kube: Client, node: dict[str, Any], tmp_path: Path
) -> None:
    name = node["metadata"]["name"]
    backend = backend_for(node, tmp_path)
    loop = DetectLoop(backend, Reporter(kube, name, SYSTEM_NAMESPACE))
    await loop.step()
    cards = backend.detect()
    feature_version, devices_version = await versions(kube, name)

    backend.mark_unhealthy(cards[2].uuid)
    await loop.step()
    accelerators = (await kube.get(resources.DEVICES, name))["spec"]["groups"][0]["accelerators"]
    assert [a["status"]["unhealthy"] for a in accelerators] == [False, False, True, False]
    assert await versions(kube, name) != (feature_version, devices_version)

    backend.remove(cards[3].uuid)
    await loop.step()
    feature = await kube.get(resources.NODE_FEATURES, f"{name}-gpustack-device-manager", SYSTEM_NAMESPACE)
    assert feature["spec"]["labels"][KEY + ".count"] == "3"
    devices = await kube.get(resources.DEVICES, name)
    assert [a["id"] for a in devices["spec"]["groups"][0]["accelerators"]] == [c.uuid for c in cards[:3]]
    assert len(devices["status"]["groups"][0]["accelerators"]) == 3, "the ledger follows the spec"


def allocation_pod(name: str, node: str, holdings: list[tuple[int, str, int]], **meta: Any) -> dict[str, Any]:
    record = {
        "main": {
            "devices": {
                "groups": [
                    {
                        "id": "a10",
                        "manufacturer": "nvidia",
                        "accelerators": [
                            {"id": card, "index": i, "mode": mode, "allocated": units}
                            for i, (mode, card, units) in enumerate(holdings)
                        ],
                    }
                ]
            },
            "deviceIDs": [f"a10:{card}:0000" for _, card, _ in holdings],
        }
    }
    return {
        "metadata": {
            "name": name,
            "annotations": {ACCELERATOR_ALLOCATED_ANNOTATION: json.dumps(record)},
            **meta,
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
    }


async def test_ledger_rebuilt_from_real_pods_gives_the_contract_numbers(
    kube: Client, node: dict[str, Any], kueue_namespace: str, tmp_path: Path
) -> None:
    namespace = kueue_namespace  # Kueue's pod webhook must know the namespace
    name = node["metadata"]["name"]
    backend = backend_for(node, tmp_path)
    await DetectLoop(backend, Reporter(kube, name, SYSTEM_NAMESPACE)).step()
    card0, card1, *_ = [c.uuid for c in backend.detect()]

    # Pods created within one second tie on creationTimestamp; the ledger then orders them by name.
    hold = {"finalizers": ["gpustack.ai/test-hold"]}
    await kube.create(
        resources.PODS, allocation_pod("p1-sliced", name, [(SLICED, card0, 400_000)], **hold), namespace
    )
    await kube.create(
        resources.PODS, allocation_pod("p2-whole", name, [(EXCLUSIVE, card1, 1_600_000)]), namespace
    )
    await kube.create(resources.PODS, allocation_pod("p3-clash", name, [(SLICED, card1, 200_000)]), namespace)

    result = await ledger.sync_status(kube, name)
    assert result is not None
    assert result.conflicts == [f"{namespace}/p3-clash"]

    async def ledger_entries() -> list[tuple[int, int]]:
        devices = await kube.get(resources.DEVICES, name)
        return [(a["mode"], a.get("remaining", 0)) for a in devices["status"]["groups"][0]["accelerators"]]

    expected = [(SLICED, 1_200_000), (EXCLUSIVE, 0), (0, 1_600_000), (0, 1_600_000)]
    assert await ledger_entries() == expected

    # No kubelet runs here, so delete at once: only our finalizer keeps the pod terminating.
    await kube.request("DELETE", resources.PODS.path("p1-sliced", namespace), body={"gracePeriodSeconds": 0})
    terminating = await kube.get(resources.PODS, "p1-sliced", namespace)
    assert terminating["metadata"].get("deletionTimestamp")
    version = (await kube.get(resources.DEVICES, name))["metadata"]["resourceVersion"]
    await ledger.sync_status(kube, name)
    assert await ledger_entries() == expected, "a terminating pod still holds its slice"
    assert (await kube.get(resources.DEVICES, name))["metadata"]["resourceVersion"] == version, (
        "a rebuild that changes nothing writes nothing: a restarted device manager leaves the ledger be"
    )

    await kube.patch(resources.PODS, "p1-sliced", {"metadata": {"finalizers": None}}, namespace=namespace)
    await eventually(lambda: _gone(kube, namespace), timeout=60, what="terminating pod gone")
    await ledger.sync_status(kube, name)
    assert (await ledger_entries())[0] == (0, 1_600_000)


async def _gone(kube: Client, namespace: str) -> bool:
    return await kube.get_or_none(resources.PODS, "p1-sliced", namespace) is None


async def test_a_ledger_rebuilt_against_a_spec_reported_since_is_refused_not_written(
    kube: Client, node: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = node["metadata"]["name"]
    backend = backend_for(node, tmp_path)
    loop = DetectLoop(backend, Reporter(kube, name, SYSTEM_NAMESPACE), rebuild_ledger=False)
    await loop.step()
    read_before_the_report = await kube.get(resources.DEVICES, name)
    assert "status" not in read_before_the_report, "serve's detect loop leaves the ledger to its writer"
    backend.remove(backend.detect()[3].uuid)
    await loop.step()

    async def stale(res: Any, obj: str, namespace: str | None = None) -> dict[str, Any]:
        return read_before_the_report

    with monkeypatch.context() as patched:
        patched.setattr(kube, "get_or_none", stale)
        with pytest.raises(errors.Conflict):
            await ledger.sync_status(kube, name)
    devices = await kube.get(resources.DEVICES, name)
    assert "status" not in devices, "a ledger of four cards never lands on a spec of three"
    await ledger.sync_status(kube, name)
    devices = await kube.get(resources.DEVICES, name)
    assert len(devices["status"]["groups"][0]["accelerators"]) == 3


async def test_reports_go_when_their_node_goes(kube: Client, node: dict[str, Any], tmp_path: Path) -> None:
    name = node["metadata"]["name"]
    await DetectLoop(backend_for(node, tmp_path), Reporter(kube, name, SYSTEM_NAMESPACE)).step()
    await kube.delete(resources.NODES, name)

    async def collected() -> bool:
        feature = await kube.get_or_none(
            resources.NODE_FEATURES, f"{name}-gpustack-device-manager", SYSTEM_NAMESPACE
        )
        return feature is None and await kube.get_or_none(resources.DEVICES, name) is None

    await eventually(collected, timeout=180, interval=1.0, what="NodeFeature and Devices garbage-collected")
