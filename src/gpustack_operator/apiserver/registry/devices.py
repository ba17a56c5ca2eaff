"""`devices.worker.gpustack.ai/v1`: the cluster-scoped v1alpha1 Devices CRD (one per node: its cards and
their ledger) served as v1 (contract §2.1, short name `devs`).

Every verb goes to the CRD (registry/generic/crdproxy.py); the device manager and the chain keep writing
v1alpha1. The CRD has no printer columns, so v1 adds what an admin looks for first: how many cards the
node has, how many are free (all their units left, by the card model's rule), how many are held in each
mode, and how many are unhealthy; `-o wide` adds the oversold ones.
"""

from __future__ import annotations

from collections.abc import Callable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import CATEGORY, KIND_DEVICES, PLURAL_DEVICES, V1, WORKER_GROUP
from gpustack_operator.api.schema.devices import DEVICES
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.registry.generic.crdproxy import (
    STATUS_SUBRESOURCE,
    VERBS,
    CRDProxy,
    proxy_rules,
)
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.table import NAME, Column, age
from gpustack_operator.conversion.apiversion import WORKER
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import DEVICES as STORED
from gpustack_operator.rules.capacity.views import unhealthy_cards
from gpustack_operator.rules.cards import CardState, Mode

__all__ = ["COLUMNS", "RESOURCE", "SCHEMA", "SERVED", "proxy"]


SERVED = ServedResource(
    group=WORKER_GROUP,
    version=V1,
    plural=PLURAL_DEVICES,
    singular="devices",
    kind=KIND_DEVICES,
    namespaced=False,
    verbs=VERBS,
    short_names=("devs",),
    categories=(CATEGORY,),
    subresources=STATUS_SUBRESOURCE,
)
SCHEMA = DEVICES.openapi_schema()


def _ledger(obj: JSONObj) -> list[tuple[str, JSONObj]]:
    """(manufacturer, entry) of every card in the status ledger."""
    groups = (obj.get("status") or {}).get("groups") or []
    return [
        (str(group.get("manufacturer", "")), card)
        for group in groups
        if isinstance(group, dict)
        for card in group.get("accelerators") or []
        if isinstance(card, dict)
    ]


def _manufacturers(obj: JSONObj) -> str:
    groups = (obj.get("spec") or {}).get("groups") or []
    names = sorted(
        {str(g.get("manufacturer")) for g in groups if isinstance(g, dict) and g.get("manufacturer")}
    )
    return ",".join(names) or "<none>"


def _state(card: JSONObj, sick: set[str]) -> CardState:
    """One ledger entry as the card model reads it (an omitted remaining is 0, as the ledger writes it)."""
    remaining, mode = card.get("remaining", 0), card.get("mode", 0)
    return CardState(
        remaining if isinstance(remaining, int) else 0,
        mode if isinstance(mode, int) else 0,
        healthy=str(card.get("id")) not in sick,
    )


def _count(test: Callable[[CardState], bool]) -> Callable[[JSONObj], int]:
    def cell(obj: JSONObj) -> int:
        sick = unhealthy_cards(obj)
        return sum(1 for _, card in _ledger(obj) if test(_state(card, sick)))

    return cell


def _held(mode: Mode) -> Callable[[CardState], bool]:
    return lambda card: card.mode == mode


COLUMNS = (
    NAME,
    Column("Manufacturer", _manufacturers, description="The manufacturers of the node's device groups."),
    Column("Cards", lambda obj: len(_ledger(obj)), type="integer", description="Cards in the ledger."),
    Column(
        "Free",
        _count(lambda card: card.free),
        type="integer",
        description="Healthy cards with all their units left (an exclusive request can take them).",
    ),
    Column("Exclusive", _count(_held(Mode.EXCLUSIVE)), type="integer", description="Cards held whole."),
    Column("Shared", _count(_held(Mode.SHARED)), type="integer", description="Cards held in owner shares."),
    Column("Sliced", _count(_held(Mode.SLICED)), type="integer", description="Cards held in slices."),
    Column(
        "Unhealthy",
        lambda obj: len(unhealthy_cards(obj)),
        type="integer",
        description="Cards the device manager reports unhealthy (they give nothing).",
    ),
    Column(
        "Oversold",
        _count(lambda card: card.remaining < 0),
        type="integer",
        description="Cards whose holders were given more units than the card has (they give nothing).",
        priority=1,
    ),
    Column("Age", age, type="date", description="Time since creation."),
)


def proxy(client: Client) -> CRDProxy:
    return CRDProxy(client, SERVED, STORED, WORKER, COLUMNS)


def _storage(backends: Backends) -> CRDProxy:
    return proxy(backends.client)


RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=proxy_rules(STORED))
