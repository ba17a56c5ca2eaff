"""The ledger is rebuilt from pod annotations alone, with the contract's numbers (§2.5)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.api.types.devices import DevicesSpec
from gpustack_operator.device_manager.ledger import rebuild, remaining_of

EXCLUSIVE, SHARED, SLICED = 1, 2, 3
GROUP = "h100-80gb-hbm3"
SPEC: DevicesSpec = {
    "groups": [
        {
            "id": GROUP,
            "manufacturer": "nvidia",
            "name": "NVIDIA H100 80GB HBM3",
            "memory": 81559,
            "accelerators": [
                {
                    "id": f"GPU-{i}",
                    "index": i,
                    "physicalIndexes": [i],
                    "topology": {
                        "pciBusId": "",
                        "pciRootId": "",
                        "pciClass": "",
                        "numaAffinity": "",
                        "cpuAffinity": "",
                    },
                    "status": {"unhealthy": False},
                }
                for i in range(2)
            ],
        }
    ]
}

Holding = tuple[int, str, int]
"""(mode, card, allocated units) of one container."""


def pod(
    name: str,
    containers: dict[str, list[Holding]] | None = None,
    *,
    created: str = "2026-01-01T00:00:00Z",
    phase: str = "Running",
    deleting: bool = False,
    raw: str | None = None,
    tokens: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A pod whose annotation records ``containers`` as the device plugin writes it; each container is
    given its own token of each card (`tokens` sets a container's token index, to share one)."""
    token = {name: n for n, name in enumerate(containers or {})} | (tokens or {})
    record = {
        container: {
            "devices": {
                "groups": [
                    {
                        "id": GROUP,
                        "manufacturer": "nvidia",
                        "accelerators": [
                            {"id": card, "index": int(card[-1]), "mode": mode, "allocated": units}
                            for mode, card, units in holdings
                        ],
                    }
                ]
            },
            "deviceIDs": [f"{GROUP}:{card}:{token[container]:04d}" for _, card, _ in holdings],
        }
        for container, holdings in (containers or {}).items()
    }
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "creationTimestamp": created, "annotations": {}}
    if containers is not None or raw is not None:
        meta["annotations"][ACCELERATOR_ALLOCATED_ANNOTATION] = raw if raw is not None else json.dumps(record)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def ledger(pods: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(mode, remaining) of each card."""
    entries = rebuild(SPEC, pods).status["groups"][0].get("accelerators", [])
    return [(e["mode"], remaining_of(e)) for e in entries]


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([], [(0, 1_600_000), (0, 1_600_000)], id="no-pods-every-card-free"),
        pytest.param([pod("p", {})], [(0, 1_600_000), (0, 1_600_000)], id="empty-annotation-holds-nothing"),
        pytest.param(
            [pod("p", {"main": [(SLICED, "GPU-0", 400_000)]})],
            [(SLICED, 1_200_000), (0, 1_600_000)],
            id="sliced-400000-leaves-1200000",
        ),
        pytest.param(
            [
                pod("a", {"main": [(SLICED, "GPU-0", 400_000)]}),
                pod("b", {"main": [(SLICED, "GPU-0", 800_000)]}),
            ],
            [(SLICED, 400_000), (0, 1_600_000)],
            id="two-slices-add-up",
        ),
        pytest.param(
            [pod("p", {"main": [(EXCLUSIVE, "GPU-1", 1_600_000)]})],
            [(0, 1_600_000), (EXCLUSIVE, 0)],
            id="exclusive-takes-the-whole-card",
        ),
        pytest.param(
            [
                pod("a", {"main": [(SHARED, "GPU-0", 160_000)]}),
                pod("b", {"main": [(SHARED, "GPU-0", 160_000)]}),
            ],
            [(SHARED, 1_280_000), (0, 1_600_000)],
            id="two-shared-owners",
        ),
        pytest.param(
            [pod("p", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000), (EXCLUSIVE, "GPU-1", 1_600_000)]})],
            [(EXCLUSIVE, 0), (EXCLUSIVE, 0)],
            id="one-container-two-cards",
        ),
        pytest.param(
            [
                pod("p", {"main": [(SLICED, "GPU-0", 1_200_000)]}),
                pod("q", {"main": [(SLICED, "GPU-0", 800_000)]}),
            ],
            [(SLICED, -400_000), (0, 1_600_000)],
            id="over-allocation-shows-as-negative",
        ),
        pytest.param(
            [pod("p", {"main": [(SLICED, "GPU-0", 400_000)]}, deleting=True)],
            [(SLICED, 1_200_000), (0, 1_600_000)],
            id="terminating-pod-still-counts",
        ),
        pytest.param(
            [pod("p", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]}, phase="Succeeded")],
            [(0, 1_600_000), (0, 1_600_000)],
            id="finished-pod-holds-nothing",
        ),
        pytest.param(
            [pod("p", {"main": [(EXCLUSIVE, "GPU-9", 1_600_000)]})],
            [(0, 1_600_000), (0, 1_600_000)],
            id="card-no-longer-in-spec-is-ignored",
        ),
    ],
)
def test_ledger_numbers(pods: list[dict[str, Any]], expected: list[tuple[int, int]]) -> None:
    assert ledger(pods) == expected


def test_a_pod_conflicting_with_an_older_holder_is_skipped_whole_and_reported() -> None:
    older = pod("older", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]}, created="2026-01-01T00:00:00Z")
    younger = pod(
        "younger",
        {"main": [(SLICED, "GPU-1", 400_000), (SLICED, "GPU-0", 400_000)]},
        created="2026-01-01T00:00:05Z",
    )
    result = rebuild(SPEC, [younger, older])
    assert result.conflicts == ["ns/younger"]
    assert ledger([younger, older]) == [(EXCLUSIVE, 0), (0, 1_600_000)], (
        "nothing of the skipped pod is applied"
    )


def test_containers_of_one_pod_in_conflicting_modes_skip_the_pod() -> None:
    assert ledger([pod("p", {"b": [(EXCLUSIVE, "GPU-0", 1_600_000)], "a": [(SLICED, "GPU-0", 1)]})]) == [
        (0, 1_600_000),
        (0, 1_600_000),
    ]


def test_two_containers_holding_one_card_both_count() -> None:
    two = pod("p", {"main": [(SLICED, "GPU-0", 400_000)], "side": [(SLICED, "GPU-0", 200_000)]})
    assert ledger([two]) == [(SLICED, 1_000_000), (0, 1_600_000)]


def test_an_app_container_reusing_its_init_containers_token_counts_once_at_the_larger_units() -> None:
    reused = pod(
        "p",
        {"init": [(SLICED, "GPU-0", 400_000)], "main": [(SLICED, "GPU-0", 800_000)]},
        tokens={"init": 3, "main": 3},
    )
    assert ledger([reused]) == [(SLICED, 800_000), (0, 1_600_000)]


def test_an_oversold_card_keeps_its_true_remaining_and_says_so() -> None:
    pods = [pod(f"half-{i}", {"main": [(SLICED, "GPU-0", 800_000)]}) for i in range(3)]
    (entry, free) = rebuild(SPEC, pods).status["groups"][0]["accelerators"]
    assert entry == {"id": "GPU-0", "index": 0, "mode": SLICED, "remaining": -800_000, "oversold": True}
    assert "oversold" not in free
    assert rebuild(SPEC, pods).oversold == ["GPU-0"]
    exactly_full = [pod(f"half-{i}", {"main": [(SLICED, "GPU-0", 800_000)]}) for i in range(2)]
    assert rebuild(SPEC, exactly_full).status["groups"][0]["accelerators"][0] == {
        "id": "GPU-0",
        "index": 0,
        "mode": SLICED,
    }, "a card given exactly its units is full, not oversold"


def test_unreadable_annotation_is_reported_and_its_cards_read_free() -> None:
    result = rebuild(SPEC, [pod("bad", raw="{not json")])
    assert result.unreadable == ["ns/bad"]
    assert ledger([pod("bad", raw="{not json")]) == [(0, 1_600_000), (0, 1_600_000)]


def test_rebuild_is_the_same_whatever_order_the_pods_are_listed_in() -> None:
    pods = [
        pod(
            f"p{i}",
            {"main": [(SLICED, f"GPU-{i % 2}", 100_000 * (i + 1))]},
            created=f"2026-01-01T00:00:0{i}Z",
        )
        for i in range(6)
    ]
    expected = rebuild(SPEC, pods).status
    shuffled = pods[:]
    random.Random(7).shuffle(shuffled)
    assert rebuild(SPEC, shuffled).status == expected


def test_status_entries_omit_empty_remaining_and_always_carry_the_mode() -> None:
    status = rebuild(SPEC, [pod("p", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]})]).status
    assert status["groups"][0].get("accelerators") == [
        {"id": "GPU-0", "index": 0, "mode": EXCLUSIVE},
        {"id": "GPU-1", "index": 1, "mode": 0, "remaining": 1_600_000},
    ]


def test_holders_are_one_per_container_of_each_counted_pod_holding_cards() -> None:
    pods = [
        pod("pair", {"a": [(SLICED, "GPU-0", 400_000)], "b": [(SLICED, "GPU-0", 400_000)]}),
        pod("reuse", {"init": [(SLICED, "GPU-0", 400_000)], "main": [(SLICED, "GPU-0", 400_000)]},
            tokens={"init": 3, "main": 3}),
        pod("done", {"main": [(SLICED, "GPU-1", 400_000)]}, phase="Failed"),
        pod("clash", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]}, created="2026-01-01T00:00:01Z"),
        pod("bad", raw="{not json"),
        pod("cpu"),
    ]  # fmt: skip
    result = rebuild(SPEC, pods)
    assert result.holders == 4, "the pair's two containers, and the init and app container reusing a card"
    assert ledger(pods)[0] == (SLICED, 400_000), "the reused card is charged once"
