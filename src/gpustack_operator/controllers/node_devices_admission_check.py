"""NodeDevicesAdmission: Kueue admits a workload only when its Pods can really be placed on the pool's cards.

Kueue counts a pool's cards as one scalar of credits, so it would admit a 5-card exclusive Pod on a pool
whose 8 cards are each half sliced, and the Pod would sit unschedulable. The `gpustack-node-devices`
AdmissionCheck closes that gap (contract §7.9; shared/guides/kueue-api.md §6): for a Workload holding
quota, not admitted, not finished, not evicted, active, whose checks include ours, the demand is read
from its podSets (rules.admission.demand), the candidate cards are the Devices ledgers of each assigned
flavor's nodes (controllers.node_devices_admission_check_pool), less the cards promised to workloads
passed earlier (rules.admission.promises), and every Pod must be placed whole on one node
(rules.admission.placement).
The check is then Ready, or Retry with `requeueAfterSeconds: 30`: Kueue keeps the reservation 30 s, then
evicts and requeues, unless a Devices change of the pool made us say Ready meanwhile. Never Rejected. Kueue
v0.17 acts on that Ready only once the 30 s are up (its workload reconciler returns early while `requeueAt` is
in the future), so a Retry turned Ready waits out the rest of its 30 s.

Binding: a Ready holds all the way to Allocate. The plan is only ours; two things make kube-scheduler and
the kubelet follow it, each exact where the other is not:
- A podSet the plan puts wholly on one node is pinned there: the Ready entry carries a podSetUpdate with
  `nodeSelector: {kubernetes.io/hostname: <the node's label>}`. Kueue v0.17 merges every check's
  podSetUpdates into the Pods when it starts the workload (jobframework: a Job's template before it is
  unsuspended, a plain Pod's spec when it is ungated), so the Pod cannot bind elsewhere, whatever the
  scheduler's scoring or a stale count says; the promise then covers exactly the cards the Pod will get.
  Kueue refuses a podSetUpdate whose key the template sets to another value, so a podSet whose template
  already selects a hostname is not pinned (the plan does not read the template's selector).
- A podSet the plan spreads over several nodes cannot be pinned: a podSetUpdate is one nodeSelector for
  every Pod of the podSet, and a label on the planned nodes would still let two Pods meet on one of them.
  There the scheduler's own accounting is made true instead: the device plugin advertises a card held in
  one mode as Unhealthy under the other modes' resources (device_manager.plugin.inventory), the kubelet
  publishes allocatable = healthy devices, so a node whose 8 cards are half sliced offers 4
  `nvidia.com/gpu` and the second 4-card Pod can only fit on another node.
Not covered: the scheduler's count lags the device plugin (the kubelet's node status; a Pod placed on a
count that just shrank is refused at Allocate, as without the check); the count is per mode, not per
unit, so a spread podSet of slices or shares can still meet a card with too few units left; Pods that
bypass the check (not queued) are seen only once their cards show in the ledger. A Ready entry is never
rewritten (Kueue makes podSetUpdates immutable while Ready), and an eviction resets it to Pending without
them. After a restart a Ready, not yet admitted workload is promised again on the node its entry pins.

The promise book lives in memory: a workload seen Ready but not admitted yet with no promise in the book
(after a worker restart, the first sync brings every such workload here) has its cards planned and
promised again, without a write, so a restart does not give its cards to the next workload.

Why deciding from the informer cache is safe: the cache can only lag the ledger, and the ledger lags the
Pods. A lagging view of freed capacity only delays a Ready (a Retry is retried). A lagging view of taken
capacity would over-admit, but every card consumer in a pool is a Pod admitted through this check, which
holds a promise on its cards until the cached ledger itself shows them consumed (promise and release are
judged on the same informer's versions, in order); a fresh API read would not help, as the ledger written
by the device manager lags the Pods just the same. Decisions never interleave, though WORKERS reconcile at
once: from the cache read to the promise entered in the book there is no await, so on one event loop no
decision reads the book before the one ahead of it has written its promise; only the API writes overlap
(one worker waiting on each write held the check to one decision per round trip: 6 workloads/s on the
development machine, bench_admission).

Our entry is written as soon as the scheduler has reserved quota in a ClusterQueue whose
admissionChecksStrategy names the check for the assigned flavors, whether or not Kueue's workload
controller has listed it as Pending yet: under load that controller lags the scheduler by tens of seconds
(bench_admission: p50 40 s from reservation to its Pending entry), and an entry already present and Ready
lets its next pass admit the workload at once instead of writing Pending first. It is never written before
the reservation (the guide's warning: a Ready seen by the scheduler would admit without a decision on the
assigned flavor).

The state is written with server-side apply on the status subresource, field manager
`gpustack-node-devices`, force (Kueue's managers own the list too), only our entry, carrying the
resourceVersion it was decided on (a stale decision fails with 409 and is made again); its
lastTransitionTime moves only with the state, and nothing is written when nothing changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from gpustack_operator.api.conditions import is_true, rfc3339
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK as CHECK
from gpustack_operator.api.types.kueue_workload import CheckState, WorkloadCondition
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, mapped, reads
from gpustack_operator.controllers import indexers
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.node_devices_admission_check_pool import PoolCards, waiting_on_devices
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CLUSTER_QUEUES, DEVICES, NODES, RESOURCE_FLAVORS, WORKLOADS
from gpustack_operator.rules.admission.demand import workload_demand
from gpustack_operator.rules.admission.placement import READY_MESSAGE, RETRY_MESSAGE, Ask, Plan, plan
from gpustack_operator.rules.admission.promises import Promises
from gpustack_operator.rules.cards import CardState

log = logging.getLogger(__name__)

NAME = "node-devices-admission"
FIELD_MANAGER: Final = "gpustack-node-devices"
RETRY_AFTER_SECONDS: Final = 30
WORKERS: Final = 8
"""Reconciles at once (decisions stay one at a time, see the module docstring; the writes overlap)."""
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
"""The well-known node label a Ready podSet is pinned on (the kubelet sets it on every Node)."""


def own_entry(wl: JSONObj) -> dict[str, Any] | None:
    """Our entry of status.admissionChecks, or None when Kueue has not listed it (yet)."""
    entries = (wl.get("status") or {}).get("admissionChecks") or ()
    return next((e for e in entries if isinstance(e, dict) and e.get("name") == CHECK), None)


def queue_uses_check(queue: JSONObj | None, wl: JSONObj) -> bool:
    """Whether the ClusterQueue that reserved the workload's quota names our check for the flavors it
    assigned (a rule with no `onFlavors` covers every flavor, as Kueue reads it)."""
    strategy = ((queue or {}).get("spec") or {}).get("admissionChecksStrategy") or {}
    rule = next(
        (r for r in strategy.get("admissionChecks") or () if isinstance(r, dict) and r.get("name") == CHECK),
        None,
    )
    if rule is None:
        return False
    on_flavors = set(rule.get("onFlavors") or ())
    if not on_flavors:
        return True
    return not on_flavors.isdisjoint(indexers.assigned_flavors(wl))


def pinned_hosts(entry: Mapping[str, Any]) -> dict[str, str]:
    """podSet -> the hostname our entry's podSetUpdates pin it to."""
    found = {}
    for update in entry.get("podSetUpdates") or ():
        host = ((update or {}).get("nodeSelector") or {}).get(HOSTNAME_LABEL)
        if host:
            found[str(update.get("name"))] = str(host)
    return found


