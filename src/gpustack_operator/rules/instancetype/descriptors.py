"""The device details an InstanceType's defaulting fills from its pool's ResourceFlavors (contract §4.1).

Why this module exists: the Pod webhook folds `<base>.sliced.memory-mib` by the InstanceType's
`spec.memory` (§4.4), and `kubectl get instancetype` shows the pool's product and memory; the operator
derives InstanceTypes from nodes with only their identity and unit (§7.9), so without this a sliced Pod
sized in MiB is refused on every derived pool. The hardware is described by the notes
(`note.gpustack.ai/<k>`) the NodeFlavorReconciler writes on each ResourceFlavor; the architecture's
Stage 4 has the InstanceType defaulting webhook enrich the type from them, and that is the one place it
happens (apiserver/webhooks/kinds.py calls `enrich` on CREATE, with the pool's flavors and the Devices of
its card model, and `carry_over` on UPDATE). The flavor
controller authors a derived type through the same webhook, so derived and hand-made types are filled
alike, and the flavor is always there first (the controller syncs it before authoring the type).

What is filled, only where the type says nothing itself (an admin's own value is never replaced):
- an accelerated type: `manufacturer`, `product`, `family`, `cores`, and `memory`, the per-card VRAM the
  Pod webhook divides a `.sliced.memory-mib` by. That divisor must be the card's exact MiB, the one the
  node's `.sliced.memory-mib` capacity and the device plugin's VRAM cap are computed from (the Devices
  group's `memory`, which the NVIDIA detector already corrected for a GDDR card's ECC share, x16/15). The
  flavor's `memory` note is the node label, rounded to the largest binary unit (contract §5.3, §7.3: an
  A10's 23028 MiB reads `22Gi`, an H100's 81559 MiB `80Gi`), so dividing by it would refuse a whole A10
  and let a slice ask for more than an H100 has. So `memory` is `<MiB>Mi` from the pool's Devices
  (`card_memory_mib`), and the rounded note only when no Devices report the model yet;
- a CPU type: `manufacturer`, `product`, `family` of its CPU key when the pools are split by CPU
  manufacturer; the collapsed pool says `manufacturer: generic`, as its InstanceTypeFlavor does (no single
  product names it);
- with `instance-type-aware-cpu-manufacturer` on, the flavor's `cpuDetail` note folded in: into `spec.cpu`
  for an accelerated type, into the spec's own CPU fields for a CPU type (whose manufacturer, product and
  family are already the CPU's);
- `displayName` defaults to the product (cut to its 64 characters).

A pool can have several flavors (different counts per node, different CPUs when unaware); a field is filled
only when every flavor that says something agrees, so a pool mixing two VRAM sizes gets no `memory` (the
Pod webhook then refuses a MiB slice, naming the missing memory, rather than divide by the wrong card).
Pure: functions over JSON; the webhook reads the flavors.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from gpustack_operator.api.json import JSONObj, as_str
from gpustack_operator.api.keys import (
    ACCELERATABLE_FEATURE_PREFIX,
    ARCH_LABEL,
    GENERIC,
    NOTE_ACCELERATABLE,
    NOTE_CORES,
    NOTE_CPU_DETAIL,
    NOTE_FAMILY,
    NOTE_MANUFACTURER,
    NOTE_MEMORY,
    NOTE_PREFIX,
    NOTE_PRODUCT,
    OS_LABEL,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_NODES,
)
from gpustack_operator.rules.naming.groups import accelerator_key
from gpustack_operator.rules.naming.labels import TRUE
from gpustack_operator.rules.naming.pools import pool_flavor_selector, pool_schedule_labels

__all__ = [
    "DESCRIPTORS",
    "card_memory_mib",
    "carry_over",
    "devices_selector",
    "enrich",
    "flavor_selector",
    "pool_descriptors",
]

MAX_DISPLAY_NAME: Final = 64
ACCELERATOR_NOTES: Final = (NOTE_MANUFACTURER, NOTE_PRODUCT, NOTE_FAMILY, NOTE_MEMORY, NOTE_CORES)
"""Notes copied to an accelerated type's spec field of the same name."""
CPU_NOTES: Final = (NOTE_MANUFACTURER, NOTE_PRODUCT, NOTE_FAMILY)
"""Notes copied to a CPU type's spec when the pools are split by CPU manufacturer."""
CPU_FIELDS: Final = (
    "physicalCores",
    "threadsPerPhysicalCore",
    "logicalCores",
    "stepping",
    "clockSpeed",
    "maxClockSpeed",
    "cacheLine",
)
CACHE_FIELDS: Final = ("l1i", "l1d", "l2", "l3")
CPU_IDENTITY: Final = ("manufacturer", "product", "family")
DESCRIPTORS: Final = (*ACCELERATOR_NOTES, *CPU_FIELDS, "cache", "cpu")
"""Every spec field this module may fill (what `carry_over` keeps across an update)."""


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def flavor_selector(obj: Mapping[str, Any], *, aware: bool) -> dict[str, str] | None:
    """The labels of the node ResourceFlavors of the type's pool (those its ClusterQueue draws from), or
    None when the spec names no pool (no os or arch, an accelerated type without acceleratorGroup: the
    validation refuses both)."""
    spec = _spec(obj)
    acceleratable = spec.get("acceleratable") is True
    accelerator_group = as_str(spec.get("acceleratorGroup"))
    if (acceleratable and not accelerator_group) or not (as_str(spec.get("os")) and as_str(spec.get("arch"))):
        return None
    general_group = as_str(spec.get("generalGroup")) or GENERIC
    labels = pool_schedule_labels(
        acceleratable,
        aware,
        general_group,
        accelerator_group,
        as_str(spec.get("os")),
        as_str(spec.get("arch")),
    )
    selector = pool_flavor_selector(labels)
    return None if selector is None else {**selector, RESOURCE_TYPE_LABEL: RESOURCE_TYPE_NODES}


