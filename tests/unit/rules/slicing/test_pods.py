"""The Pod webhook's sliced-request rules: units from memory, default compute, one card mode (§4.4).

The table tests go through the webhook's real entry point (PodHooks.mutate, then validate), so what they
prove is what kube-apiserver gets back; the rules' own functions are called directly only where a test is
about one of them alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from gpustack_operator.api.keys import KUEUE_QUEUE_NAME_LABEL, QUEUE_ENTRANCE_LABEL
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.pod import PodHooks
from gpustack_operator.apiserver.webhooks.review import Review
from gpustack_operator.kube.store import Store
from gpustack_operator.rules.cards import Mode, SliceUnitsError
from gpustack_operator.rules.slicing.pods import (
    mixed_modes_problem,
    needs_card_memory,
    pod_card_modes,
    repeated_card_requests,
    sliced_bases,
    sliced_problems,
)
from tests.unit.apiserver.webhooks.patched import patched

GPU = "nvidia.com/gpu"
SLICED = f"{GPU}.sliced"
UNITS = f"{GPU}.sliced.units"
CORES = f"{GPU}.sliced.cores-percentage"
MEM_PCT = f"{GPU}.sliced.memory-percentage"
MEM_MIB = f"{GPU}.sliced.memory-mib"
CARD_MIB = 40960


class Synced:
    """The worker's InstanceType cache, synced, holding the one type the pods queue for."""

    def __init__(self, card_mib: int | None) -> None:
        self.store = Store()
        spec = {"memory": f"{card_mib}Mi"} if card_mib is not None else {}
        self.store.put(
            "card", {"metadata": {"name": "card", "labels": {QUEUE_ENTRANCE_LABEL: "q"}}, "spec": spec}
        )

    def has_synced(self) -> bool:
        return True


async def admit(
    containers: Sequence[Mapping[str, str]], card_mib: int | None = CARD_MIB
) -> list[dict[str, str]]:
    """The pod through the real Pod webhook (mutate, then validate what it mutated), as kube-apiserver
    calls it; each container's resources as limits after the fold. A refusal by the mutating hook raises
    SliceUnitsError, one by the validating hook ValueError, with the Status message kube-apiserver shows."""
    hooks = PodHooks(Lookups(None, "gpustack-system", instance_types=Synced(card_mib)), environ={})  # type: ignore[arg-type]
    spec = {
        "containers": [{"name": f"c{i}", "resources": {"limits": dict(c)}} for i, c in enumerate(containers)]
    }
    pod = {"metadata": {"labels": {KUEUE_QUEUE_NAME_LABEL: "q"}}, "spec": spec}
    asked = Review("u", "CREATE", "", "v1", "Pod", "p", "ns", pod, None)
    mutated = await hooks.mutate(asked)
    if not mutated.allowed:
        raise SliceUnitsError(mutated.status.message if mutated.status else "refused")
    pod = patched(asked, mutated)
    checked = await hooks.validate(Review("u", "CREATE", "", "v1", "Pod", "p", "ns", pod, None))
    if not checked.allowed:
        raise ValueError(checked.status.message if checked.status else "refused")
    return [dict((c.get("resources") or {}).get("limits") or {}) for c in pod["spec"]["containers"]]


@pytest.mark.parametrize(
    ("container", "units", "cores"),
    [
        pytest.param({SLICED: "1", MEM_PCT: "20"}, "320k", "100", id="memory-percentage-20-cores-defaulted"),
        pytest.param({SLICED: "1", MEM_PCT: "20", CORES: "50"}, "320k", "50", id="explicit-cores-kept"),
        pytest.param({SLICED: "1", MEM_PCT: "20", UNITS: "999"}, "320k", "100", id="forged-units-recomputed"),
        pytest.param({SLICED: "1", MEM_MIB: "4096"}, "160k", "100", id="memory-mib-on-40960Mi-card"),
        pytest.param({SLICED: "1", MEM_PCT: "60"}, "960k", "100", id="memory-percentage-60"),
    ],
)
async def test_sliced_container_is_folded_into_units(
    container: dict[str, str], units: str, cores: str
) -> None:
    (admitted,) = await admit([container])
    assert admitted[UNITS] == units
    assert admitted[CORES] == cores


@pytest.mark.parametrize(
    ("container", "card_mib", "message"),
    [
        pytest.param({SLICED: "1", MEM_PCT: "200"}, CARD_MIB, "over 100", id="memory-percentage-200"),
        pytest.param({SLICED: "1", MEM_MIB: "81920"}, CARD_MIB, "exceeds", id="memory-mib-larger-than-card"),
        pytest.param(
            {SLICED: "1", MEM_MIB: "4096"}, None, "gives no card memory", id="memory-mib-without-card-vram"
        ),
    ],
)
async def test_unfoldable_memory_is_an_error(
    container: dict[str, str], card_mib: int | None, message: str
) -> None:
    with pytest.raises(SliceUnitsError, match=message):
        await admit([container], card_mib)


