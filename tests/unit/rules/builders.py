"""Builders of the Node / Devices JSON the rules read, and the Kubernetes syntax checks tests assert."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from gpustack_operator.api import keys
from gpustack_operator.api.types.devices import Accelerator, DevicesGroup
from gpustack_operator.rules.naming.nodes import Node

LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_label_value(value: str) -> bool:
    """A valid Kubernetes label value."""
    return len(value) <= 63 and LABEL_VALUE.fullmatch(value) is not None


def is_label_key(key: str) -> bool:
    """A valid Kubernetes label key: optional DNS-subdomain prefix, then a ≤63-char name."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or DNS_SUBDOMAIN.fullmatch(prefix) is None):
        return False
    return len(name) <= 63 and LABEL_NAME.fullmatch(name) is not None


def is_dns_label(name: str) -> bool:
    """A valid DNS-1123 label (names of LocalQueues)."""
    return len(name) <= 63 and DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    """A valid DNS-1123 subdomain (names of ResourceFlavors, ClusterQueues, InstanceTypes)."""
    return len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) is not None


def node(
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
) -> Node:
    """A Node carrying the given maps (omitted when None)."""
    built: Node = {"metadata": {"name": "node-1"}}
    if labels is not None:
        built["metadata"]["labels"] = dict(labels)
    if annotations is not None:
        built["metadata"]["annotations"] = dict(annotations)
    if capacity is not None:
        built["status"] = {"capacity": dict(capacity)}
    return built


def cpu_labels(vendor: str = "", family: str = "", model: str = "") -> dict[str, str]:
    """NFD's cpu-model labels (only the non-empty ones) plus linux/amd64."""
    labels = {keys.OS_LABEL: "linux", keys.ARCH_LABEL: "amd64"}
    for key, value in (
        (keys.NFD_CPU_VENDOR_LABEL, vendor),
        (keys.NFD_CPU_FAMILY_LABEL, family),
        (keys.NFD_CPU_ID_LABEL, model),
    ):
        if value:
            labels[key] = value
    return labels


def cpu_name(name: str) -> dict[str, str]:
    """The NodeFeatureRule's cpu-name annotation."""
    return {keys.CPU_NAME_ANNOTATION: name}


def tesla_t4_group(cards: int = 2) -> DevicesGroup:
    """A Devices group of NVIDIA Tesla T4 cards (15 GiB, Turing)."""
    return {
        "id": "tesla-t4",
        "manufacturer": "nvidia",
        "name": "Tesla T4",
        "memory": 15360,
        "driverVersion": "550.54.15",
        "runtimeVersion": "12.4",
        "computeCapability": "7.5",
        "family": "Turing",
        "accelerators": accelerators(cards),
    }


def accelerators(cards: int) -> list[Accelerator]:
    """``cards`` healthy accelerators on distinct PCI buses."""
    return [
        {
            "id": f"GPU-{index}",
            "index": index,
            "physicalIndexes": [index],
            "topology": {
                "pciBusId": f"0000:{index:02x}:00.0",
                "pciRootId": "0000:00",
                "pciClass": "0302",
                "numaAffinity": "0",
                "cpuAffinity": "0-7",
            },
            "status": {"unhealthy": False},
        }
        for index in range(cards)
    ]
