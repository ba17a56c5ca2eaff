"""Shapes shared by several kinds: object metadata, references, quantities, conditions, core scheduling types.

Why this module exists: ObjectMeta, metav1.Condition, label selectors and tolerations appear in many kinds
(ours and Kueue's); declaring them once keeps the per-kind modules to their own fields.
"""

from typing import Any, Literal, NotRequired, TypedDict

Quantity = str
"""A resource.Quantity in canonical text (``500m``, ``16Gi``); JSON integers load as their decimal text."""


class ObjectMeta(TypedDict, total=False):
    """The metadata fields the operator reads or writes (the API server keeps the rest as is)."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[dict[str, Any]]


class LocalObjectReference(TypedDict, total=False):
    """A reference to an object in the same namespace, by name."""

    name: str


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(TypedDict):
    """metav1.Condition, the entries of ``status.conditions``; all keys but observedGeneration are required.

    Set them with ``api.conditions.set_condition``: it keeps observedGeneration and lastTransitionTime right.
    """

    type: str
    status: ConditionStatus
    observedGeneration: NotRequired[int]
    lastTransitionTime: str
    """RFC 3339 in UTC, seconds precision: ``2025-01-02T03:04:05Z``."""
    reason: str
    message: str


class LabelSelectorRequirement(TypedDict):
    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""
    values: NotRequired[list[str]]


class LabelSelector(TypedDict, total=False):
    """metav1.LabelSelector; ``{}`` selects everything (Kueue reads an absent selector as "nothing")."""

    matchLabels: dict[str, str]
    matchExpressions: list[LabelSelectorRequirement]


class Toleration(TypedDict, total=False):
    """corev1.Toleration."""

    key: str
    operator: str
    """``Equal`` (default) or ``Exists``."""
    value: str
    effect: str
    """``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``; empty matches all."""
    tolerationSeconds: int


class Taint(TypedDict):
    """corev1.Taint."""

    key: str
    value: NotRequired[str]
    effect: str
    timeAdded: NotRequired[str]
