"""The `gpustack-cpu-info` NodeFeatureRule the worker applies (contract §5.3, architecture Stage 1).

NFD's cpu source labels a node only with `cpu-model.vendor_id|family|id`; the general node key also wants
the CPU's name and details, and the pools want an explicit `feature.gpustack.ai/acceleratable=false` on
nodes without an accelerator from a managed manufacturer. This rule asks nfd-master for both: node
annotations `feature.gpustack.ai/cpu-<detail>` = `@cpu.model.<detail>` on every node whose CPU vendor is
known, and the `false` label where no PCI device of an accelerator class has a managed vendor ID. NFD has no
"no device matches" operator, so the second part is two rules: one sets a variable when such a device
exists, the next matches when that variable does not (NFD feeds each rule's output to the later ones as the
`rule.matched` feature).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from gpustack_operator.api.keys import (
    ACCELERATABLE_LABEL,
    CPU_ANNOTATION_PREFIX,
    CPU_BOOST_FREQ_ANNOTATION,
    CPU_CACHE_L1D_ANNOTATION,
    CPU_CACHE_L1I_ANNOTATION,
    CPU_CACHE_L2_ANNOTATION,
    CPU_CACHE_L3_ANNOTATION,
    CPU_CACHE_LINE_ANNOTATION,
    CPU_FAMILY_ANNOTATION,
    CPU_HZ_ANNOTATION,
    CPU_LOGICAL_CORES_ANNOTATION,
    CPU_NAME_ANNOTATION,
    CPU_PHYSICAL_CORES_ANNOTATION,
    CPU_STEPPING_ANNOTATION,
    CPU_THREADS_PER_CORE_ANNOTATION,
    UNRESOLVED_MARK,
)
from gpustack_operator.rules.naming.labels import FALSE, TRUE
from gpustack_operator.rules.naming.objects import NODE_FEATURE_API_VERSION

RULE_NAME: Final = "gpustack-cpu-info"
KIND: Final = "NodeFeatureRule"
CPU_MODEL_FEATURE: Final = "cpu.model"
PCI_DEVICE_FEATURE: Final = "pci.device"
PCI_DEVICE_CLASSES: Final = ("02", "03", "0b", "12")
"""PCI class prefixes of accelerators: what NFD's worker is configured to report (contract §5.1, §10)."""
HAS_ACCELERATOR_VAR: Final = "gpustack-has-acceleratable-device"

CPU_ANNOTATIONS: Final = (
    CPU_NAME_ANNOTATION,
    CPU_FAMILY_ANNOTATION,
    CPU_PHYSICAL_CORES_ANNOTATION,
    CPU_THREADS_PER_CORE_ANNOTATION,
    CPU_LOGICAL_CORES_ANNOTATION,
    CPU_STEPPING_ANNOTATION,
    CPU_CACHE_LINE_ANNOTATION,
    CPU_HZ_ANNOTATION,
    CPU_BOOST_FREQ_ANNOTATION,
    CPU_CACHE_L1I_ANNOTATION,
    CPU_CACHE_L1D_ANNOTATION,
    CPU_CACHE_L2_ANNOTATION,
    CPU_CACHE_L3_ANNOTATION,
)


def cpu_model_attribute(annotation: str) -> str:
    """The `cpu.model` attribute behind an annotation: `feature.gpustack.ai/cpu-hz` -> `hz`."""
    return annotation.removeprefix(CPU_ANNOTATION_PREFIX).replace("-", "_")


def cpu_annotation_values() -> dict[str, str]:
    """Each annotation's value as NFD sees it: a `@cpu.model.<attribute>` reference."""
    return {
        key: f"{UNRESOLVED_MARK}{CPU_MODEL_FEATURE}.{cpu_model_attribute(key)}" for key in CPU_ANNOTATIONS
    }


def _match(feature: str, expressions: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"feature": feature, "matchExpressions": expressions}]


def cpu_info_rule(
    vendor_ids: Iterable[str], pci_classes: Sequence[str] = PCI_DEVICE_CLASSES
) -> dict[str, Any]:
    """The whole NodeFeatureRule for the managed manufacturers' PCI vendor IDs (e.g. `10de`)."""
    vendors = sorted({v.lower() for v in vendor_ids})
    if not vendors:
        raise ValueError("cpu_info_rule needs at least one managed PCI vendor ID")
    return {
        "apiVersion": NODE_FEATURE_API_VERSION,
        "kind": KIND,
        "metadata": {"name": RULE_NAME},
        "spec": {
            "rules": [
                {
                    "name": "gpustack cpu details as node annotations",
                    "annotations": cpu_annotation_values(),
                    "matchFeatures": _match(CPU_MODEL_FEATURE, {"vendor_id": {"op": "Exists"}}),
                },
                {
                    "name": "gpustack node has an acceleratable pci device",
                    "vars": {HAS_ACCELERATOR_VAR: TRUE},
                    "matchFeatures": _match(
                        PCI_DEVICE_FEATURE,
                        {
                            "class": {"op": "InRegexp", "value": [f"^{c}" for c in pci_classes]},
                            "vendor": {"op": "In", "value": vendors},
                        },
                    ),
                },
                {
                    "name": "gpustack node without acceleratable pci device",
                    "labels": {ACCELERATABLE_LABEL: FALSE},
                    "matchFeatures": _match("rule.matched", {HAS_ACCELERATOR_VAR: {"op": "DoesNotExist"}}),
                },
            ]
        },
    }
