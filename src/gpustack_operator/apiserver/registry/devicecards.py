"""`devices/cards`: each card of one node as the ledger holds it, and the Pods holding it (issue 27).

Why this module exists: `kubectl get devices` counts a node's cards, but an admin chasing "why is this
card busy" needs the card itself: its index and UUID, product and VRAM, the mode it is held in, the units it
has left (of D = 1,600,000, rules.cards), its health, and which Pods hold it. The ledger (Devices.status)
has the mode and units; only the Pods' allocation annotations (`device.gpustack.ai/accelerator.allocated`,
the ledger's own source) say who. So this view joins the Devices object to the node's Pods, on every GET.

Why a subresource of v1 `devices` and not a resource of its own: it is one node's map, read with
`kubectl get devices <node> --subresource=cards` (kubectl 1.37 sends any subresource name; a kubectl that
allows only status and scale can `kubectl get --raw /apis/worker.gpustack.ai/v1/devices/<node>/cards`);
kubectl asks for a Table and prints one row per card. Being `devices/cards`, it is authorized apart from
`devices` by the same SubjectAccessReview as every request: it names Pods of every namespace, which a
user allowed to read Devices may not be allowed to see. A separate `devicecards` resource would need names
of its own for cards, selectors to pick a node, and a second list of every Pod for a cluster-wide LIST.
Plain JSON gets a `DeviceCards` object (`cards[]`, one entry per row); the Table is rendered from those
entries, so both say the same thing.

The rows follow the ledger as the node columns of `kubectl get devices` do (one row per ledger entry, in its
order; none before the device manager wrote a ledger); free, oversold and room are the card model's
(rules.cards.CardState), health is the device manager's report (rules.capacity.views.unhealthy_cards), and a
Pod holds a card while rules.cards.holds_cards says so, which is the rule the ledger counts it by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gpustack_operator.api.json import JSONObj, as_mapping, as_mappings, as_str
from gpustack_operator.api.keys import V1, WORKER_GROUP
from gpustack_operator.apiserver.discovery import Reader
from gpustack_operator.apiserver.negotiation import Representation, negotiate
from gpustack_operator.apiserver.table import Column, partial_metadata, table
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import DEVICES, PODS
from gpustack_operator.rules.capacity.views import unhealthy_cards
from gpustack_operator.rules.cards import CARD_UNITS, CardState, Mode, card_mode_label, holds_cards
from gpustack_operator.rules.instance.status import pod_allocations

__all__ = [
    "CARDS",
    "COLUMNS",
    "KIND",
    "RBAC",
    "Card",
    "DeviceCards",
    "cards_object",
    "holders",
    "node_cards",
    "products",
    "vram",
]

KIND = "DeviceCards"
CARDS = Reader(
    "cards",
    "Each card of the node: index, UUID, product, VRAM, the mode it is held in, the units it has left "
    f"(of {CARD_UNITS:,} a card), its health and the Pods holding it.",
    {
        "type": "object",
        "description": f"A {KIND}: the node's cards in `cards[]` (or a Table of them, one row each).",
    },
)
RBAC = (Rule.of(DEVICES, "get"), Rule.of(PODS, "list"))
"""The node's Devices and its Pods (a field selector on spec.nodeName), read with the worker's credentials."""


@dataclass(frozen=True)
class Card:
    """One ledger entry, with what the spec says of its card and who holds it."""

    group: str
    manufacturer: str
    id: str
    index: int
    state: CardState
    product: str = ""
    memory_mib: int = 0
    holders: tuple[str, ...] = ()

    def to_json(self) -> JSONObj:
        return {
            "index": self.index,
            "id": self.id,
            "manufacturer": self.manufacturer,
            "group": self.group,
            "product": self.product,
            "memoryMiB": self.memory_mib,
            "mode": _mode(self.state.mode),
            "remaining": self.state.remaining,
            "free": self.state.free,
            "oversold": self.state.remaining < 0,
            "healthy": self.state.healthy,
            "holders": list(self.holders),
        }


def _mode(mode: int) -> str:
    """The mode as users write it (`exclusive`, `shared`, `sliced`), `<none>` for a card nobody holds, the
    number for a mode this version does not know."""
    if mode == Mode.NONE:
        return "<none>"
    try:
        return card_mode_label(Mode(mode))
    except ValueError:
        return str(mode)


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _spec_groups(devices: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {
        (as_str(group.get("manufacturer")), as_str(group.get("id"))): group
        for group in as_mappings(as_mapping(devices.get("spec")).get("groups"))
    }


def holders(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(manufacturer, card UUID) -> `namespace/name` of the Pods holding it, oldest first. A card is filed by
    manufacturer and UUID, as the ledger counts it (a group renamed under running work keeps its holders);
    an unreadable annotation holds nothing, as in the ledger. One difference: a Pod the ledger skips because
    it holds a card in another mode than an older Pod does (records of an older version) is named here."""
    found: dict[tuple[str, str], list[str]] = {}
    order = sorted(
        pods, key=lambda p: (as_str(as_mapping(p.get("metadata")).get("creationTimestamp")), _key(p))
    )
    for pod in order:
        if not holds_cards(as_str(as_mapping(pod.get("status")).get("phase")) or "Pending"):
            continue
        groups, _ = pod_allocations(pod)
        for group in groups:
            for card in group.get("accelerators") or []:
                found.setdefault((group["manufacturer"], card["id"]), []).append(_key(pod))
    return {card: tuple(dict.fromkeys(names)) for card, names in found.items()}


