"""What a controller declares to the manager: its reconciler, watches, indexes, RBAC and workers.

Why this module exists: every controller has the same shape, so one loop can register them all and the
chart's RBAC can be derived from them. The spec names the reconciler, its watches (controllerkit.watches),
the secondary indexes it queries through the shared cache (`Index`, filed by the informer as objects come
and go) and the API verbs it calls itself (`rbac`, controllerkit.rbac). What a reconciler is built from is
the caller's business (the worker's is controllers.dependencies), so the kit knows no reconciler.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpustack_operator.controllerkit.rbac import Rule, aggregate
from gpustack_operator.controllerkit.reconciler import Reconciler
from gpustack_operator.controllerkit.watches import Watch
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import IndexFunc
from gpustack_operator.runtime import Backoff

__all__ = ["ControllerSpec", "Index"]


@dataclass(frozen=True)
class Index:
    """A secondary index on a watched kind: `fn(obj)` lists the values the object is filed under.

    Query it with `cache.by_index(resource, name, value)`. Two controllers may declare the same index on
    the same informer only with the same function (declare it once and import it where it is needed).
    """

    resource: Resource
    name: str
    fn: IndexFunc


@dataclass(frozen=True)
class ControllerSpec:
    """A controller: its name (metrics, logs), reconciler, watches, indexes, RBAC and workers."""

    name: str
    reconciler: Reconciler
    primary: Watch
    watches: tuple[Watch, ...] = ()
    concurrency: int = 1
    backoff: Backoff | None = None
    """Per-key retry backoff after errors; None uses 5 ms doubling up to 1000 s."""
    indexes: tuple[Index, ...] = ()
    rbac: tuple[Rule, ...] = ()
    """The verbs the reconciler calls itself; `list` and `watch` of every watched kind are implied."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"controller {self.name}: concurrency must be >= 1, got {self.concurrency}")
        watched = {w.resource for w in self.all_watches}
        seen: set[tuple[Resource, str]] = set()
        for index in self.indexes:
            if index.resource not in watched:
                raise ValueError(
                    f"controller {self.name}: index {index.name!r} is on {index.resource.kind}, "
                    "which it does not watch (add reads(...) for it)"
                )
            if (index.resource, index.name) in seen:
                raise ValueError(f"controller {self.name}: index {index.name!r} declared twice")
            seen.add((index.resource, index.name))

    @property
    def all_watches(self) -> tuple[Watch, ...]:
        """The primary watch first, then the others."""
        return (self.primary, *self.watches)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Everything this controller needs: its declared rules plus list/watch of each watched kind (in
        the watch's namespace when it has one)."""
        watched = (Rule.of(w.resource, "list", "watch", namespace=w.namespace) for w in self.all_watches)
        return aggregate((*self.rbac, *watched))
