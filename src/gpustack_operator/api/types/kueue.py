"""Typed shapes of the Kueue kinds the worker owns: ResourceFlavor, ClusterQueue, LocalQueue, AdmissionCheck.

Why this module exists: the worker's controllers build these objects and read their status as JSON dicts;
typing them lets mypy catch a misspelt field that Kueue's webhooks would reject (or its CRD silently prune) at
run time. Workloads, which Kueue creates and we only read and annotate, are in ``kueue_workload``.

The version is ``kueue.x-k8s.io/v1beta2``, which Kueue v0.17 stores and prefers (shared/guides/kueue-api.md
§1). v1beta1 names (``spec.cohort``, ``spec.admissionChecks``, ``retryDelayMinutes``) do not exist there and
are absent here on purpose; so is ``resources.quotaCheckStrategy`` (v0.18+). Only the fields the guide lists
are typed; the API server keeps any others. Keys the CRD requires are required; everything else is
``NotRequired`` (Kueue writes most fields ``omitempty``, and a status is empty until Kueue first writes it).
Unlike our kinds there is no schema in ``api/schema`` to check these against: Kueue's CRDs are the authority,
exercised by tests/integration on the real Kueue.

No ``from __future__ import annotations`` (see api/types/__init__).
"""

import enum
from typing import Final, NotRequired, TypedDict

from gpustack_operator.api.types.common import (
    Condition,
    LabelSelector,
    ObjectMeta,
    Quantity,
    Taint,
    Toleration,
)

GROUP: Final = "kueue.x-k8s.io"
VERSION: Final = "v1beta2"
API_VERSION: Final = f"{GROUP}/{VERSION}"

RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
"""Kueue's own finalizer on flavors, queues and checks; never put it in an applied body (Kueue owns it)."""
ACTIVE: Final = "Active"
"""The condition type of ClusterQueue, LocalQueue and AdmissionCheck; an external check's owner sets it."""


class StopPolicy(enum.StrEnum):
    """``spec.stopPolicy`` of ClusterQueue and LocalQueue (guide §3.4)."""

    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class QueueingStrategy(enum.StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class FairSharing(TypedDict, total=False):
    weight: Quantity


# ---- ResourceFlavor (cluster-scoped; no status subresource) -------------------------------------------


class ResourceFlavorSpec(TypedDict, total=False):
    nodeLabels: dict[str, str]
    """At most 8; copied into the nodeSelector of pods admitted on this flavor."""
    nodeTaints: list[Taint]
    tolerations: list[Toleration]
    """Added to the pods admitted on this flavor."""
    topologyName: str
    """Only for topology-aware scheduling; leave unset."""


class ResourceFlavor(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: ResourceFlavorSpec


# ---- ClusterQueue (cluster-scoped) --------------------------------------------------------------------


class ResourceQuota(TypedDict):
    name: str
    nominalQuota: Quantity
    borrowingLimit: NotRequired[Quantity]
    """Must be absent without a cohort (as must lendingLimit)."""
    lendingLimit: NotRequired[Quantity]


class FlavorQuotas(TypedDict):
    name: str
    """A ResourceFlavor's name."""
    resources: list[ResourceQuota]
    """Exactly the group's coveredResources, in the same order."""


class ResourceGroup(TypedDict):
    coveredResources: list[str]
    flavors: list[FlavorQuotas]


class AdmissionCheckStrategyRule(TypedDict):
    name: str
    """An AdmissionCheck's name."""
    onFlavors: NotRequired[list[str]]
    """Empty: every flavor of the ClusterQueue."""


class AdmissionChecksStrategy(TypedDict):
    admissionChecks: list[AdmissionCheckStrategyRule]


class FlavorFungibility(TypedDict, total=False):
    whenCanBorrow: str
    whenCanPreempt: str
    preference: str


class BorrowWithinCohort(TypedDict, total=False):
    policy: str
    maxPriorityThreshold: int


class ClusterQueuePreemption(TypedDict, total=False):
    reclaimWithinCohort: str
    borrowWithinCohort: BorrowWithinCohort
    withinClusterQueue: str
    """``Never`` (default), ``LowerPriority`` or ``LowerOrNewerEqualPriority``; the one that matters alone."""


class ClusterQueueSpec(TypedDict, total=False):
    resourceGroups: list[ResourceGroup]
    cohortName: str
    """Omit for an isolated pool (no borrowing, no lending)."""
    queueingStrategy: str
    """A ``QueueingStrategy`` value."""
    namespaceSelector: LabelSelector
    """Absent admits no namespace; ``{}`` admits all."""
    flavorFungibility: FlavorFungibility
    preemption: ClusterQueuePreemption
    admissionChecksStrategy: AdmissionChecksStrategy
    stopPolicy: str
    """A ``StopPolicy`` value."""
    fairSharing: FairSharing


class ResourceUsage(TypedDict):
    name: str
    total: NotRequired[Quantity]
    borrowed: NotRequired[Quantity]


class FlavorUsage(TypedDict):
    name: str
    resources: list[ResourceUsage]


class ClusterQueueStatus(TypedDict, total=False):
    conditions: list[Condition]
    flavorsReservation: list[FlavorUsage]
    """Quota reserved by workloads with QuotaReserved=True."""
    flavorsUsage: list[FlavorUsage]
    """Quota used by admitted workloads."""
    pendingWorkloads: int
    reservingWorkloads: int
    admittedWorkloads: int


class ClusterQueue(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: ClusterQueueSpec
    status: NotRequired[ClusterQueueStatus]


# ---- LocalQueue (namespaced) --------------------------------------------------------------------------


class LocalQueueSpec(TypedDict, total=False):
    clusterQueue: str
    """Immutable; without it the LocalQueue is never usable."""
    stopPolicy: str
    fairSharing: FairSharing


class LocalQueueResourceUsage(TypedDict):
    name: str
    total: NotRequired[Quantity]


class LocalQueueFlavorUsage(TypedDict):
    name: str
    resources: list[LocalQueueResourceUsage]


class LocalQueueStatus(TypedDict, total=False):
    conditions: list[Condition]
    pendingWorkloads: int
    reservingWorkloads: int
    admittedWorkloads: int
    flavorsReservation: list[LocalQueueFlavorUsage]
    flavorsUsage: list[LocalQueueFlavorUsage]


class LocalQueue(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: LocalQueueSpec
    status: NotRequired[LocalQueueStatus]


# ---- AdmissionCheck (cluster-scoped) ------------------------------------------------------------------


class AdmissionCheckParametersReference(TypedDict):
    apiGroup: str
    kind: str
    name: str


class AdmissionCheckSpec(TypedDict):
    controllerName: str
    """Immutable; Kueue ignores checks whose controller is not its own, so their owner must set Active."""
    parameters: NotRequired[AdmissionCheckParametersReference]


class AdmissionCheckStatus(TypedDict, total=False):
    conditions: list[Condition]


class AdmissionCheck(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: AdmissionCheckSpec
    status: NotRequired[AdmissionCheckStatus]
