"""Over many generated node compositions, a group's ID depends only on its own cards, and the Devices
object and node labels built from the groups are always ones the API server accepts.

Compositions mix the awkward cases: one product in two VRAM sizes, one product spelt two ways, ECC
rounding (81559 vs 81920 MiB), names that normalise to nothing (with and without PCI IDs), names long
enough to be cut to the same prefix, and arbitrary text under every known manufacturer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.model import Card
from gpustack_operator.device_manager.reporting import devices_labels
from gpustack_operator.rules.naming.labels import construct_acceleratable_node_labels
from gpustack_operator.rules.naming.manufacturers import known_manufacturers
from tests.unit.rules.builders import is_label_key, is_label_value

WITH_MEMORY = {"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true"}
LONG = "NVIDIA " + "Accelerator " * 6


@dataclass(frozen=True)
class Model:
    manufacturer: str
    product: str
    memory_mib: int
    cores: int = 0
    pci_id: str = ""


AWKWARD = [
    Model("nvidia", "NVIDIA A100-SXM4", 40960, 6912),
    Model("nvidia", "NVIDIA A100-SXM4", 81920, 6912),
    Model("nvidia", "A100-SXM4", 81920, 6912),
    Model("nvidia", "NVIDIA H100 80GB HBM3", 81559, 16896),
    Model("nvidia", "NVIDIA H100 80GB HBM3", 81920, 16896),
    Model("nvidia", "NVIDIA", 81920, pci_id="10de:2330"),
    Model("nvidia", "NVIDIA", 40960, pci_id="10de:20b0"),
    Model("nvidia", "NVIDIA", 24576),
    Model("nvidia", "", 0),
    Model("nvidia", "PCI 10de:2330", 0, pci_id="10de:2330"),
    Model("nvidia", LONG + "One", 16384),
    Model("nvidia", LONG + "Two", 32768),
    Model("amd", "AMD Instinct MI300X", 196608),
    Model("ascend", "Ascend910B2", 65536),
    Model("cambricon", "MLU370-X8", 49152),
]

models = st.one_of(
    st.sampled_from(AWKWARD),
    st.builds(
        Model,
        st.sampled_from(known_manufacturers()),
        st.text(max_size=40),
        st.integers(min_value=0, max_value=2**20),
        st.integers(min_value=0, max_value=20000),
        st.sampled_from(["", "10de:2330", "1002:74a1"]),
    ),
)
compositions = st.lists(st.tuples(models, st.integers(min_value=1, max_value=4)), max_size=6)
environs = st.sampled_from([{}, WITH_MEMORY])


def build(composition: list[tuple[Model, int]], tag: str) -> list[Card]:
    """Cards for ``composition``; ``tag`` keeps the UUIDs of two compositions apart."""
    cards = []
    for m, count in composition:
        for _ in range(count):
            n = len(cards)
            cards.append(
                Card(m.manufacturer, m.product, m.memory_mib, f"{tag}-{n}", n, cores=m.cores, pci_id=m.pci_id)
            )
    return cards


def homes(groups: list[DevicesGroup]) -> dict[str, str]:
    """card UUID -> the accelerator key of the group that lists it."""
    return {acc["id"]: f"{g['manufacturer']}-{g['id']}" for g in groups for acc in g.get("accelerators", [])}


@settings(max_examples=400, deadline=None)
@given(compositions, compositions, environs)
def test_a_group_keeps_its_id_whichever_other_cards_join_or_leave(
    mine: list[tuple[Model, int]], others: list[tuple[Model, int]], environ: dict[str, str]
) -> None:
    cards, extra = build(mine, "mine"), build(others, "other")
    alone = homes(group_cards(cards, environ))
    crowded = homes(group_cards(cards + extra, environ))
    for card in cards:
        assert crowded[card.uuid] == alone[card.uuid] == homes(group_cards([card], environ))[card.uuid]


@settings(max_examples=400, deadline=None)
@given(compositions, environs)
def test_every_composition_gives_an_object_the_api_server_accepts(
    composition: list[tuple[Model, int]], environ: dict[str, str]
) -> None:
    cards = build(composition, "c")
    groups = group_cards(cards, environ)
    keys = Counter((g["id"], g["manufacturer"]) for g in groups)
    assert all(n == 1 for n in keys.values()), f"duplicate list-map keys {keys}"
    assert sorted(homes(groups)) == sorted(c.uuid for c in cards), "every card in exactly one group"
    for group in groups:
        members = [c for c in cards if c.uuid in {a["id"] for a in group["accelerators"]}]
        assert group["memory"] == min(c.memory_mib for c in members), "no card promises more than it has"
    node = {"metadata": {"name": "n", "labels": {}}}
    labels = construct_acceleratable_node_labels(groups) | devices_labels(node, groups)
    for key, value in labels.items():
        assert is_label_key(key), key
        assert is_label_value(value), (key, value)
