"""Devices.status, the per-card ledger, rebuilt wholesale from the pods' allocation annotations.

The device plugin records every allocation on its pod (`device.gpustack.ai/accelerator.allocated`, see
``allocator.annotation``); the pods are the only durable record, so the ledger is a pure function of the
Devices spec and the node's pods (contract §2.5). Every card starts free (mode None, 1,600,000 units);
each pod, oldest first, folds its containers in name order, setting the card's mode and taking its units;
a pod that would put a card held in one mode into another is skipped whole and reported. Unlike the
contract's fold, `remaining` is not clamped at zero: a card whose holders were given more than it has
shows its true, negative remaining and `oversold: true`, is logged and counted
(`gpustack_device_manager_oversold_cards`), and gives nothing in the InstanceType views. The rebuild also
counts its holder records, one per container of a counted pod that records cards
(`gpustack_device_manager_ledger_holders`). The fold is the allocator's own (``allocator.holdings``), so
the ledger and Allocate's cross-mode check never disagree, and a restarted device manager rebuilds exactly
the same ledger.

A pod records each card under the group ID it had at Allocate. A group can be renamed under running work
(GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY toggled, a driver that spells the product differently), so a
recorded card is counted against the group the spec files that card (manufacturer and UUID) under now:
a held card stays held across a rename. The remapping is the holdings' own (``Holdings(homes)``), the
one Allocate's cross-mode check uses with the homes its inventories give.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.api.types.devices import AcceleratorAllocation, DevicesSpec, DevicesStatus
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.device_manager.allocator.annotation import read_allocations
from gpustack_operator.device_manager.allocator.holdings import Holdings
from gpustack_operator.device_manager.allocator.pods import age_key, is_active, node_field_selector, pod_key
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client

log = logging.getLogger(__name__)

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.DEVICES, "get"),
    Rule.of(resources.DEVICES, "patch", subresource="status"),
    Rule.of(resources.PODS, "list"),  # the node's Pods (a field selector on spec.nodeName)
)
"""The ledger's API verbs (sync_status)."""


@dataclass
class Rebuild:
    """The rebuilt status and the pods it could not count (`namespace/name`)."""

    status: DevicesStatus
    conflicts: list[str] = field(default_factory=list)
    """Pods skipped because they hold a card in a mode another pod already holds it in."""
    unreadable: list[str] = field(default_factory=list)
    """Pods whose annotation cannot be parsed: their cards read free while they may still hold them."""
    oversold: list[str] = field(default_factory=list)
    """UUIDs of the cards whose holders add up to more than the card (remaining below zero)."""
    holders: int = 0
    """Holder records counted: one per container of a counted pod that records cards (an app container
    reusing its init container's card is a record of its own; the card is charged once)."""


def remaining_of(entry: AcceleratorAllocation) -> int:
    """A ledger entry's remaining units (absent means 0: the field is omitted when empty)."""
    return int(entry.get("remaining", 0))


def _status(spec: DevicesSpec, holdings: Holdings) -> DevicesStatus:
    groups = []
    for group in spec.get("groups", []):
        entries: list[AcceleratorAllocation] = []
        for acc in group.get("accelerators", []):
            holding = holdings.get((group["id"], acc["id"]))
            entry: AcceleratorAllocation = {"id": acc["id"], "index": acc["index"], "mode": int(holding.mode)}
            if holding.remaining:
                entry["remaining"] = holding.remaining
            if holding.oversold:
                entry["oversold"] = True
            entries.append(entry)
        groups.append({"id": group["id"], "manufacturer": group["manufacturer"], "accelerators": entries})
    return {"groups": groups}  # type: ignore[typeddict-item]


def card_homes(spec: DevicesSpec) -> dict[tuple[str, str], str]:
    """Where the spec files each card now: (manufacturer, UUID) -> group ID."""
    return {
        (group["manufacturer"], acc["id"]): group["id"]
        for group in spec.get("groups", [])
        for acc in group.get("accelerators", [])
    }


def rebuild(spec: DevicesSpec, pods: Iterable[Mapping[str, Any]]) -> Rebuild:
    """The ledger of ``spec`` given the node's pods.

    Terminating pods count (their containers may still run); Succeeded and Failed pods do not (the
    kubelet has taken their devices back), as in the allocator's cross-mode view.
    """
    holdings = Holdings(card_homes(spec))
    conflicts, unreadable = [], []
    holders = 0
    for pod in sorted(pods, key=age_key):
        if not is_active(pod):
            continue
        try:
            allocations = read_allocations(pod)
        except ValueError as exc:
            log.error("pod=%s: unreadable allocation annotation, its cards read free: %s", pod_key(pod), exc)
            unreadable.append(pod_key(pod))
            continue
        if not allocations:
            continue
        if holdings.add_pod(pod_key(pod), allocations):
            holders += sum(1 for alloc in allocations.values() if alloc.cards)
        else:
            conflicts.append(pod_key(pod))
    oversold = holdings.oversold()
    in_spec = [
        (group["id"], acc["id"]) for group in spec.get("groups", []) for acc in group.get("accelerators", [])
    ]
    over = [uuid for gid, uuid in in_spec if (gid, uuid) in oversold]
    return Rebuild(_status(spec, holdings), conflicts, unreadable, over, holders)


async def sync_status(client: Client, node: str) -> Rebuild | None:
    """Rebuild the ledger of ``node``'s Devices from its pods; write status only when it changed.

    The write carries the resourceVersion of the Devices it was rebuilt against, so a spec reported in
    between fails it with errors.Conflict (the caller rebuilds) instead of leaving a ledger of old cards.
    Returns the rebuild, or None when the node has no Devices yet (nothing to account against).
    """
    devices = await client.get_or_none(resources.DEVICES, node)
    if devices is None:
        return None
    pods = await client.list(resources.PODS, field_selector=node_field_selector(node))
    result = rebuild(devices.get("spec") or {"groups": []}, pods)
    if devices.get("status") != result.status:
        version = (devices.get("metadata") or {}).get("resourceVersion")
        patch = {"metadata": {"resourceVersion": version}, "status": result.status}
        try:
            await client.patch(resources.DEVICES, node, patch, subresource="status")
        except errors.NotFound:
            return None
        log.info("node=%s ledger rewritten from %d pods at version %s", node, len(pods), version)
    return result
