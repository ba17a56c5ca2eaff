"""What every reconciler of the worker is built from, and the shape of a controller module's factory.

Why this module exists: the kit (controllerkit) runs any controller and knows none; the worker's
reconcilers all take the same collaborators, handed over in one `Dependencies` by controllers.setup, so
reconcilers never reach for globals. It carries the client, the manager's cache, the operator's environment,
a wall clock, the event recorder, the worker's domain metrics (controllers.metrics) and the one view of the
settings Secret (controllers.settingsview). A controller module exposes a factory
`(Dependencies) -> ControllerSpec`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.problems import ProblemReporter
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllers.metrics import DomainMetrics
from gpustack_operator.controllers.settingsview import SettingsView
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.events import EventSink
from gpustack_operator.settings.environment import Environment

__all__ = ["PER_NODE_WORKERS", "ControllerFactory", "Dependencies", "utc_now"]

PER_NODE_WORKERS = 4
"""Workers of a controller keyed by node (one independent write per node): a thousand nodes joining at once
are then bound by the client's rate limit, not by one round trip after another."""


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
    """The manager's event recorder: Warning Events about bad input (controllerkit.problems)."""
    metrics: DomainMetrics | None = None
    """The worker's domain metrics in the manager's registry (None: not observed)."""
    throttle: float = 0.0
    """Seconds the fan-in watches (many objects feeding one key) coalesce their events over (Watch.throttle);
    the worker sets it, tests leave it at 0 so every event reconciles at once."""
    settings: SettingsView = field(init=False)
    """The settings Secret as every controller reads it (one view, so a bad value is reported once)."""

    def __post_init__(self) -> None:
        view = SettingsView(self.cache, self.environment.pod_namespace, ProblemReporter(self.recorder))
        object.__setattr__(self, "settings", view)

    def problems(self) -> ProblemReporter:
        """A reporter of bad input for one controller (controllerkit.problems)."""
        return ProblemReporter(self.recorder)


ControllerFactory = Callable[[Dependencies], ControllerSpec]
"""What a controller module exposes for setup.py: build the reconciler, declare the rest."""
