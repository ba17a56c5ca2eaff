"""Allocate for every resource server of one node: identify, check, reserve, record, respond.

The node's Allocates are serialised by one asyncio lock around identify -> cross-mode check -> reserve,
so a batch of identical pods maps one-to-one onto distinct pods and two modes never take one card. The
candidates are the pods the kubelet lists through PodResources, when it answers: those it admitted
earlier, whose matching containers all hold cards already, and the one it is admitting now, so the pod is
known exactly (see `podresources/client.py`); without that answer, every pending pod on the node is a
candidate and `identify` ranks them. The pod list comes from the informer cache and, when the cache shows
no feasible match or a card held in another mode, from the API server. A conflict the API server confirms
is refused at once with FAILED_PRECONDITION (the kubelet waits on Allocate, and the Pod start with it), and
so is a demand a card has no room left for: the kubelet then fails the Pod's admission, which its user sees
as UnexpectedAdmissionError, where recording it would tell every holder of the card it may use more than
its share. Confirmed means the API server's pods show the holders and the kubelet, when PodResources
answers, still lists one of them as active - it frees a finished pod's devices before the pod's status
reaches the API server, so a conflict or a shortfall whose holders it no longer lists is retried. With no
pod matching yet, or such an unconfirmed refusal, the call is retried within `retries` x `retry_interval`
and then fails, which the kubelet turns into a failed admission. The durable record - the pod annotation -
and the per-container work directory are written after the lock is released, under a per-pod lock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.device_manager.allocator.annotation import ANNOTATION, encode, pod_allocations
from gpustack_operator.device_manager.allocator.holdings import Reservations, prefer
from gpustack_operator.device_manager.allocator.identify import Tier, resolve
from gpustack_operator.device_manager.allocator.plan import (
    CardCapacityError,
    CardConflictError,
    Plan,
    Planner,
)
from gpustack_operator.device_manager.allocator.workdirs import HostPaths, WorkDirs
from gpustack_operator.device_manager.plugin import ids
from gpustack_operator.device_manager.plugin.handler import (
    AllocateError,
    ContainerResponse,
    PodNotFoundError,
    ResourceSpec,
)
from gpustack_operator.device_manager.plugin.inventory import CardInfo, Inventory
from gpustack_operator.device_manager.podresources.model import KubeletPods
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.runtime import Clock, MonotonicClock

log = logging.getLogger(__name__)
Pod = dict[str, Any]


class PodSource(Protocol):
    """The pods bound to this node."""

    def cached(self) -> list[Pod]:
        """The informer's current view (may lag the API server)."""
        ...

    async def fresh(self) -> list[Pod]:
        """A list straight from the API server."""
        ...


class KubeletSource(Protocol):
    async def active(self) -> KubeletPods | None:
        """The kubelet's active pods (PodResources List), or None when it cannot be asked."""
        ...


class PodWriter(Protocol):
    async def annotate(self, pod: Mapping[str, Any], key: str, value: str) -> None:
        """Set one annotation on the pod (failing if the pod was replaced)."""
        ...


@dataclass(frozen=True)
class AllocatorConfig:
    node_name: str
    retries: int = 5
    retry_interval: float = 3.0
    paths: HostPaths = field(default_factory=HostPaths)

    @property
    def retry_window(self) -> float:
        """How long one Allocate may wait for its pod to show up (seconds)."""
        return self.retries * self.retry_interval


