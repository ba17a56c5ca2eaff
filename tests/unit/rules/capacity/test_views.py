"""InstanceType capacity views (§7.9): cards, shares and VRAM percent from the ledger; CPU from the queue."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gpustack_operator.rules.capacity.views import (
    AcceleratorViews,
    MalformedLedgerError,
    View,
    accelerator_views,
    cpu_view,
    node_most,
    pool_cards,
)
from gpustack_operator.rules.cards import CardState

D = 1_600_000
NONE, EXCLUSIVE, SHARED, SLICED = 0, 1, 2, 3


def free(sliceable: bool = True) -> CardState:
    return CardState(D, NONE, sliceable)


def shown(view: View) -> tuple[str, str, str]:
    """(capacity, remaining, onceMaxRequest) as kubectl shows them."""
    r = view.resource()
    return r["capacity"], r["remaining"], r["onceMaxRequest"]


def all_views(views: AcceleratorViews) -> dict[str, tuple[str, str, str]]:
    return {"exclusive": shown(views.exclusive), "shared": shown(views.shared), "sliced": shown(views.sliced)}


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param(
            [[free()] * 4],
            {"exclusive": ("4", "4", "4"), "shared": ("40", "40", "40"), "sliced": ("400", "400", "100")},
            id="four free cards: every view full, a slice is at most one card",
        ),
        pytest.param(
            [
                [
                    free(),
                    CardState(0, EXCLUSIVE, True),
                    CardState(1_280_000, SHARED, True),
                    CardState(1_120_000, SLICED, True),
                ]
            ],
            {"exclusive": ("4", "1", "1"), "shared": ("40", "18", "18"), "sliced": ("400", "170", "100")},
            id="mixed modes: shares only on free or shared cards, percent only on free or sliced ones",
        ),
        pytest.param(
            [[free(), free()], [free(), free(), free()]],
            {"exclusive": ("5", "5", "3"), "shared": ("50", "50", "30"), "sliced": ("500", "500", "100")},
            id="two nodes: one request spans at most one node's cards",
        ),
        pytest.param(
            [[free(sliceable=False)] * 2],
            {"exclusive": ("2", "2", "2"), "shared": ("20", "20", "20"), "sliced": ("0", "0", "0")},
            id="cards that cannot be sliced offer no sliced view",
        ),
        pytest.param(
            [[CardState(D - 1, NONE, True)]],
            {"exclusive": ("1", "0", "0"), "shared": ("10", "0", "0"), "sliced": ("100", "0", "0")},
            id="a card short of one unit is not free and, in no mode, offers nothing",
        ),
        pytest.param(
            [[CardState(3_125, SLICED, True)], [CardState(150_000, SHARED, True)]],
            {"exclusive": ("2", "0", "0"), "shared": ("20", "0", "0"), "sliced": ("200", "0", "0")},
            id="remainders smaller than one share or one percent round down to nothing",
        ),
        pytest.param(
            [
                [
                    free(),
                    CardState(D, NONE, True, healthy=False),
                    CardState(1_280_000, SHARED, True, healthy=False),
                    CardState(1_120_000, SLICED, True, healthy=False),
                ]
            ],
            {"exclusive": ("4", "1", "1"), "shared": ("40", "10", "10"), "sliced": ("400", "100", "100")},
            id="unhealthy cards keep their place in capacity but offer nothing in any mode",
        ),
        pytest.param(
            [[free(), CardState(-800_000, SLICED, True), CardState(-160_000, SHARED, True)]],
            {"exclusive": ("3", "1", "1"), "shared": ("30", "10", "10"), "sliced": ("300", "100", "100")},
            id="oversold cards (negative remaining) give nothing and take nothing from the others",
        ),
        pytest.param(
            [],
            {"exclusive": ("0", "0", "0"), "shared": ("0", "0", "0"), "sliced": ("0", "0", "0")},
            id="an empty pool",
        ),
    ],
)
def test_accelerator_views(nodes: list[list[CardState]], expected: dict[str, tuple[str, str, str]]) -> None:
    assert all_views(accelerator_views(nodes)) == expected


def devices(spec_groups: list[Any], status_groups: list[Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "node-1"}, "spec": {"groups": spec_groups}}
    if status_groups is not None:
        obj["status"] = {"groups": status_groups}
    return obj


def group(mfr: str, gid: str, max_slices: int = 0) -> dict[str, Any]:
    g: dict[str, Any] = {"id": gid, "manufacturer": mfr, "name": gid, "memory": 24576}
    if max_slices:
        g["acceleratorsFeature"] = {"logicalSliced": {"maxSize": max_slices}}
    return g


def ledger(mfr: str, gid: str, *rows: dict[str, Any]) -> dict[str, Any]:
    return {"id": gid, "manufacturer": mfr, "accelerators": list(rows)}


def test_pool_cards_reads_only_the_pool_group_and_its_slicing_capability() -> None:
    obj = devices(
        [group("nvidia", "a10g", max_slices=128), group("nvidia", "h100"), group("amd", "a10g")],
        [
            ledger(
                "nvidia",
                "a10g",
                {"id": "0", "index": 0, "mode": 0, "remaining": D},
                {"id": "1", "index": 1, "mode": 1},
            ),
            ledger("nvidia", "h100", {"id": "0", "index": 0, "mode": 0, "remaining": D}),
            ledger("amd", "a10g", {"id": "0", "index": 0, "mode": 0, "remaining": D}),
        ],
    )
    assert pool_cards(obj, "nvidia-a10g") == [
        CardState(D, NONE, True),
        CardState(0, EXCLUSIVE, True, index=1),
    ]
    assert pool_cards(obj, "nvidia-h100") == [CardState(D, NONE, False)]
    assert pool_cards(obj, "nvidia-t4") == []


def test_a_card_the_device_manager_reports_unhealthy_reads_unhealthy_in_the_pool() -> None:
    spec = group("nvidia", "a10g", max_slices=128)
    spec["accelerators"] = [
        {"id": "0", "status": {"unhealthy": False}},
        {"id": "1", "status": {"unhealthy": True}},
    ]
    rows = [
        {"id": "0", "index": 0, "mode": 0, "remaining": D},
        {"id": "1", "index": 1, "mode": 0, "remaining": D},
    ]
    obj = devices([spec], [ledger("nvidia", "a10g", *rows)])
    assert pool_cards(obj, "nvidia-a10g") == [
        CardState(D, NONE, True),
        CardState(D, NONE, True, healthy=False, index=1),
    ]
    assert all_views(accelerator_views([pool_cards(obj, "nvidia-a10g")]))["exclusive"] == ("2", "1", "1")


def test_a_node_whose_ledger_is_not_written_yet_has_no_cards() -> None:
    assert pool_cards(devices([group("nvidia", "a10g", 128)]), "nvidia-a10g") == []


@pytest.mark.parametrize(
    ("status_groups", "where"),
    [
        pytest.param(
            [ledger("nvidia", "a10g", {"id": "0", "mode": 0, "remaining": "lots"})],
            "remaining",
            id="remaining",
        ),
        pytest.param([ledger("nvidia", "a10g", {"id": "0", "mode": True})], "mode", id="mode"),
        pytest.param(
            [{"id": "a10g", "manufacturer": "nvidia", "accelerators": "0,1"}], "accelerators", id="rows"
        ),
        pytest.param("groups", "status.groups", id="groups"),
    ],
)
def test_a_malformed_ledger_is_refused_naming_the_field(status_groups: Any, where: str) -> None:
    with pytest.raises(MalformedLedgerError, match=where):
        pool_cards(devices([group("nvidia", "a10g")], status_groups), "nvidia-a10g")


def queue(flavors: dict[str, Any], reserved: list[Any] | None = None) -> dict[str, Any]:
    quotas = [{"name": n, "resources": [{"name": "cpu", "nominalQuota": q}]} for n, q in flavors.items()]
    cq: dict[str, Any] = {"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": quotas}]}}
    if reserved is not None:
        cq["status"] = {"flavorsReservation": reserved}
    return cq


def reservation(flavor: str, total: str) -> dict[str, Any]:
    return {"name": flavor, "resources": [{"name": "cpu", "total": total, "borrowed": "0"}]}


SMALL, BIG = "gpustack--amd-25-1-linux-amd64-8c", "gpustack--amd-25-1-linux-amd64-16c"


@pytest.mark.parametrize(
    ("cq", "overcommit", "expected"),
    [
        pytest.param(queue({SMALL: "16", BIG: "32"}), False, ("48", "48", "16"), id="nothing reserved"),
        pytest.param(
            queue({SMALL: "16", BIG: "32"}, [reservation(BIG, "4")]),
            False,
            ("48", "44", "16"),
            id="reserved cores",
        ),
        pytest.param(
            queue({SMALL: "16"}, [reservation(SMALL, "3200m")]),
            True,
            ("16", "12", "8"),
            id="800m per core overcommitted",
        ),
        pytest.param(
            queue({SMALL: "8"}, [reservation(SMALL, "6")]),
            False,
            ("8", "2", "2"),
            id="once-max capped at remaining",
        ),
        pytest.param(
            queue({SMALL: "8"}, [reservation(SMALL, "9")]), False, ("8", "0", "0"), id="never negative"
        ),
        pytest.param(queue({SMALL: 8}), False, ("8", "8", "8"), id="a bare-number quota"),
        pytest.param({"spec": {}}, False, ("0", "0", "0"), id="no quota yet"),
    ],
)
def test_cpu_view(cq: dict[str, Any], overcommit: bool, expected: tuple[str, str, str]) -> None:
    assert shown(cpu_view(cq, overcommit)) == expected


def test_each_nodes_part_of_the_once_max_request_makes_the_views_once_max_request() -> None:
    """node_most (what the fit subresource keeps per node between answers) agrees with the views."""
    rng = random.Random(9)
    for _ in range(300):
        nodes = [
            [
                CardState(
                    rng.choice((D, D, 0, D - 160_000, D - 400_000, -16_000)),
                    rng.choice((NONE, EXCLUSIVE, SHARED, SLICED)),
                    rng.random() < 0.8,
                    rng.random() < 0.9,
                )
                for _ in range(rng.randint(0, 8))
            ]
            for _ in range(rng.randint(1, 5))
        ]
        views = accelerator_views(nodes)
        mosts = [node_most(node) for node in nodes]
        assert max(m[0] for m in mosts) == views.exclusive.once_max_request.value()
        assert max(m[1] for m in mosts) == views.shared.once_max_request.value()
        assert max(m[2] for m in mosts) == views.sliced.once_max_request.value()
