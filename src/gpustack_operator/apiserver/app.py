"""The aggregated API's aiohttp application: errors as Status, then authentication and authorization
on every request (but the webhooks', see apiserver.webhooks.server), then discovery and the registry's
routes.

Identity comes only from authn.Authenticator, which reads X-Remote-* headers only on a connection that
presented the front proxy's certificate; requests to the API server are made with the worker's own
client and never carry the caller's headers onward, so a forged header cannot be trusted downstream.
The `Audit-ID` the proxy adds is echoed on the response for log correlation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from gpustack_operator.apiserver import requestinfo
from gpustack_operator.apiserver.authn import Authenticator, User
from gpustack_operator.apiserver.authz import Authorizer
from gpustack_operator.apiserver.discovery import ServedResource, resource_list
from gpustack_operator.apiserver.openapi import OpenAPI
from gpustack_operator.apiserver.serving import MAX_BODY_BYTES
from gpustack_operator.apiserver.status import error_middleware

__all__ = ["USER_KEY", "Routes", "build_app"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_KEY = web.RequestKey("user", User)


class Routes(Protocol):
    """A registry handler (registry/): mounts its routes."""

    def add_routes(self, router: web.UrlDispatcher) -> None: ...


def _peer_certificate(request: web.Request) -> bytes | None:
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return bytes(der) if der else None


def _auth_middleware(
    authenticator: Authenticator, authorizer: Authorizer, public_paths: frozenset[str]
) -> Middleware:
    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in public_paths:
            return await handler(request)
        user = await authenticator.authenticate(_peer_certificate(request), request.headers)
        info = requestinfo.parse(request.method, request.path, request.query)
        await authorizer.authorize(user, info)
        request[USER_KEY] = user
        return await handler(request)

    return auth


async def _echo_audit_id(request: web.Request, response: web.StreamResponse) -> None:
    audit_id = request.headers.get("Audit-ID")
    if audit_id:
        response.headers["Audit-ID"] = audit_id


def build_app(
    authenticator: Authenticator,
    authorizer: Authorizer,
    served: Sequence[ServedResource],
    handlers: Sequence[Routes],
    openapi: OpenAPI | None = None,
    public_paths: frozenset[str] = frozenset(),
) -> web.Application:
    """The application serving discovery for every group version in `served`, OpenAPI v2 and v3 when given,
    and the handlers' routes. `public_paths` (the webhooks', which kube-apiserver calls without a client
    certificate) skip authentication and authorization."""
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        middlewares=[error_middleware, _auth_middleware(authenticator, authorizer, public_paths)],
    )
    app.on_response_prepare.append(_echo_audit_id)
    for group_version in sorted({r.api_version for r in served}):
        document = resource_list(group_version, served)

        async def discovery(request: web.Request, document: dict[str, object] = document) -> web.Response:
            return web.json_response(document)

        app.router.add_get(f"/apis/{group_version}", discovery)
    if openapi is not None:
        openapi.add_routes(app.router)
    for handler in handlers:
        handler.add_routes(app.router)
    return app
