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
`cpu` stays: it is the CPU pools' quota. A slice's units transformation is multiplied by its `.sliced`
card count (`multiplyBy`), so a container asking two slices of 30 units is charged 60 credits, as the
admission check counts it (rules.admission.demand); a container without `.sliced` is charged once.

`manager_configuration` is the part of Kueue's Configuration that is ours and the same everywhere: the
integrations, the resources stanza, client tuning. The sandbox adds its local ports and certificate paths
(sandbox.kueue); a Helm install hands the same to the Kueue subchart (install.kueue), so they cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


MANAGER_CONFIG_MAP: Final = "kueue-manager-config"
"""The ConfigMap Kueue runs from, in its kustomize manifests and its Helm chart (fullnameOverride `kueue`)."""
MANAGER_CONFIG_KEY: Final = "controller_manager_config.yaml"
FRAMEWORKS: Final = ("batch/job", "pod")
"""Kueue integrations we run with: Jobs, and plain Pods (an Instance is one Pod in its type's queue)."""


def _replace(name: str, outputs: dict[str, str], multiply_by: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"input": name, "strategy": "Replace", "outputs": outputs}
    if multiply_by is not None:
        found["multiplyBy"] = multiply_by
    return found


def resource_transformations(environ: Environ = DEFAULT_ENVIRON) -> list[dict[str, Any]]:
    """Kueue `resources.transformations`: each manufacturer's resources to its credits, or to nothing."""
    found = []
    for name, mfr in sorted(manufacturers(environ).items()):
        credits = credits_resource_name(name)
        for kind, per_unit in _PER_UNIT.items():
            multiply_by = (
                resource_name_for(mfr.resource_name, ResourceKind.SLICED)
                if kind is ResourceKind.SLICED_UNITS
                else None
            )
            found.append(
                _replace(resource_name_for(mfr.resource_name, kind), {credits: str(per_unit)}, multiply_by)
            )
        found += [_replace(resource_name_for(mfr.resource_name, kind), {}) for kind in _DROPPED]
        found.append(_replace(visibility_resource_name(name), {}))
    return found


def kueue_resources(environ: Environ = DEFAULT_ENVIRON) -> dict[str, Any]:
    """The `resources` stanza of Kueue's Configuration."""
    return {
        "excludeResourcePrefixes": list(EXCLUDED_RESOURCE_PREFIXES),
        "transformations": resource_transformations(environ),
    }


@dataclass(frozen=True)
class Tuning:
    """Kueue's client rate to kube-apiserver and its Workload reconcile workers; the defaults are what its
    release manifests set (without them its client is held to client-go's 20 requests/s, and a Workload
    takes several requests to admit). Benchmarks raise them to see past Kueue's own limits."""

    qps: float = 50.0
    burst: int = 100
    workload_workers: int = 5

    def manager(self) -> dict[str, Any]:
        """The `clientConnection` and `controller` stanzas of Kueue's Configuration."""
        concurrency = {
            "Job.batch": 5,
            "Pod": 5,
            "Workload.kueue.x-k8s.io": self.workload_workers,
            "LocalQueue.kueue.x-k8s.io": 1,
            "Cohort.kueue.x-k8s.io": 1,
            "ClusterQueue.kueue.x-k8s.io": 1,
            "ResourceFlavor.kueue.x-k8s.io": 1,
        }
        return {
            "clientConnection": {"qps": self.qps, "burst": self.burst},
            "controller": {"groupKindConcurrency": concurrency},
        }


RELEASE_TUNING = Tuning()
"""What Kueue's release manifests configure."""


def manager_configuration(
    environ: Environ = DEFAULT_ENVIRON,
    frameworks: tuple[str, ...] = FRAMEWORKS,
    tuning: Tuning = RELEASE_TUNING,
) -> dict[str, Any]:
    """Our part of Kueue's config.kueue.x-k8s.io/v1beta2 Configuration, wherever Kueue runs."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        **tuning.manager(),
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(frameworks)},
        "resources": kueue_resources(environ),
    }


def _same(found: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """A transformation as Kueue reads it: strategy (default Retain), outputs as quantities, multiplyBy."""
    outputs = {name: str(value) for name, value in (found.get("outputs") or {}).items()}
    return (
        found.get("strategy", "Retain") == wanted["strategy"]
        and outputs == wanted["outputs"]
        and found.get("multiplyBy") == wanted.get("multiplyBy")
    )


def configuration_problems(config: Mapping[str, Any], environ: Environ = DEFAULT_ENVIRON) -> list[str]:
    """What a Kueue Configuration lacks for the pools to count this cluster's cards (empty: nothing).

    Each problem names what is missing and what it breaks; the transformations are compared with those
    `manager_configuration` writes for the manufacturers `environ` enables.
    """
    problems = []
    frameworks = set(((config.get("integrations") or {}).get("frameworks")) or ())
    missing_frameworks = [f for f in FRAMEWORKS if f not in frameworks]
    if missing_frameworks:
        problems.append(
            f"integrations.frameworks lacks {', '.join(missing_frameworks)}: Kueue does not queue those "
            "workloads (an Instance runs as a plain Pod)"
        )
    resources = config.get("resources") or {}
    found = {t.get("input"): t for t in resources.get("transformations") or () if isinstance(t, Mapping)}
    wrong = [t["input"] for t in resource_transformations(environ) if not _same(found.get(t["input"], {}), t)]
    if wrong:
        more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
        problems.append(
            f"resources.transformations lacks or differs for {', '.join(wrong[:3])}{more}: GPU requests are "
            "not counted as credits.gpustack.ai/<manufacturer>, so the GPU pools' quota counts nothing"
        )
    prefixes = set(resources.get("excludeResourcePrefixes") or ())
    missing_prefixes = [p for p in EXCLUDED_RESOURCE_PREFIXES if p not in prefixes]
    if missing_prefixes:
        problems.append(
            f"resources.excludeResourcePrefixes lacks {', '.join(missing_prefixes)}: Kueue asks the pools' "
            "queues for quota they do not declare, and a Pod that sets memory is never admitted"
        )
    return problems
