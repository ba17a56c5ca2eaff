"""`devices.worker.gpustack.ai/v1`: the cluster-scoped v1alpha1 Devices CRD (one per node: its cards and
their ledger) served as v1 (contract §2.1, short name `devs`).

Every verb goes to the CRD (registry/generic/crdproxy.py); the device manager and the chain keep writing
v1alpha1. The CRD has no printer columns, so v1 adds what an admin looks for first: how many cards the
node has, how many are free (all their units left, by the card model's rule), how many are held in each
mode, and how many are unhealthy; `-o wide` adds the oversold ones and the cards' product and VRAM. Each
card, with the Pods holding it, is the `cards` subresource (devicecards.py), read from the same ledger.
"""

from __future__ import annotations

from collections.abc import Callable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import CATEGORY, KIND_DEVICES, PLURAL_DEVICES, V1, WORKER_GROUP
from gpustack_operator.api.schema.devices import DEVICES
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.registry.devicecards import CARDS, DeviceCards, node_cards, products, vram
from gpustack_operator.apiserver.registry.devicecards import RBAC as CARDS_RBAC
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
    readers=(CARDS,),
)
SCHEMA = DEVICES.openapi_schema()


def _manufacturers(obj: JSONObj) -> str:
    groups = (obj.get("spec") or {}).get("groups") or []
    names = sorted(
        {str(g.get("manufacturer")) for g in groups if isinstance(g, dict) and g.get("manufacturer")}
    )
    return ",".join(names) or "<none>"


def _count(test: Callable[[CardState], bool]) -> Callable[[JSONObj], int]:
    return lambda obj: sum(1 for card in node_cards(obj) if test(card.state))


def _held(mode: Mode) -> Callable[[CardState], bool]:
    return lambda card: card.mode == mode


COLUMNS = (
    NAME,
    Column("Manufacturer", _manufacturers, description="The manufacturers of the node's device groups."),
    Column("Cards", lambda obj: len(node_cards(obj)), type="integer", description="Cards in the ledger."),
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
    Column("Product", products, description="The product names of the node's card groups.", priority=1),
    Column("VRAM", vram, description="The memory of one card of each group.", priority=1),
    Column("Age", age, type="date", description="Time since creation."),
)


def proxy(client: Client) -> CRDProxy:
    return CRDProxy(client, SERVED, STORED, WORKER, COLUMNS, readers={CARDS.name: DeviceCards(client).get})


def _storage(backends: Backends) -> CRDProxy:
    return proxy(backends.client)


RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=(*proxy_rules(STORED), *CARDS_RBAC))