def devices_selector(obj: Mapping[str, Any]) -> dict[str, str] | None:
    """The labels of the Devices of the nodes with the type's cards (the model's feature key, os, arch), or
    None for a CPU type (or one that names no card model)."""
    spec = _spec(obj)
    group = as_str(spec.get("acceleratorGroup"))
    os_name, arch = as_str(spec.get("os")), as_str(spec.get("arch"))
    if spec.get("acceleratable") is not True or not (group and os_name and arch):
        return None
    return {ACCELERATABLE_FEATURE_PREFIX + group: TRUE, OS_LABEL: os_name, ARCH_LABEL: arch}


def card_memory_mib(devices: Iterable[Mapping[str, Any]], accelerator_group: str) -> int | None:
    """The VRAM in MiB of one card of the model `accelerator_group`, as every Devices reporting it agrees;
    None when none reports it (or they disagree)."""
    found: set[int] = set()
    for obj in devices:
        spec = obj.get("spec")
        groups = spec.get("groups") if isinstance(spec, Mapping) else None
        for group in groups if isinstance(groups, list) else []:
            if not isinstance(group, Mapping):
                continue
            key = accelerator_key(as_str(group.get("manufacturer")), as_str(group.get("id")))
            memory = group.get("memory")
            if key == accelerator_group and type(memory) is int and memory > 0:
                found.add(memory)
    return found.pop() if len(found) == 1 else None


def _notes(flavor: Mapping[str, Any]) -> dict[str, str]:
    metadata = flavor.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return {}
    return {
        str(k)[len(NOTE_PREFIX) :]: v
        for k, v in annotations.items()
        if str(k).startswith(NOTE_PREFIX) and isinstance(v, str) and v
    }


def _cpu_detail(notes: Mapping[str, str]) -> dict[str, Any]:
    """The `cpuDetail` note as InstanceTypeAcceleratorCPU fields (strings only; a bad note is nothing)."""
    try:
        detail = json.loads(notes.get(NOTE_CPU_DETAIL, "") or "{}")
    except ValueError:
        return {}
    if not isinstance(detail, dict):
        return {}
    found: dict[str, Any] = {
        k: detail[k] for k in (*CPU_IDENTITY, *CPU_FIELDS) if isinstance(detail.get(k), str) and detail[k]
    }
    cache = detail.get("cache")
    if isinstance(cache, dict):
        kept = {k: cache[k] for k in CACHE_FIELDS if isinstance(cache.get(k), str) and cache[k]}
        if kept:
            found["cache"] = kept
    return found


