"""The what-if of the per-card check under the real manager: the answer the check itself would give.

The same scripted pool as the check's own tests (two nodes of 8 H100s) and a ClusterQueue as the chain
writes it; each question is asked of the running check reconciler (AdmissionFit), and where it matters the
same request is then passed as a Workload to the check, which must decide the same way.
"""

from __future__ import annotations

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import node_devices_admission_check
from gpustack_operator.controllers.node_devices_admission_fit import AdmissionFit
from gpustack_operator.kube.resources import CLUSTER_QUEUES, WORKLOADS
from gpustack_operator.rules.admission.whatif import NothingAskedError

from .chain_world import World, world
from .test_node_devices_admission_check import FLAVOR, free, pool, state, workload

QUEUE, D = "gpustack--nvidia-h100-linux-amd64", 1_600_000


def queue(nominal: int, reserved: int = 0, stop: str = "None") -> JSONObj:
    flavor = {
        "name": FLAVOR,
        "resources": [{"name": "credits.gpustack.ai/nvidia", "nominalQuota": str(nominal)}],
    }
    usage = [{"name": FLAVOR, "resources": [{"name": "credits.gpustack.ai/nvidia", "total": str(reserved)}]}]
    return {
        "metadata": {"name": QUEUE},
        "spec": {
            "stopPolicy": stop,
            "resourceGroups": [{"coveredResources": ["credits.gpustack.ai/nvidia"], "flavors": [flavor]}],
        },
        "status": {"flavorsReservation": usage},
    }


def template(limits: dict[str, str]) -> JSONObj:
    return {"spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}}


def fit_of(w: World) -> AdmissionFit:
    assert w.manager is not None
    found = AdmissionFit.of(w.manager.controllers)
    assert found is not None
    return found


def cards(node: JSONObj) -> list[tuple[str, int]]:
    return [(c["id"], c["units"]) for c in node["cards"]]


async def test_a_fitting_request_names_the_node_it_leaves_tightest_and_its_cards() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(3, held=5), free(5, held=3))
        w.put(CLUSTER_QUEUES, queue(16 * D))
        status = fit_of(w).fit(QUEUE, "nvidia", template({"nvidia.com/gpu": "3"}), 1)
        assert status["fits"] is True
        assert status["reason"] == "Fits"
        assert status["flavor"] == FLAVOR
        [node] = status["nodes"]
        assert node["name"] == "node-a"
        assert node["pods"] == 1
        assert cards(node) == [(f"node-a-gpu{n}", D) for n in range(3)]
        assert status["largestFreeRequest"]["accelerator"] == "5"
        assert w.client.of("apply/status", "Workload") == []  # nothing written


async def test_a_refusal_names_the_pod_that_fits_nowhere_and_the_largest_request() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(3, held=5), free(2, held=6))
        w.put(CLUSTER_QUEUES, queue(16 * D))
        status = fit_of(w).fit(QUEUE, "nvidia", template({"nvidia.com/gpu": "2"}), 3)
        assert status["fits"] is False
        assert status["reason"] == "NoRoom"
        assert status["unplacedPod"] == 3
        assert status["largestFreeRequest"] == {
            "accelerator": "3",
            "acceleratorShared": "30",
            "acceleratorSlicedPercentage": "0",  # these cards advertise no slices
        }


async def test_cards_promised_a_moment_ago_are_not_offered_and_the_book_is_left_as_it_was() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(4, held=4), free(0, held=8))
        w.put(CLUSTER_QUEUES, queue(16 * D))
        fit = fit_of(w)
        assert fit.fit(QUEUE, "nvidia", template({"nvidia.com/gpu": "4"}), 1)["fits"] is True
        w.put(WORKLOADS, workload("one", 3))
        await w.settle(lambda: state(w, "one") == "Ready")
        book = dict(fit.check.promises.promised())
        status = fit.fit(QUEUE, "nvidia", template({"nvidia.com/gpu": "2"}), 1)
        assert status["reason"] == "NoRoom"
        assert status["largestFreeRequest"]["accelerator"] == "1"
        assert fit.check.promises.promised() == book
        w.put(WORKLOADS, workload("two", 2))  # the check agrees
        await w.settle(lambda: state(w, "two") == "Retry")


@pytest.mark.parametrize(
    ("cluster_queue", "reason"),
    [
        pytest.param(None, "NoQueue", id="no ClusterQueue yet"),
        pytest.param(queue(16 * D, stop="Hold"), "Inactive", id="queue on hold"),
        pytest.param(queue(16 * D, reserved=15 * D), "NoQuota", id="quota reserved by others"),
    ],
)
async def test_kueue_would_not_get_to_the_check(cluster_queue: JSONObj | None, reason: str) -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(8), free(8))
        if cluster_queue is not None:
            w.put(CLUSTER_QUEUES, cluster_queue)
        status = fit_of(w).fit(QUEUE, "nvidia", template({"nvidia.com/gpu": "2"}), 1)
        assert (status["fits"], status["reason"]) == (False, reason)
        assert status["message"]


async def test_shares_are_placed_in_units_one_per_card() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(8), free(0, held=8))
        w.put(CLUSTER_QUEUES, queue(16 * D))
        shares = fit_of(w).fit(QUEUE, "nvidia", template({"nvidia.com/gpu.shared": "2"}), 1)
        assert [u for _, u in cards(shares["nodes"][0])] == [D // 10, D // 10]


async def test_a_request_for_no_card_is_refused() -> None:
    async with world(node_devices_admission_check.controller) as w:
        with pytest.raises(NothingAskedError):
            fit_of(w).fit(QUEUE, "nvidia", template({"cpu": "1"}), 1)


async def test_the_largest_request_follows_the_ledger_from_one_answer_to_the_next() -> None:
    """Each node's part of largestFreeRequest is kept between answers only while its cards are the same."""
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(6, held=2), free(2, held=6))
        w.put(CLUSTER_QUEUES, queue(16 * D))
        fit = fit_of(w)
        ask = template({"nvidia.com/gpu": "1"})
        assert fit.fit(QUEUE, "nvidia", ask, 1)["largestFreeRequest"]["accelerator"] == "6"
        assert fit.fit(QUEUE, "nvidia", ask, 1)["largestFreeRequest"]["accelerator"] == "6"
        await pool(w, free(1, held=7), free(4, held=4))
        assert fit.fit(QUEUE, "nvidia", ask, 1)["largestFreeRequest"]["accelerator"] == "4"
