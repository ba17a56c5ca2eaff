"""Typed shape of Kueue's Workload (kueue.x-k8s.io/v1beta2) and the state values of its admission checks.

Why this module exists: Kueue creates a Workload for every managed pod; the admission-check controller reads
its quota reservation (``status.admission``) and writes only its own entry of ``status.admissionChecks``.
These TypedDicts name those fields (shared/guides/kueue-api.md §6); the quota kinds are in ``kueue``.

Rules the types cannot carry (guide §6.4, §10): write a check's state only on a workload that has
QuotaReserved=True and is not Evicted; never write ``retryCount`` (Kueue's); move ``lastTransitionTime`` only
when ``state`` changes. ``podSets[].template`` is a full PodTemplateSpec and stays an untyped dict.

No ``from __future__ import annotations`` (see api/types/__init__).
"""

import enum
from typing import Any, NotRequired, TypedDict

from gpustack_operator.api.types.common import Condition, ObjectMeta, Quantity, Toleration


class CheckState(enum.StrEnum):
    """``status.admissionChecks[].state``."""

    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    """Evicts the workload (deleting an admitted pod) and requeues it."""
    REJECTED = "Rejected"
    """Deactivates the workload; a gated plain pod then stays gated."""


class WorkloadCondition(enum.StrEnum):
    """The condition types of a Workload an admission-check controller looks at."""

    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    FINISHED = "Finished"
    DEACTIVATION_TARGET = "DeactivationTarget"


class PodSet(TypedDict):
    name: str
    """``main`` for a single plain pod."""
    template: dict[str, Any]
    """corev1.PodTemplateSpec (a copy of the pod's spec)."""
    count: int
    minCount: NotRequired[int]


class PriorityClassRef(TypedDict):
    group: str
    kind: str
    name: str


class WorkloadSpec(TypedDict, total=False):
    podSets: list[PodSet]
    queueName: str
    """The LocalQueue's name."""
    priorityClassRef: PriorityClassRef
    priority: int
    active: bool
    """Absent means true; false evicts the workload and keeps it out of the queue."""
    maximumExecutionTimeSeconds: int


class PodSetAssignment(TypedDict):
    name: str
    flavors: NotRequired[dict[str, str]]
    """resource name -> ResourceFlavor name, for the resources that got a flavor."""
    resourceUsage: NotRequired[dict[str, Quantity]]
    """Total for all pods of the pod set, after Kueue's transformations: the quota-relevant numbers."""
    count: NotRequired[int]


class Admission(TypedDict):
    clusterQueue: str
    podSetAssignments: list[PodSetAssignment]


class PodSetRequest(TypedDict):
    name: str
    resources: NotRequired[dict[str, Quantity]]


class PodSetUpdate(TypedDict):
    """Additions merged into the pods of one pod set when they are ungated (never replacements)."""

    name: str
    labels: NotRequired[dict[str, str]]
    annotations: NotRequired[dict[str, str]]
    nodeSelector: NotRequired[dict[str, str]]
    tolerations: NotRequired[list[Toleration]]


class AdmissionCheckState(TypedDict):
    name: str
    state: str
    """A ``CheckState`` value."""
    lastTransitionTime: str
    message: str
    requeueAfterSeconds: NotRequired[int]
    retryCount: NotRequired[int]
    """Kueue's: read it for a backoff, never write it."""
    podSetUpdates: NotRequired[list[PodSetUpdate]]


class RequeueState(TypedDict, total=False):
    count: int
    requeueAt: str


class WorkloadStatus(TypedDict, total=False):
    conditions: list[Condition]
    admission: Admission
    """Set when quota is reserved; its fields never change while it is set."""
    resourceRequests: list[PodSetRequest]
    """Quota-relevant requests of a workload not yet admitted (emptied once admitted)."""
    requeueState: RequeueState
    admissionChecks: list[AdmissionCheckState]


class Workload(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: WorkloadSpec
    status: NotRequired[WorkloadStatus]