class Allocator:
    """The AllocationHandler of every ResourceServer on the node."""

    def __init__(
        self,
        inventories: Mapping[str, Inventory],
        pods: PodSource,
        writer: PodWriter,
        config: AllocatorConfig,
        on_change: Callable[[], None] = lambda: None,
        clock: Clock | None = None,
        kubelet: KubeletSource | None = None,
        on_refused: Callable[[str, str], None] = lambda resource, reason: None,
        on_finished: Callable[[ResourceSpec, str, float], None] = lambda resource, result, seconds: None,
    ) -> None:
        self.inventories = inventories
        self.pods = pods
        self.kubelet = kubelet
        self.writer = writer
        self.config = config
        self.on_change = on_change
        self.on_refused = on_refused
        """Told (resource, reason: capacity, conflict or other) of every Allocate refused."""
        self.on_finished = on_finished
        """Told (resource, result, seconds) of every Allocate as it ends: `ok`, `refused` (an AllocateError
        before anything was reserved: what `on_refused` hears) or `error` (the record could not be written,
        anything unexpected, a cancellation such as the resource server's timeout)."""
        self.clock: Clock = clock or MonotonicClock()
        self.reservations = Reservations()
        self.planner = Planner(self.reservations, config.paths, inventories)
        self.workdirs = WorkDirs(config.paths)
        self._lock = asyncio.Lock()
        self._pod_locks: dict[str, asyncio.Lock] = {}
        self._publish_pending = False

    # ---- AllocationHandler ---------------------------------------------------------------------------------
    async def allocate(self, resource: ResourceSpec, device_ids: Sequence[str]) -> ContainerResponse:
        started = time.perf_counter()
        result = "error"
        try:
            try:
                devices, cards = resolve(resource, self.inventories.get(resource.manufacturer), device_ids)
                plan = await self._identify(resource, devices, cards)
            except AllocateError as err:
                result = "refused"
                self.on_refused(resource.name, _refusal_reason(err))
                raise
            if plan.allocation is not None:
                await self._record(plan)
            result = "ok"
        finally:
            self.on_finished(resource, result, time.perf_counter() - started)
        log.info(
            "allocated resource=%s pod=%s container=%s tier=%s devices=%s in %.1fms",
            resource.name,
            p.pod_key(plan.pod),
            plan.container,
            plan.tier.name,
            ",".join(device_ids),
            (time.perf_counter() - started) * 1000,
        )
        return plan.response

    def preferred(
        self, resource: ResourceSpec, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        inventory = self.inventories.get(resource.manufacturer)
        order = {card.key: card.index for card in inventory.cards()} if inventory else {}
        pods = self.pods.cached()
        holdings = self.planner.holdings(pods)
        need = self.planner.need(resource, size, pods)
        return prefer(resource.mode, available, must_include, size, holdings, order, need)

    # ---- lifecycle hooks -----------------------------------------------------------------------------------
    def publish_held(self) -> None:
        """Tell the inventories the mode each card is held in now (the pods' records and this process's
        reservations), so the resource servers advertise what each resource can really take."""
        modes = self.planner.holdings(self.pods.cached()).modes()
        for inventory in self.inventories.values():
            if inventory.set_held(modes):
                log.info(
                    "node=%s cards held now: %s",
                    self.config.node_name,
                    ", ".join(f"{uuid}={mode.label}" for (_, uuid), mode in sorted(modes.items())) or "none",
                )

    def publish_held_soon(self) -> None:
        """`publish_held` once the current burst of events is handled (an informer's first list delivers
        every pod of the node in one go: one rebuild, not one per pod)."""
        if not self._publish_pending:
            self._publish_pending = True
            asyncio.get_running_loop().call_soon(self._publish_now)

    def _publish_now(self) -> None:
        self._publish_pending = False
        self.publish_held()

    def release(self, pod: Mapping[str, Any]) -> None:
        """The pod is gone or finished: it holds nothing any more (its work dir goes with `collect`)."""
        uid = p.pod_uid(pod)
        if self.reservations.get(uid) is not None:
            self.reservations.release(uid)
            log.info("released reservation pod=%s", p.pod_key(pod))
        self.publish_held()
        lock = self._pod_locks.get(uid)
        if lock is not None and not lock.locked():
            del self._pod_locks[uid]

    async def collect(self, live_pods: Sequence[Mapping[str, Any]]) -> list[str]:
        """Expire ghost reservations, then remove the work dirs of pods neither listed nor reserved;
        returns the pod UIDs removed. Listing and removal run in worker threads: a gone pod's tree can
        be large, and removing it must never stall an Allocate.

        `live_pods` is the synced cache; a reservation whose pod it has not shown for more than one retry
        window is dropped (one whose annotation is being written right now is kept).
        """
        live = {p.pod_uid(pod) for pod in live_pods}
        writing = {uid for uid, lock in self._pod_locks.items() if lock.locked()}
        now, window = self.clock.now(), self.config.retry_window
        for uid, ghost in self.reservations.expire(live | writing, now, window):
            self._pod_locks.pop(uid, None)
            self.publish_held()
            log.warning(
                "dropped reservation pod=%s uid=%s: not in the pod cache for over %.0fs",
                ghost.key,
                uid,
                self.config.retry_window,
            )
        present = await asyncio.to_thread(self.workdirs.present)
        # Decided on the loop, after the listing: a pod reserved meanwhile keeps its directory.
        keep = live | {uid for uid, lock in self._pod_locks.items() if lock.locked()}
        keep |= {uid for uid, _ in self.reservations.items()}
        gone = [uid for uid in present if uid not in keep]
        return await asyncio.to_thread(self.workdirs.remove, gone) if gone else []

    # ---- steps ---------------------------------------------------------------------------------------------
    async def _identify(
        self, resource: ResourceSpec, devices: list[ids.DeviceID], cards: dict[tuple[str, str], CardInfo]
    ) -> Plan:
        conflict: CardConflictError | None = None
        for attempt in range(self.config.retries + 1):
            if attempt:
                await self.clock.sleep(self.config.retry_interval)
            async with self._lock:
                kubelet = await self.kubelet.active() if self.kubelet is not None else None
                try:
                    plan = self._plan(resource, devices, cards, self.pods.cached(), kubelet)
                except CardConflictError:
                    plan = None  # the cache may still show a holder the kubelet has already freed
                conflict = None
                if plan is None or plan.tier is not Tier.FEASIBLE:
                    # The cache may not show the binding yet: a pod holding cards already, or one the
                    # cards do not fit, is only taken when the API server has nothing better.
                    try:
                        plan = self._plan(resource, devices, cards, await self._fresh(), kubelet)
                    except CardConflictError as err:
                        if _confirmed(err, kubelet):
                            log.info("node=%s refused at once: %s", self.config.node_name, err)
                            raise
                        plan, conflict = None, err
                if plan is not None:
                    self._reserve(plan)
                    return plan
            log.info(
                "node=%s resource=%s count=%d: %s (attempt %d)",
                self.config.node_name,
                resource.name,
                len(devices),
                conflict or "no pending pod asks for it yet",
                attempt + 1,
            )
        if conflict is not None:
            raise conflict
        raise PodNotFoundError(
            f"no pending pod on node {self.config.node_name} has a container whose {resource.name} limit "
            f"is {len(devices)}"
        )

    async def _fresh(self) -> list[Pod]:
        try:
            return await self.pods.fresh()
        except KubeError as err:
            log.error("node=%s listing pods failed: %s", self.config.node_name, err)
            raise AllocateError(f"listing pods on node {self.config.node_name}: {err}") from err

    def _reserve(self, plan: Plan) -> None:
        uid, key = p.pod_uid(plan.pod), p.pod_key(plan.pod)
        if plan.allocation is None:
            self.reservations.mark_served(uid, key, plan.container)
        else:
            self.reservations.reserve(uid, key, plan.container, plan.allocation)
            self.publish_held()

    def _plan(
        self,
        resource: ResourceSpec,
        devices: list[ids.DeviceID],
        cards: dict[tuple[str, str], CardInfo],
        pods: list[Pod],
        kubelet: KubeletPods | None,
    ) -> Plan | None:
        """The plan among the pods the kubelet lists (all pods when it cannot say); the cross-mode view
        always counts every pod."""
        candidates = pods if kubelet is None else [pod for pod in pods if kubelet.lists(pod)]
        if resource.mode is DeviceAllocationMode.VISIBILITY:
            return self.planner.mirror(resource, len(devices), candidates)
        return self.planner.plan(resource, devices, cards, candidates, holders=pods)

    async def _record(self, plan: Plan) -> None:
        uid, key = p.pod_uid(plan.pod), p.pod_key(plan.pod)
        try:
            async with self._pod_locks.setdefault(uid, asyncio.Lock()):
                merged = {**pod_allocations(plan.pod), **self.reservations.containers(uid)}
                await self.writer.annotate(plan.pod, ANNOTATION, encode(merged))
                if plan.prepare is not None:
                    plan.prepare(self.workdirs)  # small and bounded: kept on the loop, off the lock
        except Exception as err:
            self.reservations.unreserve(uid, plan.container)
            log.error("recording allocation failed pod=%s container=%s: %s", key, plan.container, err)
            raise AllocateError(f"cannot record the allocation of pod {key}: {err}") from err
        self.on_change()


def _refusal_reason(err: AllocateError) -> str:
    """What `on_refused` is told: capacity, conflict or other."""
    if isinstance(err, CardCapacityError):
        return "capacity"
    return "conflict" if isinstance(err, CardConflictError) else "other"


def _confirmed(conflict: CardConflictError, kubelet: KubeletPods | None) -> bool:
    """The API server showed the holders; the kubelet, when it answers, still holds one of them."""
    if kubelet is None:
        return True
    return any(holder in kubelet.pods for holder in conflict.holders)
