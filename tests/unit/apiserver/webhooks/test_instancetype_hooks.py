"""The InstanceType defaulting hook's reads: the pool's flavors from the synced cache or, when it has none
yet, one API list; filled on CREATE only; an UPDATE keeps the stored details and reads no flavor.

The whole path through kube-apiserver, on the sandbox's derived pools, is
tests/integration/test_worker_derived_types.py.
"""

from __future__ import annotations

from typing import Any

from gpustack_operator.apiserver.webhooks.kinds import InstanceTypeHooks
from gpustack_operator.apiserver.webhooks.lookup import Lookups
from gpustack_operator.apiserver.webhooks.review import Review
from gpustack_operator.kube import errors
from gpustack_operator.kube.resources import DEVICES, RESOURCE_FLAVORS, Resource
from tests.unit.apiserver.webhooks.synced import Synced

A10 = "nvidia-a10"
SELECTOR = (
    f"acceleratable.feature.gpustack.ai/{A10}=true,"
    "feature.gpustack.ai/acceleratable=true,"
    "kubernetes.io/arch=amd64,kubernetes.io/os=linux,"
    "resource.gpustack.ai/type=nodes"
)


A10_FLAVOR = "gpustack--intel-6-106--nvidia-a10-linux-amd64-4d"


def a10_flavor(name: str = A10_FLAVOR, memory: str = "23028Mi") -> Any:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "feature.gpustack.ai/acceleratable": "true",
                f"acceleratable.feature.gpustack.ai/{A10}": "true",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "resource.gpustack.ai/type": "nodes",
            },
            "annotations": {
                "note.gpustack.ai/acceleratable": "true",
                "note.gpustack.ai/manufacturer": "nvidia",
                "note.gpustack.ai/product": "NVIDIA-A10",
                "note.gpustack.ai/memory": memory,
            },
        }
    }


def a10_type(**spec: Any) -> dict[str, Any]:
    base = {"acceleratable": True, "acceleratorGroup": A10, "os": "linux", "arch": "amd64"}
    return {"metadata": {"name": "gpustack--nvidia-a10-linux-amd64"}, "spec": base | spec}


class Api:
    """The client's `list`, recording the label selectors asked (raises `error` when given)."""

    def __init__(self, *objs: dict[str, Any], error: Exception | None = None) -> None:
        self.objs = list(objs)
        self.error = error
        self.asked: list[str] = []
        self.devices: list[Any] = []
        self.devices_asked: list[str] = []

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> None:
        return None  # no settings Secret: every setting its default (awareness off)

    async def list(self, res: Resource, namespace: str | None = None, **selectors: Any) -> list[Any]:
        if res == DEVICES:
            self.devices_asked.append(selectors["label_selector"])
            return self.devices
        assert res == RESOURCE_FLAVORS
        self.asked.append(selectors["label_selector"])
        if self.error is not None:
            raise self.error
        return self.objs


def hooks(api: Api, *cached: dict[str, Any]) -> InstanceTypeHooks:
    return InstanceTypeHooks(Lookups(api, "gpustack-system", resource_flavors=Synced(*cached)))  # type: ignore[arg-type]


def review(operation: str, obj: Any, old: Any = None) -> Review:
    return Review("u", operation, "worker.gpustack.ai", "v1alpha1", "InstanceType", "n", "", obj, old)


async def test_create_fills_from_the_cached_flavors_without_an_api_read() -> None:
    api = Api()
    other = {"metadata": {"name": "another-pool", "labels": {"resource.gpustack.ai/type": "nodes"}}}
    verdict = await hooks(api, a10_flavor(), other).mutate(review("CREATE", a10_type()))
    assert verdict.mutated is not None
    spec = verdict.mutated["spec"]
    assert (spec["memory"], spec["product"], spec["manufacturer"]) == ("23028Mi", "NVIDIA-A10", "nvidia")
    assert spec["generalGroup"] == "generic"  # §4.1's own defaulting ran first
    assert api.asked == []


async def test_create_reads_the_api_when_the_cache_has_no_flavor_of_the_pool_yet() -> None:
    api = Api(a10_flavor(memory="24Gi"))
    verdict = await hooks(api).mutate(review("CREATE", a10_type()))
    assert verdict.mutated is not None
    assert verdict.mutated["spec"]["memory"] == "24Gi"
    assert api.asked == [SELECTOR]


async def test_without_kueues_crd_nothing_is_filled_and_the_type_is_allowed() -> None:
    api = Api(error=errors.NotFound(404, "NotFound", "the server could not find the requested resource"))
    verdict = await hooks(api).mutate(review("CREATE", a10_type()))
    assert verdict.allowed
    assert verdict.mutated is not None
    assert "memory" not in verdict.mutated["spec"]


async def test_an_update_keeps_the_stored_details_and_reads_no_flavor() -> None:
    api = Api(a10_flavor(memory="1Mi"))
    stored = a10_type(memory="23028Mi", product="NVIDIA-A10")
    verdict = await hooks(api).mutate(review("UPDATE", a10_type(displayName="renamed"), stored))
    assert verdict.mutated is not None
    spec = verdict.mutated["spec"]
    assert (spec["memory"], spec["product"], spec["displayName"]) == ("23028Mi", "NVIDIA-A10", "renamed")
    assert api.asked == []


async def test_create_takes_the_cards_exact_memory_from_the_devices_of_its_model() -> None:
    api = Api(a10_flavor(memory="22Gi"))
    api.devices = [{"spec": {"groups": [{"manufacturer": "nvidia", "id": "a10", "memory": 23028}]}}]
    verdict = await hooks(api).mutate(review("CREATE", a10_type()))
    assert verdict.mutated is not None
    assert verdict.mutated["spec"]["memory"] == "23028Mi"
    assert api.devices_asked == [
        f"acceleratable.feature.gpustack.ai/{A10}=true,kubernetes.io/arch=amd64,kubernetes.io/os=linux"
    ]
