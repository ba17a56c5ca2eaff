"""Start: the worker's long-lived parts, wired once and run under the main supervisor until a signal.

The probe and metrics servers start first, so Kubernetes sees a live process while Prepare runs, and the
aggregated API's HTTPS server with them; then one task waits until NFD and Kueue are installed (saying what
is missing meanwhile, worker.prerequisites), runs Prepare (which registers the APIServices),
waits until kube-apiserver reports them Available, and runs the manager (informers everywhere,
controllers while leading). The controllers are registered once, when the worker is wired, by
controllers.setup (the only list of them).
/readyz turns ready when Prepare is done and the informers have synced; it names a missing prerequisite, and
notes a Kueue that runs without our configuration (checked every 20 s after Prepare). The exit code is 0 after
SIGTERM (the manager has let reconciles finish and released the lease by then) and 1 when a part failed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from gpustack_operator.apiserver import health
from gpustack_operator.apiserver.aggregated import AggregationOptions, NotAvailableError
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.metrics import Metrics
from gpustack_operator.controllers.node_devices_admission_fit import AdmissionFit
from gpustack_operator.controllers.setup import setup_controllers
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.events import EventRecorder
from gpustack_operator.kube.informer import InformerFactory
from gpustack_operator.kube.lease import LeaderElector, LeaseConfig
from gpustack_operator.runtime import Supervisor, run_until_signal
from gpustack_operator.settings.environment import Environment
from gpustack_operator.worker.aggregation import aggregated_api
from gpustack_operator.worker.prepare import PrepareError, owner_references, prepare
from gpustack_operator.worker.prerequisites import KueueConfigMap, Prerequisites

__all__ = ["WorkerOptions", "run"]

log = logging.getLogger(__name__)

FAN_IN_THROTTLE = 2.0
"""Seconds the chain's fan-in watches coalesce events over (controllerkit.watches): a thousand nodes joining
in a burst rewrite a ResourceFlavor, its queue and its InstanceType's status about once per period, not
once per node (tests/bench/bench_chain.py measures it); a lone change still reconciles at once."""


@dataclass(frozen=True)
class WorkerOptions:
    """The `worker` command line, parsed (see `gpustack-operator worker --help`)."""

    kubeconfig: Path | None = None
    kube_api_qps: float = 50.0
    """Token-bucket rate of the API client (kube.client.connect)."""
    kube_api_burst: int = 100
    leader_election: bool = True
    leader_election_id: str = "worker.gpustack.ai"
    metrics_address: tuple[str, int] | None = ("127.0.0.1", 8080)
    health_address: tuple[str, int] | None = ("127.0.0.1", 8081)
    crd_timeout: float = 120.0
    aggregation: AggregationOptions | None = None
    """The aggregated API server (the command line's default has one); None runs without it."""
    owner_cluster_role: str | None = None
    """`--owner-cluster-role`: the APIServices and webhook configurations are owned by (and garbage-collected
    with) this ClusterRole, the chart's; None leaves them unowned."""
    kueue_config_maps: tuple[KueueConfigMap, ...] = (KueueConfigMap(),)


class _Worker:
    """The parts of a running worker, wired once; `setup` starts them under the main supervisor."""

    def __init__(
        self,
        client: Client,
        options: WorkerOptions,
        environment: Environment,
        settings: Mapping[str, str],
        metrics: Metrics,
        api_client: Client | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.environment = environment
        self.settings = settings
        self.identity = f"{environment.pod_name or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.prepared = False
        elector = None
        if options.leader_election:
            lease = LeaseConfig(environment.pod_namespace, self.identity, name=options.leader_election_id)
            elector = LeaderElector(client, lease)
        informers = InformerFactory(client)
        self.recorder = EventRecorder(client, instance=self.identity, controller="gpustack.ai/worker-prepare")
        self.prerequisites = Prerequisites(client, environment, self.recorder, options.kueue_config_maps)
        self.manager = Manager(
            informers,
            elector=elector,
            recorder=EventRecorder(client, instance=self.identity),
            metrics=metrics,
        )
        self.controllers = setup_controllers(
            self.manager, client=client, environment=environment, throttle=FAN_IN_THROTTLE
        )
        self.api = (
            aggregated_api(
                api_client or client,
                informers,
                options.aggregation,
                environment,
                metrics.observe_review,
                AdmissionFit.of(self.manager.controllers),
            )
            if options.aggregation is not None
            else None
        )

    async def setup(self, sup: Supervisor) -> None:
        opts = self.options
        live = {"ping": lambda: True}
        ready: dict[str, health.Check] = {
            "prerequisites": self.prerequisites.installed,
            "prepare": lambda: self.prepared,
            "informers": lambda: self.manager.synced,
        }
        notes = {"kueue-configuration": self.prerequisites.kueue_note}
        if opts.metrics_address is not None and opts.metrics_address == opts.health_address:
            app = health.build_app(
                registry=self.manager.metrics.registry, live=live, ready=ready, notes=notes
            )
            sup.spawn(
                "http server", partial(health.serve, app, opts.metrics_address, name="metrics and probes")
            )
        else:
            for name, address, app in (
                ("metrics", opts.metrics_address, health.build_app(registry=self.manager.metrics.registry)),
                ("probes", opts.health_address, health.build_app(live=live, ready=ready, notes=notes)),
            ):
                if address is not None:
                    sup.spawn(f"{name} server", partial(health.serve, app, address, name=name))
        if self.api is not None:
            self.api.spawn(sup)
        sup.spawn("prerequisite events", self.recorder.run)
        sup.spawn("worker", self.prepare_then_start)

    async def prepare_then_start(self) -> None:
        await self.prerequisites.wait_installed()
        log.info("Worker %s: Prepare in system namespace %s", self.identity, self.environment.pod_namespace)
        owner = await owner_references(self.client, self.options.owner_cluster_role)
        await prepare(
            self.client,
            self.environment,
            self.settings,
            crd_timeout=self.options.crd_timeout,
            install_apiservices=partial(self.api.register, owner) if self.api is not None else None,
        )
        if self.api is not None:
            try:
                await self.api.wait_available()
            except NotAvailableError as e:
                raise PrepareError(str(e)) from None
        self.prepared = True
        log.info(
            "Worker %s: starting the manager with controllers: %s",
            self.identity,
            ", ".join(self.controllers) or "none yet",
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(self.manager.run())
            group.create_task(self.prerequisites.keep_checking_kueue())


async def run(options: WorkerOptions, environment: Environment, settings: Mapping[str, str]) -> int:
    """Run the worker until SIGTERM/SIGINT; returns the process exit code."""
    metrics = Metrics()
    client = await connect(
        options.kubeconfig,
        qps=options.kube_api_qps,
        burst=options.kube_api_burst,
        observer=metrics.observe_request,
    )
    # The aggregated API and the webhooks get a client of their own, without the controllers' rate limit:
    # kube-apiserver has already admitted (and rate-limited) the request we are serving, and a user's
    # `kubectl get` must not queue behind a burst of controller writes.
    api_client = (
        await connect(options.kubeconfig, observer=metrics.observe_request)
        if options.aggregation is not None
        else None
    )
    try:
        worker = _Worker(client, options, environment, settings, metrics, api_client)
        return await run_until_signal(worker.setup)
    finally:
        if api_client is not None:
            await api_client.close()
        await client.close()
