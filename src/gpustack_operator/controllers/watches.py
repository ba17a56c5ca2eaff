"""What a controller watches, declared next to its reconciler: the primary kind, owned and mapped kinds.

A reconciler works on keys of its primary kind, but changes to other objects matter too: a ResourceFlavor
it created (owned: enqueue the owner named by its controller ownerReference), or a Node whose labels feed
an InstanceType (mapped: a function from the object to the keys of the primaries it affects). Each watch
is an informer (shared with every other controller that watches the same kind and selectors) plus a key
function and predicates. `ControllerSpec` bundles them with the reconciler and its worker count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpustack_operator.controllers.predicates import JSONObj, Predicate
from gpustack_operator.controllers.reconciler import Reconciler
from gpustack_operator.kube.informer import object_key
from gpustack_operator.kube.resources import Resource
from gpustack_operator.runtime import Backoff

__all__ = ["ControllerSpec", "KeyFunc", "Watch", "for_", "mapped", "owner_keys", "owns"]

KeyFunc = Callable[[JSONObj], list[str]]
"""An object -> the keys of the primary objects to reconcile because of it."""


@dataclass(frozen=True)
class Watch:
    """One watched kind: which objects (selectors), which events (predicates), which keys they give."""

    resource: Resource
    keys: KeyFunc
    predicates: tuple[Predicate, ...] = ()
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def accepts(self, old: JSONObj | None, new: JSONObj | None) -> bool:
        return all(p(old, new) for p in self.predicates)


def _own_key(obj: JSONObj) -> list[str]:
    return [object_key(obj)]


def for_(
    resource: Resource,
    *predicates: Predicate,
    namespace: str | None = None,
    label_selector: str | None = None,
) -> Watch:
    """The primary kind: every object is its own key."""
    return Watch(resource, _own_key, predicates, namespace=namespace, label_selector=label_selector)


def owner_keys(owner: Resource) -> KeyFunc:
    """Keys of the `owner` kind named by an object's controller ownerReference (at most one)."""

    def keys(obj: JSONObj) -> list[str]:
        meta = obj.get("metadata") or {}
        for ref in meta.get("ownerReferences") or ():
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            if ref.get("controller") and ref.get("kind") == owner.kind and group == owner.group:
                namespace = meta.get("namespace") if owner.namespaced else None
                return [f"{namespace}/{ref['name']}" if namespace else str(ref["name"])]
        return []

    return keys


def owns(owned: Resource, owner: Resource, *predicates: Predicate) -> Watch:
    """Objects the controller creates: a change enqueues their controlling owner."""
    return Watch(owned, owner_keys(owner), predicates)


def mapped(
    resource: Resource,
    keys: KeyFunc,
    *predicates: Predicate,
    namespace: str | None = None,
    label_selector: str | None = None,
) -> Watch:
    """Objects that feed the primary: `keys(obj)` names the primaries to reconcile."""
    return Watch(resource, keys, predicates, namespace=namespace, label_selector=label_selector)


@dataclass(frozen=True)
class ControllerSpec:
    """A controller: its name (metrics, logs), reconciler, primary watch, secondary watches, workers."""

    name: str
    reconciler: Reconciler
    primary: Watch
    watches: tuple[Watch, ...] = ()
    concurrency: int = 1
    backoff: Backoff | None = None
    """Per-key retry backoff after errors; None uses 5 ms doubling up to 1000 s."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"controller {self.name}: concurrency must be >= 1, got {self.concurrency}")
