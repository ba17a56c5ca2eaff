"""Which nodes (and ResourceFlavors) a pool covers, as labels (contract §7.7).

An InstanceType and its ClusterQueue are stamped with the pool's schedule labels; the queue later finds
its ResourceFlavors (and Devices) by selecting on the same labels. The two functions are inverses.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpustack_operator.api.keys import (
    ACCELERATABLE_FEATURE_PREFIX,
    ACCELERATABLE_LABEL,
    ARCH_LABEL,
    GENERAL_FEATURE_PREFIX,
    GENERIC,
    OS_LABEL,
)
from gpustack_operator.rules.naming.labels import FALSE, TRUE


def pool_schedule_labels(
    acceleratable: bool, aware: bool, general_group: str, accelerator_group: str, os: str, arch: str
) -> dict[str, str]:
    """PoolScheduleLabels: the acceleratable boolean, os/arch when set and the pool's feature keys."""
    labels = {ACCELERATABLE_LABEL: TRUE if acceleratable else FALSE}
    if os:
        labels[OS_LABEL] = os
    if arch:
        labels[ARCH_LABEL] = arch
    if acceleratable and accelerator_group:
        labels[ACCELERATABLE_FEATURE_PREFIX + accelerator_group] = TRUE
    if aware and general_group not in ("", GENERIC):
        labels[GENERAL_FEATURE_PREFIX + general_group] = TRUE
    return labels


def is_feature_key(label: str) -> bool:
    """True for a `general.feature.gpustack.ai/` or `acceleratable.feature.gpustack.ai/` label."""
    return label.startswith((GENERAL_FEATURE_PREFIX, ACCELERATABLE_FEATURE_PREFIX))


def pool_flavor_selector(labels: Mapping[str, str]) -> dict[str, str] | None:
    """PoolFlavorSelector: os/arch, the acceleratable boolean and the `true` feature keys of ``labels``.

    None when the labels hold no discriminator (neither the boolean nor a feature key): such a selector
    would match every flavor.
    """
    selector = {key: labels[key] for key in (OS_LABEL, ARCH_LABEL) if key in labels}
    discriminators = {key: value for key, value in labels.items() if is_feature_key(key) and value == TRUE}
    if labels.get(ACCELERATABLE_LABEL) in (TRUE, FALSE):
        discriminators[ACCELERATABLE_LABEL] = labels[ACCELERATABLE_LABEL]
    return {**selector, **discriminators} if discriminators else None
