"""setup_controllers: the worker's one call that builds every controller and registers it on the manager."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import pytest

from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.rbac import MANAGER_EVENTS, MANAGER_LEASES
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_
from gpustack_operator.controllers import setup
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.setup import ControllerSetupError, setup_controllers
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, Resource
from gpustack_operator.settings.environment import Environment
from tests.unit.controllerkit.fakes import FakeElector, FakeInformers, FakeRecorder, ScriptedReconciler

CLIENT = cast(Client, object())
"""Setup only hands the client on; no test here talks to an API server."""
ENV = Environment()
FIXED = datetime(2025, 6, 1, tzinfo=UTC)


class Factory:
    """A controller module's factory that records the Dependencies it was built with."""

    def __init__(self, name: str, resource: Resource = CLUSTER_QUEUES) -> None:
        self.name, self.resource = name, resource
        self.seen: list[Dependencies] = []

    def __call__(self, deps: Dependencies) -> ControllerSpec:
        self.seen.append(deps)
        return ControllerSpec(self.name, ScriptedReconciler(), for_(self.resource))


def test_every_factory_is_built_with_the_managers_cache_and_registered_in_order() -> None:
    manager = Manager(FakeInformers())
    first, second = Factory("clusterqueue"), Factory("localqueue", LOCAL_QUEUES)
    names = setup_controllers(
        manager, client=CLIENT, environment=ENV, now=lambda: FIXED, factories=(first, second)
    )
    assert names == ["clusterqueue", "localqueue"]
    assert list(manager.controllers) == names
    [deps] = first.seen
    assert deps.cache is manager.cache, "reconcilers must read the manager's cache, not another"
    assert (deps.client, deps.environment, deps.now()) == (CLIENT, ENV, FIXED)


def test_a_factory_that_fails_is_named_and_its_cause_kept() -> None:
    def broken(deps: Dependencies) -> ControllerSpec:
        raise KeyError("GPUSTACK_SOMETHING")

    with pytest.raises(ControllerSetupError, match=r"test_setup\..*broken") as caught:
        setup_controllers(Manager(FakeInformers()), client=CLIENT, environment=ENV, factories=(broken,))
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_controller_the_manager_refuses_is_named() -> None:
    twice = (Factory("clusterqueue"), Factory("clusterqueue"))
    with pytest.raises(ControllerSetupError, match="controller clusterqueue failed") as caught:
        setup_controllers(Manager(FakeInformers()), client=CLIENT, environment=ENV, factories=twice)
    assert caught.value.controller == "clusterqueue"
    assert "already registered" in str(caught.value.__cause__)


def test_the_workers_own_list_registers_cleanly_and_its_rbac_includes_the_managers() -> None:
    manager = Manager(FakeInformers(), elector=FakeElector(), recorder=FakeRecorder())  # type: ignore[arg-type]
    names = setup_controllers(manager, client=CLIENT, environment=ENV)
    assert len(names) == len(setup.CONTROLLERS)
    assert {MANAGER_LEASES, MANAGER_EVENTS} <= set(manager.rbac())