def _key(pod: Mapping[str, Any]) -> str:
    meta = as_mapping(pod.get("metadata"))
    return f"{as_str(meta.get('namespace'))}/{as_str(meta.get('name'))}"


def node_cards(devices: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = ()) -> list[Card]:
    """The cards of one Devices object, one per ledger entry in the ledger's order (an omitted `remaining` is
    0, as the ledger writes it), with their product, VRAM and health from the spec and holders from `pods`."""
    sick, spec, held = unhealthy_cards(devices), _spec_groups(devices), holders(pods)
    cards = []
    for group in as_mappings(as_mapping(devices.get("status")).get("groups")):
        manufacturer, group_id = as_str(group.get("manufacturer")), as_str(group.get("id"))
        described = spec.get((manufacturer, group_id), {})
        for n, entry in enumerate(as_mappings(group.get("accelerators"))):
            uuid = str(entry.get("id", ""))
            index = _int(entry.get("index"), n)
            state = CardState(
                _int(entry.get("remaining")), _int(entry.get("mode")), healthy=uuid not in sick, index=index
            )
            cards.append(
                Card(
                    group_id,
                    manufacturer,
                    uuid,
                    index,
                    state,
                    product=as_str(described.get("name")),
                    memory_mib=_int(described.get("memory")),
                    holders=held.get((manufacturer, uuid), ()),
                )
            )
    return cards


def _each_group(devices: Mapping[str, Any], field: str) -> list[object]:
    return [group.get(field) for group in as_mappings(as_mapping(devices.get("spec")).get("groups"))]


def products(devices: Mapping[str, Any]) -> str:
    """The product names of the node's card groups, in the spec's order (`<none>` without groups)."""
    return ",".join(dict.fromkeys(as_str(name) for name in _each_group(devices, "name") if name)) or "<none>"


def vram(devices: Mapping[str, Any]) -> str:
    """The VRAM of one card of each group, as a quantity (`81559Mi`), in the spec's order."""
    sizes = [f"{size}Mi" for size in _each_group(devices, "memory") if _int(size) > 0]
    return ",".join(dict.fromkeys(sizes)) or "<none>"


def _memory(card: JSONObj) -> str:
    size = _int(card.get("memoryMiB"))
    return f"{size}Mi" if size > 0 else "<unknown>"


COLUMNS = (
    Column("Index", lambda card: card["index"], type="integer", description="The card's index on its node."),
    Column("UUID", lambda card: card["id"], description="The card's ID (its UUID for NVIDIA)."),
    Column("Product", lambda card: card["product"] or "<unknown>", description="The card's product name."),
    Column("VRAM", _memory, description="The card's memory."),
    Column("Mode", lambda card: card["mode"], description="The mode it is held in; <none>: nobody holds it."),
    Column(
        "Remaining",
        lambda card: card["remaining"],
        type="integer",
        description=f"Units left of {CARD_UNITS:,}; negative when oversold.",
    ),
    Column(
        "Health",
        lambda card: "Healthy" if card["healthy"] else "Unhealthy",
        description="What the device manager reports; an unhealthy card gives nothing.",
    ),
    Column(
        "Holders",
        lambda card: ",".join(card["holders"]) or "<none>",
        description="The Pods holding the card (namespace/name), oldest first.",
    ),
    Column("Manufacturer", lambda card: card["manufacturer"], description="The card's maker.", priority=1),
    Column("Group", lambda card: card["group"], description="The card's device group ID.", priority=1),
    Column(
        "Oversold",
        lambda card: str(card["oversold"]).lower(),
        description="Its holders were given more units than the card has (it gives nothing).",
        priority=1,
    ),
)


def cards_object(devices: Mapping[str, Any], cards: Sequence[Card]) -> JSONObj:
    """The `DeviceCards` answer: the node's name and resourceVersion, and its cards."""
    meta = as_mapping(devices.get("metadata"))
    return {
        "apiVersion": f"{WORKER_GROUP}/{V1}",
        "kind": KIND,
        "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion") if k in meta},
        "cards": [card.to_json() for card in cards],
    }


class DeviceCards:
    """GET `devices/<node>/cards`: the Devices object and the node's Pods, read with the worker's client (the
    user was authorized on `devices/cards` first); a Devices that does not exist is the CRD's own 404."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def get(self, request: web.Request) -> web.Response:
        rep = negotiate(request.headers.get("Accept", ""), is_list=False)
        node = request.match_info["name"]
        devices = await self.client.request("GET", DEVICES.path(node), retries=0)
        pods = await self.client.list(PODS, field_selector=f"spec.nodeName={node}")
        doc = cards_object(devices, node_cards(devices, pods))
        if rep is Representation.TABLE:
            meta = {"resourceVersion": doc["metadata"].get("resourceVersion", "")}
            return web.json_response(table(COLUMNS, doc["cards"], list_meta=meta, include_object="None"))
        if rep is Representation.PARTIAL:
            return web.json_response(partial_metadata(doc))
        return web.json_response(doc)
