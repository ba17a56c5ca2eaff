"""The Pod hooks on reviews kube-apiserver could send: folds land in the right container, refusals are 422s.

The VRAM lookup is served from a synced store here (the worker's informer cache); the API fallback and the
whole path through kube-apiserver are exercised in tests/integration/test_worker_webhooks.py.
"""

from __future__ import annotations

from typing import Any

from gpustack_operator.api.keys import QUEUE_ENTRANCE_LABEL
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.pod import PodHooks
from gpustack_operator.apiserver.webhooks.review import Review
from tests.unit.apiserver.webhooks.patched import patched
from tests.unit.apiserver.webhooks.synced import Synced

SLICED = {"nvidia.com/gpu.sliced": "1", "nvidia.com/gpu.sliced.memory-mib": "4096"}


def hooks() -> PodHooks:
    card = {
        "metadata": {"name": "a100", "labels": {QUEUE_ENTRANCE_LABEL: "q"}},
        "spec": {"memory": "40960Mi"},
    }
    return PodHooks(Lookups(None, "gpustack-system", instance_types=Synced(card)))  # type: ignore[arg-type]


def review(containers: list[Any]) -> Review:
    pod = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"containers": containers}}
    return Review("u", "CREATE", "", "v1", "Pod", "p", "ns", pod, None)


async def test_the_fold_lands_in_the_container_that_asked_even_after_a_malformed_entry() -> None:
    asked = review([None, {"name": "main", "resources": {"limits": SLICED}}])
    verdict = await hooks().mutate(asked)
    assert verdict.allowed
    stored = patched(asked, verdict)
    main = stored["spec"]["containers"][1]
    assert main["resources"]["limits"]["nvidia.com/gpu.sliced.units"] == "160k"
    assert main["resources"]["requests"]["nvidia.com/gpu.sliced.units"] == "160k"
    assert stored["spec"]["containers"][0] is None


async def test_a_quantity_that_does_not_parse_is_a_422_naming_it() -> None:
    limits = {"nvidia.com/gpu.sliced": "one"}
    verdict = await hooks().mutate(review([{"name": "main", "resources": {"limits": limits}}]))
    assert not verdict.allowed
    assert verdict.status is not None
    assert verdict.status.code == 422
    assert "spec.containers[0].resources.limits[nvidia.com/gpu.sliced]" in verdict.status.message


async def test_two_containers_with_cards_are_refused_at_the_second() -> None:
    whole = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}
    verdict = await hooks().validate(review([{"name": "a", **whole}, "junk", {"name": "b", **whole}]))
    assert verdict.status is not None
    causes = verdict.status.details["causes"] if verdict.status.details else []
    assert [c["field"] for c in causes] == ["spec.containers[2].resources"]
    assert "already requested by spec.containers[0]" in causes[0]["message"]


async def test_the_fold_refuses_what_the_validating_hook_would_since_only_it_sees_sliced_pods() -> None:
    mixed = await hooks().mutate(
        review(
            [
                {"name": "a", "resources": {"limits": SLICED}},
                {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
            ]
        )
    )
    assert mixed.status is not None
    assert mixed.status.code == 422
    assert "may use only one of exclusive, shared and sliced" in mixed.status.message
    twice = await hooks().mutate(
        review(
            [{"name": "a", "resources": {"limits": SLICED}}, {"name": "b", "resources": {"limits": SLICED}}]
        )
    )
    assert twice.status is not None
    assert "already requested by spec.containers[0]" in twice.status.message
