"""What Kueue must be configured with for the chain to count GPUs as credits (contract §5.2, §7.9).

Kueue quota-checks every resource a pod requests, and v0.17 has no switch to ignore undeclared ones
(`quotaCheckStrategy` arrives in v0.18), so two settings of its Configuration carry the design:
- `resources.transformations`: every manufacturer's counted resources become one currency,
  `credits.gpustack.ai/<mfr>` (a whole card 1,600,000; a share 160,000; a slice its units), and the
  companions of a sliced request (the `.sliced` card count, the cores/memory budgets, the sidecar's
  visibility tokens) are dropped (`Replace` with no outputs), so a queue declares one resource per vendor;
- `resources.excludeResourcePrefixes`: memory, ephemeral storage, hugepages and the pod count are never
  quota in this design (the InstanceType's unit spec bounds them), so they are kept out instead of being
  declared with a made-up nominal quota.
`cpu` stays: it is the CPU pools' quota. The sandbox writes this into Kueue's configuration file; a Helm
install renders the same into Kueue's ConfigMap.
"""

from __future__ import annotations

from typing import Any, Final

from gpustack_operator.rules.capacity.credits import CREDITS_PER_CARD
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.resources import (
    ResourceKind,
    credits_resource_name,
    resource_name_for,
    visibility_resource_name,
)

SHARED_CREDITS: Final = CREDITS_PER_CARD // 10
EXCLUDED_RESOURCE_PREFIXES: Final = ("memory", "ephemeral-storage", "hugepages-", "pods")
_PER_UNIT: Final = {
    ResourceKind.EXCLUSIVE: CREDITS_PER_CARD,
    ResourceKind.SHARED: SHARED_CREDITS,
    ResourceKind.SLICED_UNITS: 1,
}
_DROPPED: Final = (
    ResourceKind.SLICED,
    ResourceKind.SLICED_CORES_PERCENTAGE,
    ResourceKind.SLICED_MEMORY_PERCENTAGE,
    ResourceKind.SLICED_MEMORY_MIB,
)


def _replace(name: str, outputs: dict[str, str]) -> dict[str, Any]:
    return {"input": name, "strategy": "Replace", "outputs": outputs}


def resource_transformations(environ: Environ = DEFAULT_ENVIRON) -> list[dict[str, Any]]:
    """Kueue `resources.transformations`: each manufacturer's resources to its credits, or to nothing."""
    found = []
    for name, mfr in sorted(manufacturers(environ).items()):
        credits = credits_resource_name(name)
        for kind, per_unit in _PER_UNIT.items():
            found.append(_replace(resource_name_for(mfr.resource_name, kind), {credits: str(per_unit)}))
        found += [_replace(resource_name_for(mfr.resource_name, kind), {}) for kind in _DROPPED]
        found.append(_replace(visibility_resource_name(name), {}))
    return found


def kueue_resources(environ: Environ = DEFAULT_ENVIRON) -> dict[str, Any]:
    """The `resources` stanza of Kueue's Configuration."""
    return {
        "excludeResourcePrefixes": list(EXCLUDED_RESOURCE_PREFIXES),
        "transformations": resource_transformations(environ),
    }
