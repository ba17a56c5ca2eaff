"""The general (CPU) node key (contract §7.4): which CPU a node has, as one label-safe word.

CPU-only pools and the CPU half of accelerated pools are keyed by ``<cpu manufacturer>-<id>`` (e.g.
``amd-epyc-7763``, or ``amd-25-1`` from NFD's family/id when no model name is reported), so that nodes
with different CPUs never pool together. The key must fit ``<key>.capacity`` into a 63-char label name.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.api.keys import (
    CAPACITY_SUFFIX,
    CPU_NAME_ANNOTATION,
    GENERIC,
    NFD_CPU_FAMILY_LABEL,
    NFD_CPU_ID_LABEL,
    NFD_CPU_VENDOR_LABEL,
)
from gpustack_operator.rules.naming.names import MAX_LABEL_VALUE_LENGTH, normalize_name
from gpustack_operator.rules.naming.nodes import Node, node_annotations, node_labels, resolved

GENERAL_KEY_BUDGET: Final = MAX_LABEL_VALUE_LENGTH - 1 - len(CAPACITY_SUFFIX)
"""53: the id part gets this minus the manufacturer's length, so `<key>.capacity` stays within 63."""

_UNKNOWN_VENDOR: Final = "vendorunknown"


def general_manufacturer(vendor_id: str) -> str:
    """The CPU manufacturer from NFD's vendor_id (`AMD` -> `amd`); unknown or unreported -> `generic`."""
    manufacturer = vendor_id.lower()
    return GENERIC if manufacturer in ("", _UNKNOWN_VENDOR) else manufacturer


def extract_general_node_key(node: Node) -> str:
    """ExtractGeneralNodeKey: `<manufacturer>-<id>`, or just the manufacturer when no id is known.

    The id is the normalised `feature.gpustack.ai/cpu-name` annotation when it yields a word, else
    `<family>-<id>` from NFD's cpu-model labels when both are set. os/arch are not part of the key.
    """
    labels = node_labels(node)
    manufacturer = general_manufacturer(labels.get(NFD_CPU_VENDOR_LABEL, ""))
    cpu_name = resolved(node_annotations(node).get(CPU_NAME_ANNOTATION))
    id_part = (
        normalize_name(cpu_name, manufacturer, GENERAL_KEY_BUDGET - len(manufacturer), True)
        if cpu_name
        else ""
    )
    if not id_part:
        family, model = labels.get(NFD_CPU_FAMILY_LABEL, ""), labels.get(NFD_CPU_ID_LABEL, "")
        id_part = f"{family}-{model}" if family and model else ""
    return f"{manufacturer}-{id_part}" if id_part else manufacturer
