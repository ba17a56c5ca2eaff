"""The manager: shared informers for every controller, leader election, and the controllers' lifetime.

Controllers declare what they watch (`ControllerSpec`); the manager asks one informer source for those
watches, so two controllers watching Nodes share one watch and one cache, and registers each in `cache`,
the read-only view reconcilers read through (controllerkit.cache), with the indexes the specs declare. The
set of controllers is fixed once `run()` starts: `add` after that raises, since a late controller's
informers would never start or sync. `rbac()` sums up the API verbs of everything registered (controllers
plus leader election and events) for the chart's ClusterRole. Informers run on every replica
(a standby's caches are warm when it takes over); controllers run only on the leader, and only after every
cache has synced, so a reconciler never mistakes a cache still filling for objects that are gone.

Leadership is a loop: campaign, lead (renew the lease and run the controllers), and when a renewal fails
past its deadline, fence the controllers (stop at once, reconciles in flight cancelled) and campaign again.
On shutdown the order is the reverse of startup: controllers finish the reconciles in flight, then the
lease is released so a standby takes over at once instead of waiting for it to expire.
"""

from __future__ import annotations

import gc
import logging

from gpustack_operator.controllerkit.cache import Cache, InformerSource, SharedInformer
from gpustack_operator.controllerkit.controller import Controller
from gpustack_operator.controllerkit.metrics import Metrics
from gpustack_operator.controllerkit.rbac import MANAGER_EVENTS, MANAGER_LEASES, Rule, aggregate
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import InformerKey, Watch
from gpustack_operator.kube.events import EventRecorder
from gpustack_operator.kube.lease import LeaderElector
from gpustack_operator.kube.store import IndexFunc
from gpustack_operator.runtime import Clock, Supervisor

__all__ = ["Manager"]

log = logging.getLogger(__name__)

LEASE_RENEWAL = "lease renewal"


