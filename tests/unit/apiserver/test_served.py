"""The table of served resources: every entry gets its routes, its discovery entry, its OpenAPI v2 and v3
definitions and its APIService from the one entry, and an entry cannot be served twice."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aiohttp import web

from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.discovery import resource_list
from gpustack_operator.apiserver.openapi import group_version_document
from gpustack_operator.apiserver.openapi_paths import definition_name
from gpustack_operator.apiserver.registry import instancetypes
from gpustack_operator.apiserver.served import Backends, ServedAPI
from gpustack_operator.apiserver.swagger import swagger_document
from gpustack_operator.kube.client import Client

BACKENDS = Backends(cast(Client, object()), "gpustack-system")


def _collection(plural: str, group_version: str, namespaced: bool) -> str:
    scope = "namespaces/ns/" if namespaced else ""
    return f"/apis/{group_version}/{scope}{plural}"


def test_every_entry_is_routed() -> None:
    app = web.Application()
    for routes in CATALOG.routes(BACKENDS):
        routes.add_routes(app.router)
    for served in CATALOG.served:
        path = _collection(served.plural, served.api_version, served.namespaced)
        assert any(_serves(r, path) for r in app.router.resources()), f"no route serves {path}"


def _serves(resource: web.AbstractResource, path: str) -> bool:
    info: dict[str, Any] = dict(resource.get_info())
    pattern = info.get("pattern")
    return info.get("path") == path or bool(pattern is not None and pattern.fullmatch(path))


def test_every_entry_is_discovered_described_and_registered() -> None:
    swagger = swagger_document(CATALOG.served, CATALOG.schemas)
    for served in CATALOG.served:
        discovered = resource_list(served.api_version, CATALOG.served)["resources"]
        assert served.plural in {entry["name"] for entry in discovered}
        v3 = group_version_document(served.api_version, CATALOG.served, CATALOG.schemas)
        assert definition_name(served) in v3["components"]["schemas"]
        assert definition_name(served) in swagger["definitions"]
        assert f"{served.version}.{served.group}" in CATALOG.apiservice_names
    assert len(CATALOG.apiservice_names) == len(CATALOG.group_versions)


def test_a_resource_is_served_once() -> None:
    with pytest.raises(ValueError, match="served twice"):
        ServedAPI((instancetypes.RESOURCE, instancetypes.RESOURCE))
