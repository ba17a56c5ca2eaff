"""Shapes shared by several kinds: object metadata, local references, quantities.

Why this module exists: ObjectMeta and LocalObjectReference appear in every kind; declaring them once keeps
the per-kind modules to their own fields.
"""

from typing import Any, TypedDict

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