class Manager:
    """Runs registered controllers under leader election (see the module docstring)."""

    def __init__(
        self,
        informers: InformerSource,
        *,
        elector: LeaderElector | None = None,
        recorder: EventRecorder | None = None,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        drain_grace: float = 5.0,
    ) -> None:
        self.metrics = metrics or Metrics()
        self.cache = Cache()
        """What reconcilers read: every watched kind, by key or by a declared index."""
        self._informers = informers
        self._elector = elector
        self._recorder = recorder
        self._clock = clock
        self._drain_grace = drain_grace
        self._controllers: dict[str, Controller] = {}
        self._index_fns: dict[tuple[InformerKey, str], IndexFunc] = {}
        self._started = False
        self._synced = False
        self._leader_gauge = self.metrics.leader.labels(elector.config.name if elector else "none")
        self.metrics.watch_relists(lambda: ((i.name, i.relists) for i in informers.informers))

    @property
    def controllers(self) -> dict[str, Controller]:
        return dict(self._controllers)

    @property
    def recorder(self) -> EventRecorder | None:
        """The event recorder controllers report Warning Events through (None: events are not recorded)."""
        return self._recorder

    @property
    def synced(self) -> bool:
        """Every informer has listed once (the readiness check)."""
        return self._synced

    @property
    def leading(self) -> bool:
        return self._elector.is_leader if self._elector else self._synced

    def add(self, spec: ControllerSpec) -> Controller:
        """Register a controller before `run()`: its informers are created or shared, its indexes added."""
        if self._started:
            raise RuntimeError(
                f"cannot add controller {spec.name!r}: the manager is already running, so its informers "
                "would never start; register every controller before run()"
            )
        if spec.name in self._controllers:
            raise ValueError(f"a controller named {spec.name!r} is already registered")
        indexes = self._new_indexes(spec)
        sources = [(w, self._informer(w)) for w in spec.all_watches]
        for watch, informer in sources:
            self.cache.register(watch, informer)
        by_key = {watch.informer_key: informer for watch, informer in sources}
        for (key, name), fn in indexes.items():
            by_key[key].add_indexer(name, fn)
        self._index_fns.update(indexes)
        controller = Controller(
            spec,
            sources,
            metrics=self.metrics,
            recorder=self._recorder,
            clock=self._clock,
            drain_grace=self._drain_grace,
        )
        self._controllers[spec.name] = controller
        return controller

    def rbac(self) -> tuple[Rule, ...]:
        """The API verbs everything registered needs: controllers, leader election, the event recorder."""
        return aggregate(rule for rules in self.rbac_parts().values() for rule in rules)

    def rbac_parts(self) -> dict[str, tuple[Rule, ...]]:
        """`rbac()` by who needs it: "leader election", "event recorder" and each controller by name."""
        parts = {
            "leader election": (MANAGER_LEASES, self._elector),
            "event recorder": (MANAGER_EVENTS, self._recorder),
        }
        own = {name: (rule,) for name, (rule, part) in parts.items() if part is not None}
        return own | {name: c.spec.rules for name, c in self._controllers.items()}

    async def run(self) -> None:
        """Run informers, the event recorder and (while leading) the controllers, until cancelled."""
        if self._started:
            raise RuntimeError("the manager is already running")
        self._started = True
        async with Supervisor("manager") as sup:
            self._informers.start(sup)
            if self._recorder is not None:
                sup.spawn("event recorder", self._recorder.run, restart="on-failure")
            sup.spawn("controllers", self._lead_forever)
            ended = await sup.wait()
        raise RuntimeError(f"manager: {ended.name} ended unexpectedly") from ended.error

    async def _lead_forever(self) -> None:
        await self._informers.wait_for_sync()
        self._synced = True
        # The first lists are most of what this process will ever hold, and live as long as it does. Moved
        # out of the collector's generations, they are no longer walked by every full collection (on a
        # 1,000-node cluster such a walk took 80 ms, the admission check's slowest decisions; see
        # tests/bench/bench_admission_decision.py). Objects that replace them later are collected as usual.
        gc.freeze()
        log.info("Caches synced; controllers registered: %s", ", ".join(self._controllers) or "none")
        while True:
            if self._elector is not None:
                await self._elector.acquire()
            self._leader_gauge.set(1)
            try:
                ended = await self._lead()
            finally:
                self._leader_gauge.set(0)
                if self._elector is not None and self._elector.is_leader:
                    await self._elector.release()
            if ended != LEASE_RENEWAL:
                raise RuntimeError(f"manager: {ended} ended while leading")

    async def _lead(self) -> str:
        """Run the controllers until one ends or leadership is lost; return the name of what ended."""
        async with Supervisor("leading") as sup:
            if self._elector is not None:
                sup.spawn(LEASE_RENEWAL, self._elector.hold)
            for name, controller in self._controllers.items():
                sup.spawn(f"controller {name}", controller.run)
            ended = await sup.wait()
            if ended.name == LEASE_RENEWAL:
                for controller in self._controllers.values():
                    controller.fence()
        if ended.error is not None:
            log.error("Manager: %s failed while leading", ended.name, exc_info=ended.error)
        return ended.name

    def _informer(self, watch: Watch) -> SharedInformer:
        _, namespace, label_selector, field_selector = watch.informer_key
        return self._informers.informer(
            watch.resource, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )

    def _new_indexes(self, spec: ControllerSpec) -> dict[tuple[InformerKey, str], IndexFunc]:
        """The spec's indexes not filed yet, per informer; refuses a name another function already has."""
        new: dict[tuple[InformerKey, str], IndexFunc] = {}
        for index in spec.indexes:
            for watch in spec.all_watches:
                if watch.resource != index.resource:
                    continue
                key = (watch.informer_key, index.name)
                known = self._index_fns.get(key, index.fn)
                if known is not index.fn:
                    raise ValueError(
                        f"controller {spec.name}: index {index.name!r} on {index.resource.kind} is already "
                        "declared with another function; declare the Index once and share it"
                    )
                if key not in self._index_fns:
                    new[key] = index.fn
        return new
