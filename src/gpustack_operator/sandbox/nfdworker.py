"""An nfd-worker stand-in: the NodeFeature object NFD's worker would write for each fake node.

On a real node nfd-worker reads the CPU (cpuid) and the PCI bus and writes one NodeFeature named after the
node, in NFD's namespace, labelled `nfd.node.kubernetes.io/node-name=<node>`: the raw features, and the
labels its sources derive from them. nfd-master folds that object and every other NodeFeature of the node
(our device manager's `<node>-gpustack-device-manager`) into the Node's labels, and runs NodeFeatureRules
(the worker's `gpustack-cpu-info`) over the features. kwok nodes have no hardware, so the sandbox writes
the worker's object from the inventory instead: `cpu.model` attributes (vendor_id, family and id as NFD
reports them, plus the name and core counts the gpustack-cpu-info rule reads) and one `pci.device` instance
per GPU group (class, vendor), with the labels NFD's worker would compute when configured as GPUStack's
chart configures it (pci: classes 02/03/0b/12, label field `vendor`; cpu: `cpu-model.<attribute>`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from gpustack_operator.api.keys import (
    NFD_CPU_FAMILY_LABEL,
    NFD_CPU_ID_LABEL,
    NFD_CPU_VENDOR_LABEL,
    NFD_PCI_PRESENT_LABEL_TEMPLATE,
)
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.naming import objects
from gpustack_operator.rules.naming.cpuinforule import PCI_DEVICE_CLASSES
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.sandbox.inventory import InventoryNode

NAMESPACE: Final = "node-feature-discovery"
"""NFD's namespace: where its worker writes and its master looks first (KUBERNETES_NAMESPACE of both)."""
FIELD_MANAGER: Final = "nfd-worker"
PUBLISHED_ANNOTATION: Final = "nfd.node.kubernetes.io/feature-labels"
"""nfd-master's record, on the Node, of the labels it published there."""


def cpu_model(node: InventoryNode) -> dict[str, str]:
    """The `cpu.model` attributes of the node (empty ones left out, as the worker leaves them out)."""
    cpu = node.cpu
    attributes = {
        "vendor_id": cpu.vendor,
        "family": cpu.family,
        "id": cpu.id,
        "name": cpu.model,
        "physical_cores": str(cpu.cores),
        "threads_per_core": str(cpu.threads_per_core),
        "logical_cores": str(cpu.cores * cpu.threads_per_core),
    }
    return {key: value for key, value in attributes.items() if value}


def pci_devices(node: InventoryNode) -> list[dict[str, str]]:
    """One `pci.device` instance per GPU group: its class and its manufacturer's vendor ID."""
    known = manufacturers()
    return [{"class": gpu.pci_class, "vendor": known[gpu.manufacturer].pci_vendor_id} for gpu in node.gpus]


def worker_labels(node: InventoryNode) -> dict[str, str]:
    """What nfd-worker's cpu and pci sources label: `cpu-model.*`, and `pci-<vendor>.present` per
    device of an accelerator class."""
    model = cpu_model(node)
    keys = {"vendor_id": NFD_CPU_VENDOR_LABEL, "family": NFD_CPU_FAMILY_LABEL, "id": NFD_CPU_ID_LABEL}
    labels = {label: model[attribute] for attribute, label in keys.items() if attribute in model}
    for device in pci_devices(node):
        if device["class"].startswith(PCI_DEVICE_CLASSES):
            labels[NFD_PCI_PRESENT_LABEL_TEMPLATE.format(vendor=device["vendor"])] = "true"
    return labels


def node_feature(node: InventoryNode, node_obj: Mapping[str, Any]) -> dict[str, Any]:
    """The NodeFeature nfd-worker would keep for this node (named after it, owned by its Node object)."""
    features: dict[str, Any] = {"attributes": {"cpu.model": {"elements": cpu_model(node)}}}
    devices = pci_devices(node)
    if devices:
        features["instances"] = {"pci.device": {"elements": [{"attributes": d} for d in devices]}}
    obj = objects.node_feature(node_obj, "", NAMESPACE, worker_labels(node))
    obj["spec"]["features"] = features
    return obj


async def publish(client: Client, nodes: Iterable[InventoryNode]) -> None:
    """Write every node's NodeFeature (the nodes must exist: each object is owned by its Node)."""
    await client.apply(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}}, field_manager=FIELD_MANAGER)
    for node in nodes:
        node_obj = await client.get(resources.NODES, node.name)
        await client.apply(resources.NODE_FEATURES, node_feature(node, node_obj), field_manager=FIELD_MANAGER)


def every_node_published(node_list: str) -> bool:
    """Readiness of nfd-master, from a Node list (JSON): it has published labels on every node."""
    items = json.loads(node_list).get("items") or []
    return bool(items) and all(
        PUBLISHED_ANNOTATION in (item["metadata"].get("annotations") or {}) for item in items
    )
