"""Predicates: which changes of a watched object are worth a reconcile.

Every status write of an object comes back as an update event; a controller that reconciles on its own
status writes does twice the work, and one that writes something on every pass loops forever. A predicate
sees `(old, new)` for every event, with `old` None for an add and `new` None for a delete, and says whether
to enqueue. Adds and deletes pass the stock predicates: the object appearing or going is always news.

Caveat of `generation_changed`: metadata and status changes do not bump `metadata.generation`, so a
controller filtered by it does not repair a status or a label someone else edited; combine it with
`labels_changed` or `annotations_changed` (`any_of`) when it must.
"""

from __future__ import annotations

from collections.abc import Callable

from gpustack_operator.api.json import JSONObj

__all__ = [
    "Predicate",
    "all_of",
    "annotations_changed",
    "any_of",
    "generation_changed",
    "labels_changed",
    "negate",
    "resource_version_changed",
]

Predicate = Callable[[JSONObj | None, JSONObj | None], bool]


def _meta_changed(field: str) -> Predicate:
    def changed(old: JSONObj | None, new: JSONObj | None) -> bool:
        if old is None or new is None:
            return True
        return (old.get("metadata") or {}).get(field) != (new.get("metadata") or {}).get(field)

    changed.__name__ = f"{field}_changed"
    return changed


generation_changed = _meta_changed("generation")
"""The spec changed (objects without a generation pass only on add and delete)."""
labels_changed = _meta_changed("labels")
annotations_changed = _meta_changed("annotations")
resource_version_changed = _meta_changed("resourceVersion")
"""Anything changed: drops periodic resyncs and duplicate deliveries of one version."""


def all_of(*predicates: Predicate) -> Predicate:
    return lambda old, new: all(p(old, new) for p in predicates)


def any_of(*predicates: Predicate) -> Predicate:
    return lambda old, new: any(p(old, new) for p in predicates)


def negate(predicate: Predicate) -> Predicate:
    return lambda old, new: not predicate(old, new)