def _agreed(values: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The fields on which every mapping that has them agrees (nested mappings field by field)."""
    seen: dict[str, list[Any]] = {}
    for value in values:
        for key, item in value.items():
            seen.setdefault(key, []).append(item)
    agreed: dict[str, Any] = {}
    for key, items in seen.items():
        if all(isinstance(item, Mapping) for item in items):
            nested = _agreed(items)
            if nested:
                agreed[key] = nested
        elif all(item == items[0] for item in items):
            agreed[key] = items[0]
    return agreed


def _flavor_descriptors(notes: Mapping[str, str], acceleratable: bool, aware: bool) -> dict[str, Any]:
    """What one flavor's notes say about the type's spec (empty for a flavor of the other kind)."""
    if (notes.get(NOTE_ACCELERATABLE) == TRUE) != acceleratable:
        return {}
    if acceleratable:
        found: dict[str, Any] = {k: notes[k] for k in ACCELERATOR_NOTES if k in notes}
        detail = _cpu_detail(notes) if aware else {}
        if detail:
            found["cpu"] = detail
        return found
    if not aware:
        return {NOTE_MANUFACTURER: GENERIC}
    found = {k: notes[k] for k in CPU_NOTES if k in notes}
    detail = _cpu_detail(notes)
    found.update({k: v for k, v in detail.items() if k not in CPU_IDENTITY})
    return found


def pool_descriptors(
    flavors: Iterable[Mapping[str, Any]], *, acceleratable: bool, aware: bool
) -> dict[str, Any]:
    """The spec fields the pool's live flavors agree on (flavors being deleted are left out)."""
    live = [f for f in flavors if not (f.get("metadata") or {}).get("deletionTimestamp")]
    return _agreed(_flavor_descriptors(_notes(f), acceleratable, aware) for f in live)


def _fill(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    """Set every field of `source` that `target` lacks (or leaves empty), recursing into objects."""
    for key, value in source.items():
        have = target.get(key)
        if isinstance(value, Mapping):
            if have in (None, ""):
                target[key] = copy.deepcopy(dict(value))
            elif isinstance(have, dict):
                _fill(have, value)
        elif have in (None, ""):
            target[key] = value


def enrich(
    obj: Mapping[str, Any],
    flavors: Iterable[Mapping[str, Any]],
    *,
    aware: bool,
    devices: Iterable[Mapping[str, Any]] = (),
) -> JSONObj:
    """§4.1's descriptor defaulting on a copy of `obj`: fill from the pool's flavors (and the card's exact
    VRAM from its `devices`) what the spec lacks, then default displayName to the product."""
    result: JSONObj = copy.deepcopy(dict(obj))
    spec = result.get("spec")
    if not isinstance(spec, dict):
        return result
    acceleratable = spec.get("acceleratable") is True
    found = pool_descriptors(flavors, acceleratable=acceleratable, aware=aware)
    if acceleratable:
        mib = card_memory_mib(devices, as_str(spec.get("acceleratorGroup")))
        if mib is not None:
            found[NOTE_MEMORY] = f"{mib}Mi"
    _fill(spec, found)
    product = spec.get("product")
    if spec.get("displayName") in (None, "") and isinstance(product, str) and product:
        spec["displayName"] = product[:MAX_DISPLAY_NAME]
    return result


def carry_over(old: Mapping[str, Any], new: Mapping[str, Any]) -> JSONObj:
    """On an update, the descriptors the stored type has and the new object omits, kept (a copy of `new`).

    They were defaulted at creation, and the spec is frozen but for displayName, description and inactive
    (§4.2), so a `kubectl replace` of the manifest the admin wrote must not read as changing them.
    """
    result: JSONObj = copy.deepcopy(dict(new))
    spec, before = result.get("spec"), _spec(old)
    if not isinstance(spec, dict):
        return result
    _fill(spec, {k: before[k] for k in DESCRIPTORS if k in before and before[k] not in (None, "")})
    return result
