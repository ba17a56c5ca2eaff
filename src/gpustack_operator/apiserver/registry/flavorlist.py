"""InstanceTypeFlavors, computed on every LIST from Kueue's node ResourceFlavors (contract §3.2); pure.

Each flavor of managed nodes (label `resource.gpustack.ai/type=nodes`) carries notes
(`note.gpustack.ai/<k>` annotations); a flavor being deleted is skipped. A CPU flavor shows its CPU identity
when the `instance-type-aware-cpu-manufacturer` setting is on and collapses to `generic` otherwise; an
accelerated flavor shows its accelerator and, when aware, its CPU key. Each pool appears once, named
as their pool (`gpustack--<aKey>`, `gpustack--<gKey>--<aKey>`, `gpustack--generic`, `gpustack--<gKey>`),
sorted by manufacturer, product, memory (as quantities where both parse), CPU key, accelerator key.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    GENERIC,
    NOTE_ACCELERATABLE,
    NOTE_ACCELERATOR_GROUP,
    NOTE_CORES,
    NOTE_FAMILY,
    NOTE_GENERAL_GROUP,
    NOTE_MANUFACTURER,
    NOTE_MEMORY,
    NOTE_PREFIX,
    NOTE_PRODUCT,
    NOTE_SLICEABLE,
)
from gpustack_operator.api.quantity import InvalidQuantityError, parse_quantity
from gpustack_operator.rules.naming.flavors import pool_name

__all__ = ["flavor_list"]


def _notes(flavor: JSONObj) -> dict[str, str]:
    annotations = (flavor.get("metadata") or {}).get("annotations") or {}
    return {k[len(NOTE_PREFIX) :]: str(v) for k, v in annotations.items() if k.startswith(NOTE_PREFIX)}


def _spec(flavor: JSONObj, aware: bool) -> JSONObj | None:
    if (flavor.get("metadata") or {}).get("deletionTimestamp"):
        return None
    notes = _notes(flavor)
    identity = {k: notes.get(k, "") for k in (NOTE_MANUFACTURER, NOTE_PRODUCT, NOTE_FAMILY)}
    spec: JSONObj
    if notes.get(NOTE_ACCELERATABLE) != "true":
        if aware:
            spec = {"generalGroup": notes.get(NOTE_GENERAL_GROUP, ""), "acceleratable": False, **identity}
        else:
            spec = {"generalGroup": GENERIC, "acceleratable": False, NOTE_MANUFACTURER: GENERIC}
    else:
        spec = {
            "acceleratorGroup": notes.get(NOTE_ACCELERATOR_GROUP, ""),
            "acceleratable": True,
            **identity,
            "memory": notes.get(NOTE_MEMORY, ""),
            "cores": notes.get(NOTE_CORES, ""),
            "sliceable": notes.get(NOTE_SLICEABLE) == "true",
        }
        if aware:
            spec["generalGroup"] = notes.get(NOTE_GENERAL_GROUP, "")
    spec = {k: v for k, v in spec.items() if v != "" or k == "acceleratable"}
    if not spec.get("generalGroup") and not spec.get("acceleratorGroup"):
        return None
    return spec


def _compare_memory(a: str, b: str) -> int:
    try:
        qa, qb = parse_quantity(a), parse_quantity(b)
    except InvalidQuantityError:
        return (a > b) - (a < b)
    return (qb < qa) - (qa < qb)


def _compare(a: JSONObj, b: JSONObj) -> int:
    sa, sb = a["spec"], b["spec"]
    for key in ("manufacturer", "product"):
        x, y = str(sa.get(key, "")), str(sb.get(key, ""))
        if x != y:
            return (x > y) - (x < y)
    if (memory := _compare_memory(str(sa.get("memory", "")), str(sb.get("memory", "")))) != 0:
        return memory
    for key in ("generalGroup", "acceleratorGroup"):
        x, y = str(sa.get(key, "")), str(sb.get(key, ""))
        if x != y:
            return (x > y) - (x < y)
    return 0


def flavor_list(resource_flavors: Iterable[JSONObj], *, aware: bool, api_version: str) -> list[JSONObj]:
    """The InstanceTypeFlavors of these ResourceFlavors, de-duplicated and sorted."""
    seen: dict[str, JSONObj] = {}
    for flavor in resource_flavors:
        spec = _spec(flavor, aware)
        if spec is None:
            continue
        name = pool_name(aware, spec.get("generalGroup", ""), spec.get("acceleratorGroup", ""))
        seen.setdefault(
            name,
            {
                "apiVersion": api_version,
                "kind": "InstanceTypeFlavor",
                "metadata": {"name": name},
                "spec": spec,
            },
        )
    return sorted(seen.values(), key=functools.cmp_to_key(_compare))
