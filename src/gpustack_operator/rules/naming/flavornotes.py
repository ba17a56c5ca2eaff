"""The descriptive notes a ResourceFlavor carries (`note.gpustack.ai/<k>`, contract §5.4).

Notes say what hardware a flavor stands for (manufacturer, product, VRAM, CPU details) so that the
InstanceTypeFlavor list and the InstanceType webhook can describe a pool without reading any node.
"""

from __future__ import annotations

import json
from typing import Final

from gpustack_operator.api import keys
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.groups import key_manufacturer
from gpustack_operator.rules.naming.manufacturers import manufacturer
from gpustack_operator.rules.naming.nodes import Node, node_annotations, node_capacity, node_labels, resolved
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for

# InstanceTypeCPU field (JSON name) <- node annotation, in the API type's field order.
_CPU_FIELDS: Final = (
    ("physicalCores", keys.CPU_PHYSICAL_CORES_ANNOTATION),
    ("threadsPerPhysicalCore", keys.CPU_THREADS_PER_CORE_ANNOTATION),
    ("logicalCores", keys.CPU_LOGICAL_CORES_ANNOTATION),
    ("stepping", keys.CPU_STEPPING_ANNOTATION),
    ("clockSpeed", keys.CPU_HZ_ANNOTATION),
    ("maxClockSpeed", keys.CPU_BOOST_FREQ_ANNOTATION),
    ("cacheLine", keys.CPU_CACHE_LINE_ANNOTATION),
)
_CACHE_FIELDS: Final = (
    ("l1i", keys.CPU_CACHE_L1I_ANNOTATION),
    ("l1d", keys.CPU_CACHE_L1D_ANNOTATION),
    ("l2", keys.CPU_CACHE_L2_ANNOTATION),
    ("l3", keys.CPU_CACHE_L3_ANNOTATION),
)


def _present(notes: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in notes.items() if value}


def cpu_detail(node: Node, general_key: str) -> str:
    """JSON of the node's CPU (InstanceTypeAcceleratorCPU field names), "" when nothing is reported."""
    annotations = node_annotations(node)
    cpu = _present({field: resolved(annotations.get(key)) for field, key in _CPU_FIELDS})
    cache = _present({field: resolved(annotations.get(key)) for field, key in _CACHE_FIELDS})
    if not (cpu or cache):
        return ""
    head = _present(
        {
            "manufacturer": key_manufacturer(general_key),
            "product": resolved(annotations.get(keys.CPU_NAME_ANNOTATION)),
            "family": resolved(annotations.get(keys.CPU_FAMILY_ANNOTATION)),
        }
    )
    detail: dict[str, object] = {**head, **cpu}
    if cache:
        detail["cache"] = cache
    return json.dumps(detail, separators=(",", ":"))


def cpu_notes(node: Node, general_key: str) -> dict[str, str]:
    """Notes of a CPU flavor: manufacturer (from the key), product/family (from the CPU annotations)."""
    annotations = node_annotations(node)
    return _present(
        {
            keys.NOTE_ACCELERATABLE: "false",
            keys.NOTE_GENERAL_GROUP: general_key,
            keys.NOTE_MANUFACTURER: key_manufacturer(general_key),
            keys.NOTE_PRODUCT: resolved(annotations.get(keys.CPU_NAME_ANNOTATION)),
            keys.NOTE_FAMILY: resolved(annotations.get(keys.CPU_FAMILY_ANNOTATION)),
            keys.NOTE_CPU_DETAIL: cpu_detail(node, general_key),
        }
    )


def sliceable(node: Node, manufacturer_name: str, environ: Environ = DEFAULT_ENVIRON) -> bool:
    """True when the node advertises sliced units for the manufacturer's cards."""
    known = manufacturer(manufacturer_name, environ)
    if known is None:
        return False
    text = node_capacity(node).get(resource_name_for(known.resource_name, ResourceKind.SLICED_UNITS), "0")
    try:
        return Quantity.parse(text) > 0
    except InvalidQuantityError:
        return False


def accelerator_notes(
    node: Node, general_key: str, accel_key: str, environ: Environ = DEFAULT_ENVIRON
) -> dict[str, str]:
    """Notes of a device flavor: descriptors from the model's labels plus the CPU it is paired with."""
    labels = node_labels(node)
    model = keys.ACCELERATABLE_FEATURE_PREFIX + accel_key
    mfr = key_manufacturer(accel_key)
    return _present(
        {
            keys.NOTE_ACCELERATABLE: "true",
            keys.NOTE_GENERAL_GROUP: general_key,
            keys.NOTE_ACCELERATOR_GROUP: accel_key,
            keys.NOTE_MANUFACTURER: mfr,
            keys.NOTE_PRODUCT: labels.get(model + keys.PRODUCT_SUFFIX, ""),
            keys.NOTE_FAMILY: labels.get(model + keys.FAMILY_SUFFIX, ""),
            keys.NOTE_MEMORY: labels.get(model + keys.MEMORY_SUFFIX, ""),
            keys.NOTE_CORES: labels.get(model + keys.CORES_SUFFIX, ""),
            keys.NOTE_SLICEABLE: "true" if sliceable(node, mfr, environ) else "false",
            keys.NOTE_CPU_DETAIL: cpu_detail(node, general_key),
        }
    )
