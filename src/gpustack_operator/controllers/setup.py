"""Registers every controller of the worker on its manager: the one list, and the one call the worker makes.

Why this module exists: kueue's `SetupControllers` shows the shape; one function builds every reconciler
with its dependencies and registers it, so worker/start.py never names a controller and a new controller is
one line in `CONTROLLERS`. Each entry is a controller module's factory `(Dependencies) -> ControllerSpec`
(controllerkit.spec). The manager's cache and event recorder go into Dependencies here, so no reconciler can
be handed another cache. A factory or registration that fails raises `ControllerSetupError` naming the
controller, before anything runs. After setup, `manager.rbac()` lists the API verbs the worker's
controllers need.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers import (
    devices_labels,
    instance,
    instance_type,
    node_capacity,
    node_devices_admission_check,
    node_devices_admission_check_active,
    node_feature,
    node_flavor,
    node_queue,
    node_queue_entrance,
)
from gpustack_operator.controllers.dependencies import ControllerFactory, Dependencies, utc_now
from gpustack_operator.controllers.metrics import DomainMetrics
from gpustack_operator.kube.client import Client
from gpustack_operator.settings.environment import Environment

__all__ = ["CONTROLLERS", "ControllerSetupError", "setup_controllers"]

log = logging.getLogger(__name__)

CONTROLLERS: tuple[ControllerFactory, ...] = (
    node_feature.controller,
    node_capacity.controller,
    devices_labels.controller,
    node_flavor.controller,
    instance_type.controller,
    node_queue.controller,
    node_queue_entrance.controller,
    node_devices_admission_check_active.controller,
    node_devices_admission_check.controller,
    instance.controller,
)
"""The worker's controllers, in registration order; the scheduling chain's reconcilers join here."""


class ControllerSetupError(RuntimeError):
    """A controller could not be built or registered; `controller` names it, the cause is chained."""

    def __init__(self, controller: str) -> None:
        super().__init__(f"setting up controller {controller} failed")
        self.controller = controller


def _factory_name(factory: ControllerFactory) -> str:
    return f"{factory.__module__}.{getattr(factory, '__qualname__', repr(factory))}"


def setup_controllers(
    manager: Manager,
    *,
    client: Client,
    environment: Environment,
    now: Callable[[], datetime] = utc_now,
    factories: Sequence[ControllerFactory] = CONTROLLERS,
    throttle: float = 0.0,
) -> list[str]:
    """Build and register every controller (before `manager.run()`); returns their names in order."""
    deps = Dependencies(
        client=client,
        cache=manager.cache,
        environment=environment,
        now=now,
        recorder=manager.recorder,
        metrics=DomainMetrics(manager.metrics.registry, manager.cache),
        throttle=throttle,
    )
    names: list[str] = []
    for factory in factories:
        name = _factory_name(factory)
        try:
            spec = factory(deps)
            name = spec.name
            manager.add(spec)
        except Exception as e:
            raise ControllerSetupError(name) from e
        names.append(name)
    log.info("Registered %d controllers: %s", len(names), ", ".join(names) or "none")
    return names
