"""Awkward card names reach a real API server as Devices and NodeFeature objects it accepts.

The unit tests check the label-key syntax with the Kubernetes rules; here kube-apiserver itself judges:
a card whose product name is just the vendor word (formerly the key `nvidia-`, rejected), two spellings
of one product, and one product in two VRAM sizes (formerly two groups with one ID, rejected as a
duplicate list-map key).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.model import Card
from gpustack_operator.device_manager.reporting import Reporter
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from tests.integration.test_device_reporting import SYSTEM_NAMESPACE, ensure_namespace, install_devices_crd

PREFIX = "acceleratable.feature.gpustack.ai/"


@pytest_asyncio.fixture(loop_scope="session")
async def node(kube: Client) -> AsyncIterator[str]:
    await install_devices_crd(kube)
    await ensure_namespace(kube, SYSTEM_NAMESPACE)
    name = f"gid-{uuid.uuid4().hex[:8]}"
    labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    await kube.create(resources.NODES, {"metadata": {"name": name, "labels": labels}})
    try:
        yield name
    finally:
        await kube.delete(resources.NODES, name)
        await kube.delete(resources.NODE_FEATURES, f"{name}-gpustack-device-manager", SYSTEM_NAMESPACE)
        await kube.delete(resources.DEVICES, name)


def card(product: str, memory_mib: int, index: int, pci_id: str = "") -> Card:
    return Card("nvidia", product, memory_mib, f"GPU-{index}", index, minor=index, pci_id=pci_id)


CARDS = [
    card("NVIDIA", 81920, 0, pci_id="10de:2330"),
    card("NVIDIA A100", 81920, 1),
    card("A100", 81920, 2),
    card("NVIDIA A100-SXM4", 40960, 3),
    card("NVIDIA A100-SXM4", 81920, 4),
]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param(
            {},
            {"pci-10de2330": 1, "a100": 2, "a100-sxm4": 2},
            id="memory-suffix-off",
        ),
        pytest.param(
            {"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true"},
            {"pci-10de2330-80g": 1, "a100-80g": 2, "a100-sxm4-40g": 1, "a100-sxm4-80g": 1},
            id="memory-suffix-on",
        ),
    ],
)
async def test_awkward_names_are_accepted_by_the_api_server(
    kube: Client, node: str, environ: dict[str, str], expected: dict[str, int]
) -> None:
    groups = group_cards(CARDS, environ)
    assert await Reporter(kube, node, SYSTEM_NAMESPACE).report(groups)

    devices: dict[str, Any] = await kube.get(resources.DEVICES, node)
    assert {g["id"]: len(g["accelerators"]) for g in devices["spec"]["groups"]} == expected
    assert {k for k in devices["metadata"]["labels"] if k.startswith(PREFIX)} == {
        f"{PREFIX}nvidia-{gid}" for gid in expected
    }
    feature = await kube.get(resources.NODE_FEATURES, f"{node}-gpustack-device-manager", SYSTEM_NAMESPACE)
    counts = {gid: feature["spec"]["labels"][f"{PREFIX}nvidia-{gid}.count"] for gid in expected}
    assert counts == {gid: str(n) for gid, n in expected.items()}
