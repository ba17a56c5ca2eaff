"""The APIService objects that make kube-apiserver route our group versions to us (contract §3).

`v1.worker.gpustack.ai` gets groupPriorityMinimum 100 and versionPriority 100, so v1 outranks the CRD's
v1alpha1 (15) and kubectl's `instancetypes` resolves to our v1. The caBundle is the CA that signed our
serving certificate; without one the APIService says insecureSkipTLSVerify, as the Go original does.
Only group versions we serve are registered: an APIService whose discovery fails marks its group stale in
every kubectl call. `v1.gpustack.ai` (Settings) gets the same priorities in its own group.

Outside a cluster (the sandbox, `make run`), the routing Service is an ExternalName Service pointing at
`localhost`: kube-apiserver then dials the worker on 127.0.0.1 at the APIService's port.
"""

from __future__ import annotations

import base64

from gpustack_operator.api.json import JSONObj

__all__ = ["GROUP_PRIORITY_MINIMUM", "VERSION_PRIORITY", "apiservice", "external_name_service"]

GROUP_PRIORITY_MINIMUM = 100
VERSION_PRIORITY = 100


def apiservice(
    group: str, version: str, namespace: str, service: str, port: int, ca_pem: bytes | None
) -> JSONObj:
    """The APIService `<version>.<group>` for the Service `namespace/service` on `port`."""
    spec: JSONObj = {
        "group": group,
        "version": version,
        "service": {"namespace": namespace, "name": service, "port": port},
        "groupPriorityMinimum": GROUP_PRIORITY_MINIMUM,
        "versionPriority": VERSION_PRIORITY,
    }
    if ca_pem:
        spec["caBundle"] = base64.b64encode(ca_pem).decode()
    else:
        spec["insecureSkipTLSVerify"] = True
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": spec,
    }


def external_name_service(namespace: str, name: str) -> JSONObj:
    """The routing Service outside a cluster: `<name>.<namespace>.svc` resolves to localhost."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    }
