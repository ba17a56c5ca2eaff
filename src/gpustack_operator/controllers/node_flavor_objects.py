"""What NodeFlavorReconciler writes: a node ResourceFlavor, the patch that fixes one, a derived InstanceType.

Why this module exists: what a flavor must look like (contract §7.9) is a pure function of the flavor, its
contributing node count and the CPU-awareness setting, and so is the smallest merge patch that brings a
cached flavor there. Keeping both out of the reconciler lets tests pin every field without a cluster, and
lets the reconciler write only when `flavor_patch` finds a difference (nothing at rest). The patch sets
our labels (others' labels are left alone), replaces our notes as a set (a note no longer wanted, such as
`cpuDetail` after awareness is switched off, is removed) and pins `spec.nodeLabels` and `tolerations`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from gpustack_operator.api.keys import DERIVED_FROM_NODE_LABEL, NOTE_CPU_DETAIL, NOTE_PREFIX, NOTE_PRODUCT
from gpustack_operator.api.types import kueue
from gpustack_operator.api.types.common import Toleration
from gpustack_operator.api.types.instancetype import InstanceType, InstanceTypeSpec
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.rules.naming.flavors import NodeFlavor
from gpustack_operator.rules.naming.labels import TRUE

__all__ = ["derived_instance_type", "flavor_patch", "resource_flavor"]

TOLERATE_EVERYTHING: Final[list[Toleration]] = [{"operator": "Exists"}]
"""Eligibility is by nodeLabels, so a workload admitted on the flavor is never held back by a taint."""
CPU_ONLY_DISPLAY_NAME: Final = "CPU-only"
"""displayName of the collapsed (CPU-manufacturer-agnostic) CPU pool, which no single product names."""
MAX_DISPLAY_NAME: Final = 64
CPU_ONLY_UNIT: Final = ("1", "2Gi")
ACCELERATED_UNIT: Final = ("4", "16Gi")
LOCAL_STORAGE: Final = "100Gi"


def resource_flavor(flavor: NodeFlavor, nodes: int, aware: bool) -> kueue.ResourceFlavor:
    """The ResourceFlavor for `flavor` with `nodes` contributing nodes (capacity = nodes x count).

    The raw CPU detail note rides on a CPU flavor always, on a device flavor only when the pools are
    split by CPU manufacturer (contract Stage 4).
    """
    notes = flavor.note_annotations()
    if flavor.acceleratable and not aware:
        notes.pop(NOTE_PREFIX + NOTE_CPU_DETAIL, None)
    return {
        "apiVersion": kueue.API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {
            "name": flavor.name,
            "labels": flavor.resource_flavor_labels(nodes),
            "annotations": notes,
        },
        "spec": {"nodeLabels": dict(flavor.node_labels), "tolerations": list(TOLERATE_EVERYTHING)},
    }


def _map_patch(
    have: Mapping[str, Any], want: Mapping[str, str], ours: Callable[[str], bool]
) -> dict[str, str | None]:
    """Merge-patch entries turning `have` into `want`: changed keys, and None for `ours` keys not wanted."""
    patch: dict[str, str | None] = {k: v for k, v in want.items() if have.get(k) != v}
    patch.update((k, None) for k in have if k not in want and ours(k))
    return patch


def _is_note(key: str) -> bool:
    return key.startswith(NOTE_PREFIX)


def _everything(_: str) -> bool:
    return True


def _nothing(_: str) -> bool:
    return False


def flavor_patch(current: Mapping[str, Any], desired: kueue.ResourceFlavor) -> dict[str, Any] | None:
    """The JSON merge patch that makes `current` match `desired`, or None when it already does."""
    have_meta: Mapping[str, Any] = current.get("metadata") or {}
    want_meta = desired.get("metadata") or {}
    meta = {
        "labels": _map_patch(have_meta.get("labels") or {}, want_meta.get("labels") or {}, _nothing),
        "annotations": _map_patch(
            have_meta.get("annotations") or {}, want_meta.get("annotations") or {}, _is_note
        ),
    }
    have_spec: Mapping[str, Any] = current.get("spec") or {}
    want_spec = desired["spec"]
    spec: dict[str, Any] = {}
    want_labels = want_spec.get("nodeLabels") or {}
    node_labels = _map_patch(have_spec.get("nodeLabels") or {}, want_labels, _everything)
    if node_labels:
        spec["nodeLabels"] = node_labels
    if have_spec.get("tolerations") != want_spec.get("tolerations"):
        spec["tolerations"] = want_spec.get("tolerations")
    patch: dict[str, Any] = {"metadata": {k: v for k, v in meta.items() if v}} if any(meta.values()) else {}
    if spec:
        patch["spec"] = spec
    return patch or None


def derived_instance_type(flavor: NodeFlavor, aware: bool) -> InstanceType:
    """DerivedInstanceTypeIdentity as an InstanceType, with the fixed default unit (contract §7.9).

    Created once and never updated, so an admin's later edits stand. The device details (product, memory,
    manufacturer, ..., the CPU detail when aware) are not written here: the InstanceType defaulting webhook
    fills them on create from the pool's flavors, for derived and hand-made types alike
    (rules.instancetype.descriptors); the flavor this type is authored after is already there.
    """
    name, general_group, accelerator_group = flavor.derived_instance_type_identity(aware)
    unit_cpu, unit_ram = ACCELERATED_UNIT if flavor.acceleratable else CPU_ONLY_UNIT
    spec: InstanceTypeSpec = {
        "acceleratable": flavor.acceleratable,
        "os": flavor.os,
        "arch": flavor.arch,
        "generalGroup": general_group,
        "unitResources": {"cpu": unit_cpu, "ram": unit_ram},
        "localStorage": LOCAL_STORAGE,
    }
    if accelerator_group:
        spec["acceleratorGroup"] = accelerator_group
    collapsed_cpu_pool = not flavor.acceleratable and not aware
    display = CPU_ONLY_DISPLAY_NAME if collapsed_cpu_pool else flavor.notes.get(NOTE_PRODUCT, "")
    if display:
        spec["displayName"] = display[:MAX_DISPLAY_NAME]
    return {
        "apiVersion": INSTANCE_TYPES.api_version,
        "kind": INSTANCE_TYPES.kind,
        "metadata": {"name": name, "labels": {DERIVED_FROM_NODE_LABEL: TRUE}},
        "spec": spec,
    }
