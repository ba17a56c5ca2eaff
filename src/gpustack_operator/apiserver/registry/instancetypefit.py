"""`instancetypes/fit`: would this request be admitted into the InstanceType's pool right now, and where.

Why this module exists: a user about to submit work (or a tool choosing between pools) wants the chain's
own answer without submitting: fits or not, on which nodes and cards, and if not, why and what the pool
could take instead. Like a SubjectAccessReview or `pods/eviction` it is a `create` on a subresource: the
caller POSTs an `InstanceTypeFit` whose spec is the request (`pods` Pods, each asking what an Instance's
`spec.resources` asks, or a container's `limits` as a Job's Pod names them) and gets it back with the
status filled. Nothing is written and nothing is promised.

Here the request becomes the Pod the chain would see: an Instance's resources as the instance controller
renders them (rules.instance.resources), then the Pod webhook's fold of a slice's memory into units
(rules.slicing.pods, with the type's per-card VRAM for `memory-mib`). The answer comes from the admission
check running in this process (`Backends.fit`, controllers.node_devices_admission_fit): Kueue's flavor
and quota, then the check's placement on that flavor's cards less its promises (rules.admission.whatif).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web

from gpustack_operator.api import field
from gpustack_operator.api.field import FieldError
from gpustack_operator.api.json import JSONObj, as_mapping
from gpustack_operator.api.keys import V1, WORKER_GROUP
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.apiserver.discovery import Reader
from gpustack_operator.apiserver.registry.generic.cachedreads import Informed
from gpustack_operator.apiserver.served import Fitter
from gpustack_operator.apiserver.status import StatusError, bad_request, invalid, not_found
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.rules.capacity.credits import quantity_to_mib
from gpustack_operator.rules.cards import SliceUnitsError
from gpustack_operator.rules.instance.input import RenderError
from gpustack_operator.rules.instance.resources import accelerator, type_manufacturer
from gpustack_operator.rules.slicing.pods import (
    needs_card_memory,
    sliced_bases,
    sliced_defaults,
    sliced_problems,
)

__all__ = ["FIT", "KIND", "MAX_PODS", "InstanceTypeFit", "pod_template"]

KIND: Final = "InstanceTypeFit"
MAX_PODS: Final = 10_000
_STRING = {"type": "string"}
_INT = {"type": "integer"}
_QUANTITIES = {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}
FIT = Reader(
    "fit",
    "Would a request be admitted into the pool now: on which nodes and cards, or why not (writes nothing).",
    {
        "type": "object",
        "description": f"{KIND}: POST it with a spec; it comes back with the answer in its status.",
        "properties": {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "pods": {**_INT, "description": "Pods of the podSet, each asking the same (default 1)."},
                    "resources": {
                        **_QUANTITIES,
                        "description": "What one Pod asks, as an Instance's spec.resources: accelerator, "
                        "acceleratorSlicedMemoryPercentage, acceleratorSlicedCoresPercentage.",
                    },
                    "limits": {
                        **_QUANTITIES,
                        "description": "Or what one Pod's container asks, as a Job's container names it: "
                        "nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/gpu.sliced with "
                        ".sliced.memory-percentage or .sliced.memory-mib, ...",
                    },
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "fits": {"type": "boolean"},
                    "reason": {
                        **_STRING,
                        "description": "Fits, NoQueue, Inactive, NoQuota, NoRoom or NoCards.",
                    },
                    "message": _STRING,
                    "flavor": {**_STRING, "description": "The ResourceFlavor Kueue would assign."},
                    "nodes": {
                        "type": "array",
                        "description": "Where the Pods would go: each node, its Pods, the cards they take.",
                        "items": {"type": "object"},
                    },
                    "unplacedPod": {**_INT, "description": "The first Pod (1-based) that fits on no node."},
                    "largestFreeRequest": {
                        "type": "object",
                        "description": "The most one Pod could take of the flavor now, per view.",
                    },
                },
            },
        },
    },
    verb="create",
    kind=KIND,
)


def _refused(name: str, errors: list[FieldError]) -> StatusError:
    return invalid(KIND, WORKER_GROUP, name, errors)


def _limits(spec: Mapping[str, Any], instance_type: Mapping[str, Any]) -> dict[str, str]:
    """One container's limits for the spec: the Instance's rendering of `resources`, or `limits` as given."""
    resources, limits = spec.get("resources"), spec.get("limits")
    if (resources is None) == (limits is None):
        raise RenderError("spec: exactly one of resources and limits is required")
    if limits is not None:
        if not isinstance(limits, Mapping):
            raise RenderError("spec.limits: want a map of resource name to quantity")
        type_manufacturer(as_mapping(instance_type.get("spec")))  # a CPU type: no card to fit
        return {str(k): str(v) for k, v in limits.items()}
    if not isinstance(resources, Mapping):
        raise RenderError("spec.resources: want a map, as an Instance's spec.resources")
    cards = accelerator(resources, instance_type)
    if cards is None:
        raise RenderError("spec.resources: asks for no accelerator")
    return cards.resources()


def pod_template(spec: Mapping[str, Any], instance_type: Mapping[str, Any]) -> JSONObj:
    """The Pod template the chain would see for one Pod of `spec` (the webhook's slice fold applied);
    raises RenderError, SliceUnitsError or InvalidQuantityError saying what is wrong."""
    limits = _limits(spec, instance_type)
    parsed = {name: Quantity.parse(value) for name, value in limits.items()}
    for base in sliced_bases(parsed):
        problems = sliced_problems(parsed, base)
        if problems:
            raise RenderError("spec: " + "; ".join(problems))
        memory = (as_mapping(instance_type.get("spec"))).get("memory")
        card = (
            quantity_to_mib(Quantity.parse(str(memory)))
            if memory and needs_card_memory(parsed, base)
            else None
        )
        parsed.update(sliced_defaults(parsed, base, card))
    rendered = {name: str(q) for name, q in parsed.items()}
    return {
        "spec": {"containers": [{"name": "main", "resources": {"limits": rendered, "requests": rendered}}]}
    }


class InstanceTypeFit:
    """The `fit` handler (see the module docstring)."""

    def __init__(self, client: Client, cache: Informed | None, fitter: Fitter | None) -> None:
        self.client, self.cache, self.fitter = client, cache, fitter

    async def _instance_type(self, name: str) -> JSONObj:
        if self.cache is not None and self.cache.has_synced():
            found = self.cache.store.get(name)
            if found is not None:
                return found
        obj = await self.client.get_or_none(INSTANCE_TYPES, name)
        if obj is None:
            raise not_found("instancetypes", WORKER_GROUP, name)
        return obj

    async def post(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError as e:
            raise bad_request(f"the body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise bad_request(f"the body must be an {KIND} object")
        spec = as_mapping(body.get("spec"))
        pods = spec.get("pods", 1)
        if type(pods) is not int or not 1 <= pods <= MAX_PODS:
            raise _refused(
                name, [field.invalid("spec.pods", pods, f"want a whole number in [1, {MAX_PODS}]")]
            )
        instance_type = await self._instance_type(name)
        try:
            template = pod_template(spec, instance_type)
            manufacturer = type_manufacturer(as_mapping(instance_type.get("spec")))
        except (RenderError, SliceUnitsError, InvalidQuantityError) as e:
            raise _refused(name, [field.invalid("spec", "", str(e))]) from None
        if self.fitter is None:
            raise StatusError(503, "ServiceUnavailable", "the admission check does not run in this process")
        try:
            status = self.fitter.fit(name, manufacturer, template, pods)
        except ValueError as e:
            raise _refused(name, [field.invalid("spec", "", str(e))]) from None
        answer = {
            "apiVersion": f"{WORKER_GROUP}/{V1}",
            "kind": KIND,
            "metadata": {"name": name},
            "spec": dict(spec),
            "status": status,
        }
        return web.json_response(answer)
