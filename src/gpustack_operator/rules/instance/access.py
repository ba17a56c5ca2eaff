"""Where the operator's own images come from, and where a user reaches an Instance (contract §6, §2.6).

Why this module exists: two groups of editable settings shape what the Instance reconciler writes, and
both are rules a user can check by hand, so they live here, pure.

- ``container-registry`` / ``container-namespace`` re-point every built-in image (the SSH sidecar's
  ``instance-ssh-server-image``; never the user's own ``spec.image``), as the original operator does: the
  namespace replaces what precedes the image's first ``/`` (an image without one keeps its name), then
  the registry is put in front. ``gpustack/ssh-server:v1.3.0`` with namespace ``mirror`` and registry
  ``registry.local:5000`` becomes ``registry.local:5000/mirror/ssh-server:v1.3.0``.
  ``image-pull-secrets`` (comma-separated Secret names) are added to the Pod's ``imagePullSecrets`` and
  ``image-pull-policy`` is the built-in containers' pull policy.
- ``instance-access-static-address`` / ``instance-access-wildcard-dns`` decide the Instance's
  ``status.accessAddresses``: the static address when set; else the node's address (its ExternalIP,
  else its InternalIP, else the Pod's host IP), written ``<ip with . and : as ->.<wildcard-dns>`` when a
  wildcard DNS is set (``10.0.0.3`` with ``traefik.me`` reads ``10-0-0-3.traefik.me``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpustack_operator.api.json import as_list, as_mapping, as_str

__all__ = ["access_addresses", "builtin_image", "node_address", "pull_secret_names"]


def builtin_image(image: str, *, registry: str, namespace: str) -> str:
    """A built-in image as the ``container-registry`` and ``container-namespace`` settings place it."""
    if namespace:
        _, slash, rest = image.partition("/")
        if slash:
            image = f"{namespace}/{rest}"
    if registry:
        image = f"{registry}/{image}"
    return image


def pull_secret_names(value: str) -> tuple[str, ...]:
    """The Secret names of the ``image-pull-secrets`` setting (comma-separated; blanks dropped)."""
    return tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))


def node_address(node: Mapping[str, Any] | None) -> str:
    """The address a node is reached at: its first ExternalIP, else its first InternalIP ("" if none)."""
    addresses = [
        as_mapping(entry) for entry in as_list(as_mapping(as_mapping(node).get("status")).get("addresses"))
    ]
    for kind in ("ExternalIP", "InternalIP"):
        for entry in addresses:
            if entry.get("type") == kind and (address := as_str(entry.get("address"))):
                return address
    return ""


def access_addresses(host_addresses: Iterable[str], *, static_address: str, wildcard_dns: str) -> list[str]:
    """``status.accessAddresses`` of an Instance whose Pod runs on a host reached at ``host_addresses``
    (the first one counts; none: the Pod has no node yet, and only a static address is known)."""
    if static_address:
        return [static_address]
    host = next((address for address in host_addresses if address), "")
    if not host:
        return []
    if wildcard_dns:
        return [f"{host.replace('.', '-').replace(':', '-')}.{wildcard_dns}"]
    return [host]
