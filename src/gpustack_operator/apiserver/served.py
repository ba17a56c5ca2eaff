"""What one served resource is, and everything derived from the table of them (guide §1, §2).

The aggregated API must say the same thing in five places: the routes, the discovery document of each
group version, the OpenAPI v3 document of each group version, the Swagger 2.0 document, and the
APIServices that make kube-apiserver route to us. Kept as parallel lists they drifted, so each resource is
one `Resource` entry (its discovery description, schema, Table columns and how its storage is built) and
a `ServedAPI` derives all five from the entries; apiserver/catalog.py holds the one table. Storages are
built from `Backends`, what the worker wires (the client, the system namespace, its informers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from gpustack_operator.apiserver.app import Routes, build_app
from gpustack_operator.apiserver.authn import Authenticator
from gpustack_operator.apiserver.authz import Authorizer
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.openapi import OpenAPI
from gpustack_operator.apiserver.registry.generic.cachedreads import Informed
from gpustack_operator.apiserver.table import Column
from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import Resource as Stored

__all__ = ["Backends", "Fitter", "Resource", "ServedAPI"]

JSONObj = dict[str, Any]


class Fitter(Protocol):
    """What the `instancetypes/fit` question asks the admission check running in this process
    (controllers.node_devices_admission_fit.AdmissionFit; the worker wires it)."""

    def fit(self, queue: str, manufacturer: str, template: JSONObj, pods: int) -> JSONObj:
        """The fit status of `pods` Pods of the Pod `template` in ClusterQueue `queue`; raises ValueError
        when the template asks for no card of `manufacturer`."""
        ...


@dataclass(frozen=True)
class Backends:
    """What storages read and write through; the worker builds it (worker/aggregation.py)."""

    client: Client
    namespace: str
    """The system namespace (where the settings Secret lives)."""
    caches: Mapping[Stored, Informed] = field(default_factory=dict)
    """Informers of stored resources a storage may answer reads and watches from (none: API reads)."""
    fit: Fitter | None = None
    """The admission check's what-if (None: the fit subresource answers 503)."""

    def cache(self, stored: Stored) -> Informed | None:
        return self.caches.get(stored)


@dataclass(frozen=True)
class Resource:
    """One entry of the table: a served resource, all that is said about it and how it is served."""

    served: ServedResource
    """Group/version, resource and kind names, verbs, subresources, patch types (discovery, OpenAPI)."""
    schema: JSONObj
    """The kind's OpenAPI v3 object schema (the Swagger 2.0 one is converted from it)."""
    storage: Callable[[Backends], Routes]
    """Builds the handlers that serve it."""
    columns: Sequence[Column] = ()
    """The Table columns `kubectl get` prints (the storage renders them)."""
    rbac: tuple[Rule, ...] = ()
    """The API verbs the storage calls with the worker's credentials (install.rbac renders them)."""


class ServedAPI:
    """The table of served resources, and the routes, discovery, OpenAPI and APIServices derived from it."""

    def __init__(self, resources: Sequence[Resource]) -> None:
        names = [(r.served.api_version, r.served.plural) for r in resources]
        kinds = [r.served.kind for r in resources]
        if len(set(names)) != len(names) or len(set(kinds)) != len(kinds):
            raise ValueError(f"a resource or kind is served twice: {names}")
        self.resources = tuple(resources)

    @property
    def rbac(self) -> dict[str, tuple[Rule, ...]]:
        """Each served resource's storage rules, by served resource name."""
        return {f"{r.served.api_version} {r.served.plural}": r.rbac for r in self.resources}

    @property
    def served(self) -> tuple[ServedResource, ...]:
        return tuple(r.served for r in self.resources)

    @property
    def schemas(self) -> dict[str, JSONObj]:
        """Each kind's schema, as the OpenAPI renderers look it up."""
        return {r.served.kind: r.schema for r in self.resources}

    @property
    def group_versions(self) -> list[tuple[str, str]]:
        """(group, version) of every served group version, sorted: one APIService each."""
        return sorted({(r.group, r.version) for r in self.served})

    @property
    def apiservice_names(self) -> list[str]:
        return sorted(f"{version}.{group}" for group, version in self.group_versions)

    def openapi(self) -> OpenAPI:
        return OpenAPI.for_resources(self.served, self.schemas)

    def routes(self, backends: Backends) -> list[Routes]:
        return [r.storage(backends) for r in self.resources]

    def app(
        self,
        authenticator: Authenticator,
        authorizer: Authorizer,
        backends: Backends,
        *,
        extra: Sequence[Routes] = (),
        public_paths: frozenset[str] = frozenset(),
    ) -> web.Application:
        """The application: discovery, OpenAPI v2 and v3 and every resource's routes, then `extra`'s."""
        return build_app(
            authenticator,
            authorizer,
            self.served,
            [*self.routes(backends), *extra],
            self.openapi(),
            public_paths=public_paths,
        )
