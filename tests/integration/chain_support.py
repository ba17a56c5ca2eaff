"""The worker's controllers, run for real against the sandbox, for the scheduling-chain tests.

`running_controllers` registers the given controller factories through `setup_controllers` (the worker's
own path) on a Manager over real informers, without leader election, and stops it on exit; tests then
look at the cluster as kubectl would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers.dependencies import ControllerFactory
from gpustack_operator.controllers.setup import setup_controllers
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.events import EventRecorder
from gpustack_operator.kube.informer import InformerFactory
from gpustack_operator.runtime import Supervisor
from gpustack_operator.settings.environment import Environment
from tests.helpers import eventually

SYSTEM_NAMESPACE = "gpustack-system"


@contextlib.asynccontextmanager
async def running_controllers(
    client: Client, factories: Sequence[ControllerFactory], namespace: str = SYSTEM_NAMESPACE
) -> AsyncIterator[Manager]:
    manager = Manager(
        InformerFactory(client), recorder=EventRecorder(client, instance="chain-test", flush_interval=1.0)
    )
    setup_controllers(
        manager, client=client, environment=Environment(pod_namespace=namespace), factories=factories
    )
    async with Supervisor("chain controllers") as sup:
        sup.spawn("manager", manager.run)

        async def started() -> bool:
            return manager.leading

        await eventually(started, what="controllers synced and running")
        yield manager
