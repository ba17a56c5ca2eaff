"""What a controller watches, declared next to its reconciler: the primary kind, owned, mapped and read kinds.

A reconciler works on keys of its primary kind, but changes to other objects matter too: a ResourceFlavor
it created (owned: enqueue the owner named by its controller ownerReference), or a Node whose labels feed
an InstanceType (mapped: a function from the object to the keys of the primaries it affects). Each watch
is an informer (shared with every other controller that watches the same kind and selectors) plus a key
function and predicates. A kind the reconciler only reads, and whose changes need no reconcile, is declared
with `reads`: the manager caches it all the same, so the reconciler reads it from the shared cache
(controllerkit.cache) instead of asking kube-apiserver or starting an informer of its own. `ControllerSpec`
(controllerkit.spec) bundles the watches with the reconciler.

A watch where many objects feed one key (a thousand nodes joining one ResourceFlavor, eight hundred ledgers
feeding one InstanceType's views) may `throttle` it: the first event reconciles the key at once, events
within the next `throttle` seconds join one reconcile at its end, so a burst costs a write or two per
period instead of one per event, and a lone change is not delayed. The period is per key across the
controller's throttled watches, so the primary watch of such a controller is throttled too: otherwise the
event of its own write would reconcile again at once and take in the next few arrivals, write by write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.predicates import Predicate
from gpustack_operator.kube.informer import object_key
from gpustack_operator.kube.resources import Resource

__all__ = ["InformerKey", "KeyFunc", "Watch", "for_", "mapped", "owner_keys", "owns", "reads"]

KeyFunc = Callable[[JSONObj], list[str]]
"""An object -> the keys of the primary objects to reconcile because of it."""
InformerKey = tuple[Resource, str | None, str | None, str | None]
"""(kind, namespace, label selector, field selector): watches with equal keys share one informer."""


@dataclass(frozen=True)
class Watch:
    """One watched kind: which objects (selectors), which events (predicates), which keys they give."""

    resource: Resource
    keys: KeyFunc
    predicates: tuple[Predicate, ...] = ()
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    throttle: float = 0.0
    """Seconds: a key this watch enqueues is reconciled at most about once per period because of it."""

    def accepts(self, old: JSONObj | None, new: JSONObj | None) -> bool:
        return all(p(old, new) for p in self.predicates)

    @property
    def informer_key(self) -> InformerKey:
        """Which shared informer serves this watch ("" selectors count as none)."""
        return (
            self.resource,
            self.namespace or None,
            self.label_selector or None,
            self.field_selector or None,
        )


def _own_key(obj: JSONObj) -> list[str]:
    return [object_key(obj)]


def for_(
    resource: Resource,
    *predicates: Predicate,
    namespace: str | None = None,
    label_selector: str | None = None,
    throttle: float = 0.0,
) -> Watch:
    """The primary kind: every object is its own key."""
    return Watch(
        resource, _own_key, predicates, namespace=namespace, label_selector=label_selector, throttle=throttle
    )


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
    throttle: float = 0.0,
) -> Watch:
    """Objects that feed the primary: `keys(obj)` names the primaries to reconcile."""
    return Watch(
        resource, keys, predicates, namespace=namespace, label_selector=label_selector, throttle=throttle
    )


def _no_keys(obj: JSONObj) -> list[str]:
    return []


def reads(
    resource: Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> Watch:
    """A kind the reconciler reads from the cache but whose changes enqueue nothing."""
    return Watch(
        resource, _no_keys, namespace=namespace, label_selector=label_selector, field_selector=field_selector
    )
