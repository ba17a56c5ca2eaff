"""What a controller declares to the manager, and what it is given to build its reconciler.

Why this module exists: every controller of the worker has the same shape, so setup.py can register them
all in one loop and the chart's RBAC can be derived from them. A controller module exposes a factory
`(Dependencies) -> ControllerSpec`; the spec names the reconciler, its watches (controllers.watches), the
secondary indexes it queries through the shared cache (`Index`, filed by the informer as objects come and
go) and the API verbs it calls itself (`rbac`, controllers.rbac). `Dependencies` carries the client, the
manager's cache, the operator's environment, a wall clock, the event recorder and the one view of the
settings Secret, so reconcilers never reach for globals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpustack_operator.controllers.cache import Cache
from gpustack_operator.controllers.problems import ProblemReporter
from gpustack_operator.controllers.rbac import Rule, aggregate
from gpustack_operator.controllers.reconciler import Reconciler
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.controllers.watches import Watch
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.events import EventSink
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import IndexFunc
from gpustack_operator.runtime import Backoff
from gpustack_operator.settings.environment import Environment

__all__ = ["PER_NODE_WORKERS", "ControllerFactory", "ControllerSpec", "Dependencies", "Index", "utc_now"]

PER_NODE_WORKERS = 4
"""Workers of a controller keyed by node (one independent write per node): a thousand nodes joining at once
are then bound by the client's rate limit, not by one round trip after another."""


@dataclass(frozen=True)
class Index:
    """A secondary index on a watched kind: `fn(obj)` lists the values the object is filed under.

    Query it with `cache.by_index(resource, name, value)`. Two controllers may declare the same index on
    the same informer only with the same function (declare it once, in controllers/indexers.py).
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
        """Everything this controller needs: its declared rules plus list/watch of each watched kind."""
        watched = (Rule.of(w.resource, "list", "watch") for w in self.all_watches)
        return aggregate((*self.rbac, *watched))


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Dependencies:
    """What setup_controllers hands every controller factory."""

    client: Client
    cache: Cache
    """The manager's shared cache: read every watched kind here, never from a new informer."""
    environment: Environment
    now: Callable[[], datetime] = utc_now
    """Wall clock (timezone-aware) for condition transition times; tests pass a fixed one."""
    recorder: EventSink | None = None
    """The manager's event recorder: Warning Events about bad input (controllers.problems)."""
    throttle: float = 0.0
    """Seconds the fan-in watches (many objects feeding one key) coalesce their events over (Watch.throttle);
    the worker sets it, tests leave it at 0 so every event reconciles at once."""
    settings: SettingsView = field(init=False)
    """The settings Secret as every controller reads it (one view, so a bad value is reported once)."""

    def __post_init__(self) -> None:
        view = SettingsView(self.cache, self.environment.pod_namespace, ProblemReporter(self.recorder))
        object.__setattr__(self, "settings", view)

    def problems(self) -> ProblemReporter:
        """A reporter of bad input for one controller (controllers.problems)."""
        return ProblemReporter(self.recorder)


ControllerFactory = Callable[[Dependencies], ControllerSpec]
"""What a controller module exposes for setup.py: build the reconciler, declare the rest."""
