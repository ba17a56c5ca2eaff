"""ResourceFlavors a node contributes, and the pool/InstanceType names derived from them (contract §7.6).

Each node yields one CPU flavor (``gpustack--<gKey>-<os>-<arch>-<n>c``) and one flavor per card model
(``gpustack--<gKey>--<aKey>-<os>-<arch>-<n>d``). Nodes with the same hardware land in the same flavor;
flavors are then grouped into pools, whose names drop the per-node count (and, unless the CPU manufacturer
is "aware", the CPU key). Names are built only here so flavors, queues and InstanceTypes always agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from gpustack_operator.api.keys import (
    ACCELERATABLE_FEATURE_PREFIX,
    ACCELERATABLE_LABEL,
    ARCH_LABEL,
    CAPACITY_SUFFIX,
    COUNT_SUFFIX,
    FLAVOR_NAME_PREFIX,
    GENERAL_FEATURE_PREFIX,
    GENERIC,
    MANAGED_LABEL,
    NOTE_PREFIX,
    OS_LABEL,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_NODES,
)
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.flavornotes import accelerator_notes, cpu_notes
from gpustack_operator.rules.naming.groups import extract_acceleratable_keys
from gpustack_operator.rules.naming.labels import FALSE, TRUE
from gpustack_operator.rules.naming.names import object_name_part
from gpustack_operator.rules.naming.nodekeys import extract_general_node_key
from gpustack_operator.rules.naming.nodes import Node, node_labels

POOL_SEPARATOR: Final = "--"
"""Joins the CPU key and the accelerator key in a name."""


def pool_name(aware: bool, general_key: str, accel_key: str = "") -> str:
    """A pool's name without os/arch: `gpustack--<aKey>`, `gpustack--<gKey>--<aKey>`, `gpustack--generic`, ...

    Unaware of the CPU manufacturer, accelerated pools drop the CPU key and CPU pools collapse to `generic`.
    This is also the InstanceTypeFlavor name.
    """
    parts = [general_key if aware else GENERIC] if aware or not accel_key else []
    parts += [accel_key] if accel_key else []
    return FLAVOR_NAME_PREFIX + POOL_SEPARATOR.join(object_name_part(part) for part in parts)


@dataclasses.dataclass(frozen=True)
class NodeFlavor:
    """One ResourceFlavor a node belongs to."""

    name: str
    general_key: str
    accel_key: str
    """"" for the CPU flavor."""
    os: str
    arch: str
    count: int
    """CPUs (CPU flavor) or cards of the model (device flavor) per node."""
    node_labels: Mapping[str, str]
    """The ResourceFlavor's spec.nodeLabels."""
    notes: Mapping[str, str]
    """Descriptors, by note name (annotation `note.gpustack.ai/<name>`)."""

    @property
    def acceleratable(self) -> bool:
        """True for a device flavor."""
        return bool(self.accel_key)

    @property
    def feature_key(self) -> str:
        """The label that identifies the flavor's hardware on nodes."""
        if self.accel_key:
            return ACCELERATABLE_FEATURE_PREFIX + self.accel_key
        return GENERAL_FEATURE_PREFIX + self.general_key

    def derived_instance_type_identity(self, aware: bool) -> tuple[str, str, str]:
        """DerivedInstanceTypeIdentity: (InstanceType name, generalGroup, acceleratorGroup)."""
        name = f"{pool_name(aware, self.general_key, self.accel_key)}-{self.os}-{self.arch}"
        return name, self.general_key if aware else GENERIC, self.accel_key

    def resource_flavor_labels(self, nodes: int) -> dict[str, str]:
        """metadata.labels of the ResourceFlavor, given how many managed nodes contribute to it."""
        labels = {
            self.feature_key: TRUE,
            OS_LABEL: self.os,
            ARCH_LABEL: self.arch,
            ACCELERATABLE_LABEL: TRUE if self.acceleratable else FALSE,
            self.feature_key + COUNT_SUFFIX: str(self.count),
            self.feature_key + CAPACITY_SUFFIX: str(nodes * self.count),
            RESOURCE_TYPE_LABEL: RESOURCE_TYPE_NODES,
        }
        if self.acceleratable:
            labels[GENERAL_FEATURE_PREFIX + self.general_key] = TRUE
        return labels

    def note_annotations(self) -> dict[str, str]:
        """metadata.annotations of the ResourceFlavor: the notes under `note.gpustack.ai/`."""
        return {NOTE_PREFIX + name: value for name, value in self.notes.items()}


def _count(labels: Mapping[str, str], key: str) -> int:
    text = labels.get(key + COUNT_SUFFIX, "")
    return int(text) if text.isascii() and text.isdigit() else 0


def extract_node_flavors(
    node: Node, mixed_on_node: bool = True, environ: Environ = DEFAULT_ENVIRON
) -> list[NodeFlavor]:
    """ExtractNodeFlavors: the CPU flavor (when the node reports CPUs) then one flavor per card model.

    With ``mixed_on_node`` false an accelerated node offers no CPU flavor, and CPU flavors require the
    node's `feature.gpustack.ai/acceleratable=false` label. A node without os/arch labels offers none.
    """
    labels = node_labels(node)
    os_name, arch = labels.get(OS_LABEL, ""), labels.get(ARCH_LABEL, "")
    if not (os_name and arch):
        return []
    g_key = extract_general_node_key(node)
    general = GENERAL_FEATURE_PREFIX + g_key
    base = {MANAGED_LABEL: TRUE, OS_LABEL: os_name, ARCH_LABEL: arch, general: TRUE}
    flavors = []
    for a_key in extract_acceleratable_keys(labels):
        accel, count = (
            ACCELERATABLE_FEATURE_PREFIX + a_key,
            _count(labels, ACCELERATABLE_FEATURE_PREFIX + a_key),
        )
        if count > 0:
            name = f"{pool_name(True, g_key, a_key)}-{os_name}-{arch}-{count}d"
            selector = {**base, accel: TRUE, accel + COUNT_SUFFIX: str(count)}
            notes = accelerator_notes(node, g_key, a_key, environ)
            flavors.append(NodeFlavor(name, g_key, a_key, os_name, arch, count, selector, notes))
    cpus = _count(labels, general)
    if cpus > 0 and (mixed_on_node or not flavors):
        name = f"{pool_name(True, g_key)}-{os_name}-{arch}-{cpus}c"
        selector = {**base, general + COUNT_SUFFIX: str(cpus)}
        if not mixed_on_node:
            selector[ACCELERATABLE_LABEL] = FALSE
        flavors.insert(0, NodeFlavor(name, g_key, "", os_name, arch, cpus, selector, cpu_notes(node, g_key)))
    return flavors
