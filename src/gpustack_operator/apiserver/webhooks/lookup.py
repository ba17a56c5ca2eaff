"""What the webhooks read besides the object under review: InstanceTypes, ResourceFlavors, Devices and
settings.

Why this module exists: a webhook answers inside kube-apiserver's 10 s budget on every Pod, Instance and
InstanceType write, so it reads from the worker's informer caches (the same informers the controllers
use, shared through the InformerFactory), not from the API server. The informers start with the manager,
which runs only after Prepare, and a cache can lag a write by a moment, so a cache that has not synced or
has no match falls back to one API read, and only that read can fail (a `KubeError` the handler turns into
a refusal). Settings that do not parse mean their default, as for the controllers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import QUEUE_ENTRANCE_LABEL, SETTINGS_SECRET
from gpustack_operator.api.names import is_dns_subdomain, is_label_name
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import Store
from gpustack_operator.settings.secret import setting_flag, setting_text
from gpustack_operator.settings.setting import Setting

__all__ = ["Cached", "Lookups"]

log = logging.getLogger(__name__)

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.INSTANCE_TYPES, "get", "list"),  # before the informers have synced
    Rule.of(resources.RESOURCE_FLAVORS, "list"),  # likewise (an InstanceType's pool flavors)
    Rule.of(resources.DEVICES, "list"),  # likewise (its card's exact VRAM)
    Rule.of(resources.SECRETS, "get", namespace=SYSTEM),  # the settings Secret, likewise
)
"""The lookups' own reads (the informers they share are the worker's: worker.aggregation.RBAC)."""


class Cached(Protocol):
    """The part of an informer the lookups use (kube.informer.Informer satisfies it)."""

    @property
    def store(self) -> Store: ...

    def has_synced(self) -> bool: ...


def _entrance(obj: Mapping[str, Any]) -> str | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_ENTRANCE_LABEL)
    return value if isinstance(value, str) else None


def _has_labels(obj: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class Lookups:
    """Cache-first reads for the webhooks; `instance_types`, `settings`, `resource_flavors` and `devices`
    are the shared informers of all InstanceTypes, of the settings Secret, of all ResourceFlavors and of
    all Devices (None: API reads only)."""

    def __init__(
        self,
        client: Client,
        namespace: str,
        *,
        instance_types: Cached | None = None,
        settings: Cached | None = None,
        resource_flavors: Cached | None = None,
        devices: Cached | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self._types = instance_types
        self._settings = settings
        self._flavors = resource_flavors
        self._devices = devices
        self.api_reads = 0
        """Reads that went to the API server (a cache miss or an unsynced cache)."""

    @property
    def instance_types_cache(self) -> Cached | None:
        """The shared InstanceType informer (None: API reads only); the aggregated API reads it too."""
        return self._types

    def _synced(self, cached: Cached | None) -> Store | None:
        return cached.store if cached is not None and cached.has_synced() else None

    async def instance_type(self, name: str) -> JSONObj | None:
        """The InstanceType `name`, or None when it does not exist (or cannot: a name kube-apiserver would
        refuse to look up is not asked for)."""
        if not is_dns_subdomain(name):
            return None
        store = self._synced(self._types)
        if store is not None and (found := store.get(name)) is not None:
            return found
        self.api_reads += 1
        return await self.client.get_or_none(resources.INSTANCE_TYPES, name)

    async def instance_types_at_entrance(self, local_queue: str) -> list[JSONObj]:
        """The InstanceTypes whose queue-entrance label is `local_queue` (a LocalQueue name)."""
        if not is_label_name(local_queue):
            return []
        store = self._synced(self._types)
        if store is not None:
            found = [obj for obj in store.list() if _entrance(obj) == local_queue]
            if found:
                return found
        self.api_reads += 1
        return await self.client.list(
            resources.INSTANCE_TYPES, label_selector=f"{QUEUE_ENTRANCE_LABEL}={local_queue}"
        )

    async def _selected(
        self, cached: Cached | None, res: Resource, selector: Mapping[str, str]
    ) -> list[JSONObj]:
        store = self._synced(cached)
        if store is not None:
            found = [obj for obj in store.list() if _has_labels(obj, selector)]
            if found:
                return sorted(found, key=_name)
        self.api_reads += 1
        text = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        try:
            listed = await self.client.list(res, label_selector=text)
        except errors.NotFound:
            return []
        return sorted(listed, key=_name)

    async def resource_flavors(self, selector: Mapping[str, str]) -> list[JSONObj]:
        """The ResourceFlavors carrying every label of `selector`, sorted by name; none when Kueue's CRD is
        not installed (the InstanceType defaulting then fills nothing, as for a pool without nodes)."""
        return await self._selected(self._flavors, resources.RESOURCE_FLAVORS, selector)

    async def devices(self, selector: Mapping[str, str]) -> list[JSONObj]:
        """The Devices carrying every label of `selector`, sorted by name (a card model's exact VRAM)."""
        return await self._selected(self._devices, resources.DEVICES, selector)

    async def _secret(self) -> JSONObj | None:
        store = self._synced(self._settings)
        if store is not None:
            return store.get(f"{self.namespace}/{SETTINGS_SECRET}")
        self.api_reads += 1
        return await self.client.get_or_none(resources.SECRETS, SETTINGS_SECRET, self.namespace)

    async def text(self, setting: Setting) -> str:
        """A setting's value; its default when the Secret or the key is missing or does not decode."""
        return setting_text(await self._secret(), setting)

    async def flag(self, setting: Setting) -> bool:
        """A boolean setting; its default when the value is not a boolean (the controllers report it)."""
        return setting_flag(await self._secret(), setting)
