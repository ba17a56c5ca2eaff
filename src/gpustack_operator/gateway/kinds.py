"""The `worker.gpustack.ai/v1` kinds the gateway follows (contract §9) and the route each is served at.

Which of them a cluster serves, and whether each is namespaced, comes from that cluster's discovery
(`/apis/worker.gpustack.ai/v1`): a worker that does not serve a companion kind yet is simply not
followed for it, and a newer worker's kinds appear once it serves them.
"""

from __future__ import annotations

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.resources import Resource

__all__ = ["APISERVICE", "GROUP_VERSION", "KINDS", "PLURALS", "resource_from_discovery"]

GROUP, VERSION = "worker.gpustack.ai", "v1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
APISERVICE = f"{VERSION}.{GROUP}"
"""The APIService that must be Available before a cluster's informers start."""

KINDS: dict[str, str] = {
    "InstanceType": "instancetypes",
    "Instance": "instances",
    "InstancePersistentVolumeType": "instancepersistentvolumetypes",
    "InstancePersistentVolume": "instancepersistentvolumes",
    "InstanceImagePullSecret": "instanceimagepullsecrets",
    "InstanceSSHPublicKey": "instancesshpublickeys",
}
"""Kind -> plural, which is also its route: `GET /<plural>`."""
PLURALS: dict[str, str] = {plural: kind for kind, plural in KINDS.items()}


def resource_from_discovery(entry: JSONObj) -> Resource | None:
    """The Resource of one APIResourceList entry, when it is one of KINDS (not a subresource)."""
    name, kind = str(entry.get("name") or ""), str(entry.get("kind") or "")
    if "/" in name or KINDS.get(kind) != name:
        return None
    return Resource(GROUP, VERSION, name, kind, namespaced=bool(entry.get("namespaced")))


def gvk(kind: str) -> str:
    """`worker.gpustack.ai/v1/<Kind>`, as the `gvk` subscription filter names a kind."""
    return f"{GROUP_VERSION}/{kind}"
