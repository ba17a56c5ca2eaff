"""Where the per-card admission check looks: the cards of a ResourceFlavor's nodes, from the shared cache.

Kueue assigns each podSet a ResourceFlavor; the nodes it may run on are those carrying the flavor's
`spec.nodeLabels`. The Devices ledger of a node carries the same selector labels (the device manager stamps
the feature key and os/arch, the worker copies the managed mark and the CPU keys), except the per-node card
count `<key>.count`, which only the Node has; so a flavor's candidate ledgers are the Devices matching its
nodeLabels less the `.count` keys, found through the POOL_LABEL index rather than a list. The flavor's
accelerator feature key names the card group (`<mfr>-<id>`) whose ledger rows count; unhealthy cards are
left out. The reverse question (a ledger changed: which waiting workloads could it help) goes through the
same labels to the flavors, then to the workloads waiting on them (WORKLOADS_WAITING_BY_FLAVOR).
"""

from __future__ import annotations

import logging

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import ACCELERATABLE_FEATURE_PREFIX, COUNT_SUFFIX
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.watches import KeyFunc
from gpustack_operator.controllers.indexers import POOL_LABEL, WORKLOAD_WAITING_FLAVOR, devices_pool
from gpustack_operator.controllers.pools import matches, name_of, selected
from gpustack_operator.kube.resources import DEVICES, RESOURCE_FLAVORS, WORKLOADS
from gpustack_operator.kube.store import object_key
from gpustack_operator.rules.capacity.views import MalformedLedgerError, pool_card_rows, unhealthy_cards
from gpustack_operator.rules.cards import CardState
from gpustack_operator.rules.naming.labels import TRUE

__all__ = ["PoolCards", "flavor_group", "flavor_selector", "waiting_on_devices"]

log = logging.getLogger(__name__)


def flavor_selector(flavor: JSONObj) -> dict[str, str]:
    """The labels a candidate node's Devices carries: the flavor's nodeLabels less the `.count` keys."""
    labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return {k: str(v) for k, v in labels.items() if not k.endswith(COUNT_SUFFIX)}


def flavor_group(flavor: JSONObj) -> str | None:
    """The card group (`<mfr>-<id>`) a device flavor is for; None for a CPU flavor."""
    selector = flavor_selector(flavor)
    keys = [k for k, v in selector.items() if k.startswith(ACCELERATABLE_FEATURE_PREFIX) and v == TRUE]
    return keys[0].removeprefix(ACCELERATABLE_FEATURE_PREFIX) if len(keys) == 1 else None


class PoolCards:
    """The healthy cards of a flavor's nodes, each ledger read once per version of its Devices object.

    A decision on a pool of 1,000 nodes would otherwise parse 8,000 ledger rows every time (most of a
    decision's cost); a ledger only changes with its object's resourceVersion, so the rows read from it
    are kept under that version. The row dicts returned are shared: callers must not change them.
    """

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self._rows: dict[str, tuple[str, str, dict[str, CardState]]] = {}
        """Devices name -> (resourceVersion, card group, rows) as last read."""

    def of_flavor(self, flavor_name: str) -> dict[str, dict[str, CardState]]:
        """Node (Devices name) -> card ID -> ledger row, for the healthy cards of the flavor's nodes."""
        flavor = self.cache.get(RESOURCE_FLAVORS, flavor_name)
        group = None if flavor is None else flavor_group(flavor)
        if flavor is None or group is None:
            return {}
        found = {}
        for devices in selected(self.cache, DEVICES, flavor_selector(flavor)):
            name, version = name_of(devices), str((devices.get("metadata") or {}).get("resourceVersion", ""))
            known = self._rows.get(name)
            if known is not None and known[:2] == (version, group):
                found[name] = known[2]
                continue
            try:
                sick = unhealthy_cards(devices, group)
                rows = {cid: c for cid, c in pool_card_rows(devices, group) if cid not in sick}
            except MalformedLedgerError as e:
                log.warning("devices=%s ledger unreadable, its node is left out: %s", name, e)
                continue
            self._rows[name] = (version, group, rows)
            found[name] = rows
        if len(self._rows) > 2 * len(self.cache.list(DEVICES)) + 64:  # forget the nodes that left
            live = {name_of(d) for d in self.cache.list(DEVICES)}
            self._rows = {k: v for k, v in self._rows.items() if k in live}
        return found


def waiting_on_devices(cache: Cache) -> KeyFunc:
    """A key function: a Devices ledger -> the workloads waiting on a flavor whose nodes it belongs to."""

    def keys(devices: JSONObj) -> list[str]:
        pairs = devices_pool(devices)
        flavors = {
            name_of(f): f for pair in pairs for f in cache.by_index(RESOURCE_FLAVORS, POOL_LABEL, pair)
        }
        waiting = {
            object_key(wl)
            for name, flavor in flavors.items()
            if matches(flavor_selector(flavor), devices)
            for wl in cache.by_index(WORKLOADS, WORKLOAD_WAITING_FLAVOR, name)
        }
        return sorted(waiting)

    return keys
