"""The label/annotation keys and names the original operator used, byte for byte (§2.1, §5.3, §5.4)."""

from __future__ import annotations

import pytest

from gpustack_operator.api import keys
from tests.unit.rules.builders import is_label_key


@pytest.mark.parametrize(
    ("constant", "text"),
    [
        pytest.param(keys.MANAGED_LABEL, "gpustack.ai/managed", id="managed"),
        pytest.param(keys.CONTROLLED_FINALIZER, "gpustack.ai/controlled", id="finalizer"),
        pytest.param(keys.RESOURCE_TYPE_LABEL, "resource.gpustack.ai/type", id="resource-type"),
        pytest.param(keys.NOTE_PREFIX, "note.gpustack.ai/", id="note-prefix"),
        pytest.param(keys.QUEUE_ENTRANCE_LABEL, "schedule.gpustack.ai/queue-entrance", id="queue-entrance"),
        pytest.param(keys.QUEUE_ANNOTATION, "schedule.gpustack.ai/queue", id="queue"),
        pytest.param(keys.DERIVED_FROM_NODE_LABEL, "schedule.gpustack.ai/derived-from-node", id="derived"),
        pytest.param(
            keys.ACCELERATOR_ALLOCATED_ANNOTATION, "device.gpustack.ai/accelerator.allocated", id="alloc"
        ),
        pytest.param(
            keys.ACCELERATOR_PREFERRED_ID_ANNOTATION,
            "device.gpustack.ai/accelerator.preferred-id",
            id="preferred-id",
        ),
        pytest.param(
            keys.ACCELERATOR_PREFERRED_INDEX_ANNOTATION,
            "device.gpustack.ai/accelerator.preferred-index",
            id="preferred-index",
        ),
        pytest.param(keys.KUEUE_QUEUE_NAME_LABEL, "kueue.x-k8s.io/queue-name", id="kueue-queue-name"),
        pytest.param(keys.ACCELERATABLE_LABEL, "feature.gpustack.ai/acceleratable", id="acceleratable"),
        pytest.param(
            keys.ACCELERATABLE_FEATURE_PREFIX, "acceleratable.feature.gpustack.ai/", id="accel-prefix"
        ),
        pytest.param(keys.GENERAL_FEATURE_PREFIX, "general.feature.gpustack.ai/", id="general-prefix"),
        pytest.param(keys.CREDITS_PREFIX, "credits.gpustack.ai/", id="credits-prefix"),
        pytest.param(keys.CPU_NAME_ANNOTATION, "feature.gpustack.ai/cpu-name", id="cpu-name"),
        pytest.param(
            keys.CPU_BOOST_FREQ_ANNOTATION, "feature.gpustack.ai/cpu-boost-freq", id="cpu-boost-freq"
        ),
        pytest.param(keys.NODE_FLAVOR_INDEX, "nodes.schedule.gpustack.ai/flavor", id="flavor-index"),
        pytest.param(keys.POD_NODE_NAME_INDEX, "pods.nodeName", id="pod-index"),
        pytest.param(keys.CRD_INSTANCE_TYPES, "instancetypes.worker.gpustack.ai", id="crd-instancetypes"),
        pytest.param(keys.CRD_DEVICES, "devices.worker.gpustack.ai", id="crd-devices"),
        pytest.param(keys.APISERVICE_WORKER_V1, "v1.worker.gpustack.ai", id="apiservice"),
        pytest.param(
            keys.NFD_PCI_PRESENT_LABEL_TEMPLATE.format(vendor="10de"),
            "feature.node.kubernetes.io/pci-10de.present",
            id="nfd-pci",
        ),
        pytest.param(
            keys.NODE_DEVICES_CONTROLLER_NAME, "worker.gpustack.ai/node-devices", id="admission-controller"
        ),
    ],
)
def test_contract_spelling(constant: str, text: str) -> None:
    assert constant == text


@pytest.mark.parametrize(
    "label",
    [
        keys.MANAGED_LABEL,
        keys.RESOURCE_TYPE_LABEL,
        keys.QUEUE_ENTRANCE_LABEL,
        keys.DERIVED_FROM_NODE_LABEL,
        keys.ACCELERATABLE_LABEL,
        keys.NFD_NODE_NAME_LABEL,
        keys.NFD_CPU_VENDOR_LABEL,
    ],
)
def test_label_constants_are_valid_label_keys(label: str) -> None:
    assert is_label_key(label)
