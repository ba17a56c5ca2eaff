"""The Instance and the Pod behind its `log`, `events` and `metrics` subresources (contract §2.1).

Why this module exists: the three subresources read the Instance first (the CRD's own 404 when there is
none) and then, for the log and the metrics, the Pod it runs as. The Pod is named like the Instance; only
one the Instance controls counts (a Pod of that name left from an earlier Instance is not its Pod). An
Instance without a Pod (stopped, waiting for Kueue, being created) is refused with a 409 that says why, in
the Instance's own words (`status.phase` and `status.phaseMessage`), rather than a bare "pods not found".
"""

from __future__ import annotations

from aiohttp import web

from gpustack_operator.api.json import JSONObj, as_mapping, as_str, controlled_by
from gpustack_operator.api.keys import PLURAL_INSTANCES, WORKER_GROUP
from gpustack_operator.apiserver.status import StatusError
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCES, PODS

__all__ = ["InstanceAndPod", "instance_of", "no_pod", "pod_of", "target"]


def target(request: web.Request) -> tuple[str, str]:
    """(namespace, name) of the Instance the request's path names."""
    return request.match_info["namespace"], request.match_info["name"]


async def instance_of(client: Client, namespace: str, name: str) -> JSONObj:
    """The stored Instance; its CRD's 404 (`instances.worker.gpustack.ai "x" not found`) when absent."""
    return await client.request("GET", INSTANCES.path(name, namespace), retries=0)


def no_pod(instance: JSONObj) -> StatusError:
    """409: the Instance has no Pod now, and what its status says about why."""
    meta, status = as_mapping(instance.get("metadata")), as_mapping(instance.get("status"))
    name = as_str(meta.get("name"))
    phase = as_str(status.get("phase")) or "not yet reconciled"
    why = as_str(status.get("phaseMessage"))
    message = f'Instance "{name}" has no Pod: it is {phase}' + (f" ({why})" if why else "")
    details = {"name": name, "group": WORKER_GROUP, "kind": PLURAL_INSTANCES}
    return StatusError(409, "Conflict", message, details)


async def pod_of(client: Client, instance: JSONObj) -> JSONObj:
    """The Pod the Instance controls now; `no_pod` when there is none."""
    meta = as_mapping(instance.get("metadata"))
    pod = await client.get_or_none(PODS, as_str(meta.get("name")), as_str(meta.get("namespace")))
    if pod is None or not controlled_by(pod, instance):
        raise no_pod(instance)
    return pod


class InstanceAndPod:
    """Reads an Instance and its Pod with the worker's client (the user was authorized on the
    subresource by a SubjectAccessReview before the handler runs)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def both(self, request: web.Request) -> tuple[JSONObj, JSONObj]:
        namespace, name = target(request)
        instance = await instance_of(self.client, namespace, name)
        return instance, await pod_of(self.client, instance)