def _own_hostname_set(wl: JSONObj) -> set[str]:
    """The podSets whose template already selects a hostname: a second value would fail the Job's start."""
    return {
        str(ps.get("name"))
        for ps in (wl.get("spec") or {}).get("podSets") or ()
        if HOSTNAME_LABEL in ((((ps.get("template") or {}).get("spec") or {}).get("nodeSelector")) or {})
    }


def _queue_name(wl: JSONObj) -> str:
    """The ClusterQueue the workload reserved quota in, or ""."""
    return next(iter(indexers.workload_cluster_queue(wl)), "")


def holds_reservation(wl: JSONObj) -> bool:
    """Quota reserved, and not finished, evicted, being deactivated, deleted or inactive."""
    if (wl.get("metadata") or {}).get("deletionTimestamp") or (wl.get("spec") or {}).get("active") is False:
        return False
    gone = (WorkloadCondition.FINISHED, WorkloadCondition.EVICTED, WorkloadCondition.DEACTIVATION_TARGET)
    return is_true(wl, WorkloadCondition.QUOTA_RESERVED) and not any(is_true(wl, c) for c in gone)


def desired_entry(ready: bool, pins: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Our entry's state and message (no transition time) for a decision; a Ready one carries a
    podSetUpdate pinning each podSet of `pins` (podSet -> hostname) to its one planned node."""
    if ready:
        entry: dict[str, Any] = {"name": CHECK, "state": CheckState.READY.value, "message": READY_MESSAGE}
        if pins:
            entry["podSetUpdates"] = [
                {"name": name, "nodeSelector": {HOSTNAME_LABEL: host}} for name, host in sorted(pins.items())
            ]
        return entry
    return {
        "name": CHECK,
        "state": CheckState.RETRY.value,
        "message": RETRY_MESSAGE,
        "requeueAfterSeconds": RETRY_AFTER_SECONDS,
    }


DecisionObserver = Callable[[str, str, float], None]
"""(result, reason, seconds) of each decision (controllers.metrics.DomainMetrics.decided)."""


def decision_reason(found: Plan | None, ledger: Mapping[str, Mapping[str, CardState]]) -> str:
    """Why a decision came out as it did: fits, no-room (cards, but some Pod fits on none), no-cards."""
    if found is not None:
        return "fits"
    return "no-room" if any(ledger.values()) else "no-cards"


class NodeDevicesAdmissionReconciler:
    def __init__(
        self,
        client: Client,
        cache: Cache,
        now: Callable[[], datetime],
        clock: Callable[[], float] = time.monotonic,
        promises: Promises | None = None,
        observe: DecisionObserver | None = None,
    ) -> None:
        self.client, self.cache, self.now, self.clock = client, cache, now, clock
        self.promises = promises if promises is not None else Promises()
        self.pool_cards = PoolCards(cache)
        self.observe = observe

    async def reconcile(self, key: str) -> Result:
        wl = self.cache.get(WORKLOADS, key)
        if wl is None or not holds_reservation(wl):
            self.promises.drop(key)
            return DONE
        if is_true(wl, WorkloadCondition.ADMITTED):
            return DONE
        entry = own_entry(wl)
        if entry is None:
            # Kueue lists the check as Pending only when its workload controller gets to the workload,
            # which lags far behind the scheduler's reservation under load; the queue says the check
            # applies, so our entry is written now (see the module docstring).
            if not queue_uses_check(self.cache.get(CLUSTER_QUEUES, _queue_name(wl)), wl):
                return DONE
            entry = {}
        if entry.get("state") == CheckState.READY:
            if key not in self.promises:
                self._promise_again(wl, key)
            return DONE
        started = time.perf_counter()
        found, ledger = self.decide(wl, key)
        desired = desired_entry(found is not None, None if found is None else self.pins(wl, found))
        if self.observe is not None:
            self.observe(desired["state"], decision_reason(found, ledger), time.perf_counter() - started)
        if all(entry.get(k) == v for k, v in desired.items()):
            return DONE
        same = entry.get("state") == desired["state"] and entry.get("lastTransitionTime")
        desired["lastTransitionTime"] = entry["lastTransitionTime"] if same else rfc3339(self.now())
        meta = {k: wl["metadata"][k] for k in ("name", "namespace", "resourceVersion")}
        body = {"metadata": meta, "status": {"admissionChecks": [desired]}}
        if found is not None:
            self.promises.hold(key, found.cards, ledger, self.clock())
        try:
            await self.client.apply(WORKLOADS, body, field_manager=FIELD_MANAGER, subresource="status")
        except errors.NotFound:
            self.promises.drop(key)
            return DONE
        except Exception:
            self.promises.drop(key)
            raise
        log.info("workload=%s check %s: %s", key, desired["state"], desired["message"])
        return DONE

    def _promise_again(self, wl: JSONObj, key: str) -> None:
        """A Ready workload Kueue has not admitted yet, with no promise in the book (the worker restarted,
        or its promise ran out): its cards are planned and promised again, nothing is written; a podSet
        the entry pins is planned on its pinned node only, where Kueue will put it."""
        found, ledger = self.decide(wl, key, pinned_hosts(own_entry(wl) or {}))
        if found is not None:
            self.promises.hold(key, found.cards, ledger, self.clock())
            log.info("workload=%s check Ready, not admitted yet: its cards promised again", key)

    def hostname(self, node: str) -> str:
        """The node's `kubernetes.io/hostname` label (the node name when the Node is not cached)."""
        labels = ((self.cache.get(NODES, node) or {}).get("metadata") or {}).get("labels") or {}
        return str(labels.get(HOSTNAME_LABEL) or node)

    def pins(self, wl: JSONObj, found: Plan) -> dict[str, str]:
        """podSet -> the hostname of the one node the plan puts all its Pods on (a podSet spread over
        several nodes, or whose template already selects a hostname, is not pinned)."""
        nodes: dict[str, set[str]] = {}
        for demand, pods in zip(workload_demand(wl), found.pods, strict=True):
            nodes.setdefault(demand.name, set()).update(pods)
        skip = _own_hostname_set(wl)
        return {
            name: self.hostname(next(iter(on)))
            for name, on in nodes.items()
            if len(on) == 1 and name not in skip
        }

    def decide(
        self, wl: JSONObj, key: str, pinned: Mapping[str, str] | None = None
    ) -> tuple[Plan | None, dict[str, Mapping[str, CardState]]]:
        """Where the workload's Pods go on the cards not promised to others (None: some Pod fits nowhere);
        a podSet of `pinned` (podSet -> hostname) only on the node of that hostname."""
        asks, ledger = self.asks(wl, pinned)
        return plan(asks, self.promises.against(ledger, self.clock(), skip=key)), ledger

    def asks(
        self, wl: JSONObj, pinned: Mapping[str, str] | None = None
    ) -> tuple[list[Ask], dict[str, Mapping[str, CardState]]]:
        """The workload's podSets as placement asks, and the ledger of every node they may use (the
        assigned flavors' healthy cards, promises not yet applied)."""
        asks: list[Ask] = []
        ledger: dict[str, Mapping[str, CardState]] = {}
        for demand in workload_demand(wl):
            cards = self.pool_cards.of_flavor(demand.flavor)
            for node, rows in cards.items():  # shared, read-only rows; merged only when two flavors meet
                known = ledger.setdefault(node, rows)
                if known is not rows:
                    ledger[node] = {**known, **rows}
            nodes = tuple(cards)
            host = (pinned or {}).get(demand.name)
            if host is not None:
                nodes = tuple(n for n in nodes if self.hostname(n) == host)
            asks.append(Ask(demand.count, demand.needs, nodes))
        return asks, ledger


def _uses_check(old: JSONObj | None, new: JSONObj | None) -> bool:
    """Our entry is listed, or quota is reserved in a queue that may name the check."""
    return any(obj is not None and (own_entry(obj) is not None or _queue_name(obj)) for obj in (old, new))


def controller(deps: Dependencies) -> ControllerSpec:
    return ControllerSpec(
        name=NAME,
        reconciler=NodeDevicesAdmissionReconciler(
            deps.client, deps.cache, deps.now, observe=deps.metrics.decided if deps.metrics else None
        ),
        concurrency=WORKERS,
        primary=for_(WORKLOADS, _uses_check),
        watches=(
            mapped(DEVICES, waiting_on_devices(deps.cache)),
            reads(RESOURCE_FLAVORS),
            reads(CLUSTER_QUEUES),
            reads(NODES),
        ),
        indexes=(
            indexers.WORKLOADS_WAITING_BY_FLAVOR,
            indexers.DEVICES_BY_POOL,
            indexers.RESOURCE_FLAVORS_BY_POOL,
        ),
        rbac=(Rule.of(WORKLOADS, "patch", subresource="status"),),
    )