@pytest.mark.parametrize(
    ("containers", "message"),
    [
        pytest.param([{SLICED: "1"}], "exactly one of", id="only-sliced-no-memory"),
        pytest.param(
            [{UNITS: "320000", MEM_PCT: "20"}], f"{SLICED} must be requested", id="units-without-sliced"
        ),
        pytest.param(
            [{SLICED: "1", MEM_PCT: "20", MEM_MIB: "4096"}], "exactly one of", id="both-memory-keys"
        ),
        pytest.param(
            [{SLICED: "1", MEM_PCT: "0"}], "memory-percentage must be in", id="memory-percentage-zero"
        ),
        pytest.param([{SLICED: "1", MEM_MIB: "-1"}], "memory-mib must be positive", id="memory-mib-negative"),
        pytest.param([{SLICED: "1", MEM_PCT: "20", CORES: "0"}], "cores-percentage", id="cores-zero"),
        pytest.param([{SLICED: "1", MEM_PCT: "20", CORES: "101"}], "cores-percentage", id="cores-over-100"),
        pytest.param([{GPU: "1", SLICED: "1", MEM_PCT: "20"}], "only one of", id="exclusive-and-sliced"),
        pytest.param(
            [{f"{GPU}.shared": "1"}, {SLICED: "1", MEM_PCT: "20"}], "only one of", id="shared-and-sliced"
        ),
        pytest.param([{GPU: "1"}, {f"{GPU}.shared": "1"}], "only one of", id="exclusive-and-shared"),
        pytest.param(
            [{"huawei.com/npu.sliced": "2", "huawei.com/npu.sliced.memory-percentage": "20"}],
            r"huawei.com/npu.sliced must be 1, not 2: only nvidia cards serve more than one slice",
            id="two-slices-of-an-ascend-card",
        ),
        pytest.param(
            [{"mthreads.com/gpu.sliced": "4", "mthreads.com/gpu.sliced.memory-percentage": "10"}],
            r"\(mthreads gives it one slice per card\)",
            id="four-slices-of-an-mthreads-card",
        ),
    ],
)
async def test_invalid_pods_are_rejected(containers: list[dict[str, str]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await admit(containers)


async def test_an_nvidia_container_may_hold_several_slices() -> None:
    (admitted,) = await admit([{SLICED: "2", MEM_PCT: "20"}])
    assert admitted[UNITS] == "320k"
    (one,) = await admit([{"huawei.com/npu.sliced": "1", "huawei.com/npu.sliced.memory-percentage": "20"}])
    assert one["huawei.com/npu.sliced.units"] == "320k"


def test_the_one_slice_rule_follows_a_renamed_resource() -> None:
    renamed = {"GPUSTACK_NVIDIA_ACCELERATABLE_RESOURCE_NAME": "example.com/gpu"}
    two = {"example.com/gpu.sliced": Quantity(2), "example.com/gpu.sliced.memory-percentage": Quantity(20)}
    assert sliced_problems(two, "example.com/gpu", renamed) == []
    assert sliced_bases(two, renamed) == ["example.com/gpu"]


async def test_sliced_main_with_resource_free_sidecar_is_admitted() -> None:
    main, sshd = await admit([{SLICED: "1", MEM_PCT: "20"}, {}])
    assert main[UNITS] == "320k"
    assert sshd == {}


def test_visibility_resource_is_not_a_card_mode() -> None:
    pods = [[SLICED, MEM_PCT], ["device.gpustack.ai/nvidia.visibility"]]
    assert pod_card_modes(pods, environ={}) == {Mode.SLICED}
    assert mixed_modes_problem(pods, environ={}) is None


def test_card_memory_is_needed_only_for_memory_mib() -> None:
    assert needs_card_memory({MEM_MIB: Quantity(4096)}, GPU)
    assert not needs_card_memory({MEM_PCT: Quantity(20), MEM_MIB: Quantity(4096)}, GPU)
    assert not needs_card_memory({MEM_PCT: Quantity(20)}, GPU)


def test_sliced_bases_lists_each_base_once() -> None:
    names = [SLICED, MEM_PCT, "huawei.com/npu.sliced", "cpu", GPU]
    assert sliced_bases(names, environ={}) == ["huawei.com/npu", GPU]


@pytest.mark.parametrize(
    ("containers", "repeats"),
    [
        pytest.param([[GPU], [GPU]], [(1, 0, GPU)], id="two-containers-with-whole-cards"),
        pytest.param([[SLICED, MEM_PCT], [SLICED, MEM_PCT]], [(1, 0, SLICED)], id="two-slices"),
        pytest.param([[f"{GPU}.shared"], [f"{GPU}.shared"], []], [(1, 0, f"{GPU}.shared")], id="two-shares"),
        pytest.param([[GPU], ["device.gpustack.ai/nvidia.visibility"]], [], id="main-and-ssh-sidecar"),
        pytest.param(
            [[GPU], ["cpu"], [GPU, "memory"]], [(2, 0, GPU)], id="third-container-repeats-the-first"
        ),
        pytest.param([[GPU], ["amd.com/gpu"]], [], id="two-vendors"),
    ],
)
def test_only_one_container_of_a_pod_may_ask_for_cards_of_a_mode(
    containers: list[list[str]], repeats: list[tuple[int, int, str]]
) -> None:
    assert repeated_card_requests(containers, environ={}) == repeats
