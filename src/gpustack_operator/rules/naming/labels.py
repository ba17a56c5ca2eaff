"""The node labels the operator reports through NFD NodeFeature objects (contract §5.3, §7.5).

The device manager describes the cards it found (``<node>-gpustack-device-manager``); the worker marks the
node managed and describes its CPU (``<node>-gpustack-worker``). Both label sets are what ResourceFlavors
and pools are later built from, so their exact keys and values are fixed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from gpustack_operator.api.keys import (
    ACCELERATABLE_FEATURE_PREFIX,
    ACCELERATABLE_LABEL,
    COMPUTE_CAPABILITY_SUFFIX,
    CORES_SUFFIX,
    COUNT_SUFFIX,
    DRIVER_VERSION_SUFFIX,
    FAMILY_SUFFIX,
    GENERAL_FEATURE_PREFIX,
    MANAGED_LABEL,
    MEMORY_SUFFIX,
    PRODUCT_SUFFIX,
    RUNTIME_VERSION_SUFFIX,
)
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity, format_binary_si_rounded
from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.rules.cards import MIB
from gpustack_operator.rules.naming.groups import accelerator_key, key_manufacturer
from gpustack_operator.rules.naming.names import sanitize_label_value
from gpustack_operator.rules.naming.nodekeys import extract_general_node_key
from gpustack_operator.rules.naming.nodes import Node, node_capacity, node_labels

TRUE: Final = "true"
FALSE: Final = "false"


def construct_acceleratable_node_labels(groups: Iterable[DevicesGroup]) -> dict[str, str]:
    """ConstructAcceleratableNodeLabels: labels for every card model with at least one card.

    Models sharing an accelerator key add up their counts. Every value is sanitised; {} when no card.
    """
    labels: dict[str, str] = {}
    counts: dict[str, int] = {}
    for group in groups:
        count = len(group.get("accelerators") or [])
        if count == 0:
            continue
        manufacturer = group.get("manufacturer", "")
        a_key = accelerator_key(manufacturer, group.get("id", ""))
        counts[a_key] = counts.get(a_key, 0) + count
        mfr, model = ACCELERATABLE_FEATURE_PREFIX + manufacturer, ACCELERATABLE_FEATURE_PREFIX + a_key
        optional = {
            mfr + DRIVER_VERSION_SUFFIX: group.get("driverVersion", ""),
            mfr + RUNTIME_VERSION_SUFFIX: group.get("runtimeVersion", ""),
            model + FAMILY_SUFFIX: group.get("family", ""),
            model + COMPUTE_CAPABILITY_SUFFIX: group.get("computeCapability", ""),
        }
        labels.update({key: value for key, value in optional.items() if value})
        labels.setdefault(model + PRODUCT_SUFFIX, group.get("name", ""))
        labels.setdefault(model + MEMORY_SUFFIX, format_binary_si_rounded(group.get("memory", 0) * MIB))
        labels.setdefault(model + CORES_SUFFIX, str(group.get("cores", 0)))
        labels.update({ACCELERATABLE_LABEL: TRUE, mfr: TRUE, model: TRUE})
    for a_key, count in counts.items():
        labels[ACCELERATABLE_FEATURE_PREFIX + a_key + COUNT_SUFFIX] = str(count)
    return {key: sanitize_label_value(value) for key, value in labels.items()}


def cpu_count(node: Node) -> int:
    """Whole CPUs in the node's capacity (rounded up); 0 when unknown or malformed."""
    try:
        return max(Quantity.parse(node_capacity(node).get("cpu", "0")).value(), 0)
    except InvalidQuantityError:
        return 0


def managed_label(node: Node, manual: bool) -> dict[str, str]:
    """`gpustack.ai/managed`: an admin's `true`/`false` wins; otherwise `true` unless in manual mode."""
    current = node_labels(node).get(MANAGED_LABEL)
    if current in (TRUE, FALSE):
        return {MANAGED_LABEL: current}
    return {} if manual else {MANAGED_LABEL: TRUE}


def construct_node_capacity_labels(node: Node, manual: bool = False) -> dict[str, str]:
    """ConstructNodeCapacityLabels: the worker's labels: managed mark, CPU manufacturer, CPU key and count."""
    g_key = extract_general_node_key(node)
    labels = managed_label(node, manual)
    labels[GENERAL_FEATURE_PREFIX + key_manufacturer(g_key)] = TRUE
    labels[GENERAL_FEATURE_PREFIX + g_key] = TRUE
    count = cpu_count(node)
    if count > 0:
        labels[GENERAL_FEATURE_PREFIX + g_key + COUNT_SUFFIX] = str(count)
    return labels
