"""A real HTTPS aggregated-API app on 127.0.0.1 and the certificates its callers present.

The front proxy's CA, a client CA for direct users, and a rogue CA nobody trusts are made once per test
module; callers are aiohttp sessions that present one certificate (or none) and any headers they like.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver import serving
from gpustack_operator.apiserver.app import build_app
from gpustack_operator.apiserver.authn import Authenticator, RequestHeaderConfig, User
from gpustack_operator.apiserver.authz import Authorizer
from gpustack_operator.apiserver.registry import instancetypes
from gpustack_operator.certs import pki


@dataclass
class PKI:
    serving_ca: pki.KeyPair
    proxy_ca: pki.KeyPair
    client_ca: pki.KeyPair
    rogue_ca: pki.KeyPair
    directory: Path

    def client_cert(
        self, ca: pki.KeyPair, cn: str, *, orgs: Sequence[str] = (), stem: str
    ) -> tuple[Path, Path]:
        return pki.issue(ca, cn, organizations=orgs, client=True).write(self.directory, stem)

    def config(self, allowed_names: Sequence[str] = ("front-proxy-client",)) -> RequestHeaderConfig:
        return RequestHeaderConfig(
            client_ca_pem=self.client_ca.cert_pem.decode(),
            requestheader_ca_pem=self.proxy_ca.cert_pem.decode(),
            allowed_names=tuple(allowed_names),
            username_headers=("X-Remote-User",),
            uid_headers=("X-Remote-Uid",),
            group_headers=("X-Remote-Group",),
            extra_prefixes=("X-Remote-Extra-",),
        )


def make_pki(directory: Path) -> PKI:
    return PKI(
        pki.new_ca("serving-ca"),
        pki.new_ca("front-proxy-ca"),
        pki.new_ca("client-ca"),
        pki.new_ca("rogue"),
        directory,
    )


@dataclass
class Reviews:
    """The SubjectAccessReview seam: records every review and allows users in `allowed`."""

    allowed: set[str]
    seen: list[JSONObj]

    async def __call__(self, body: JSONObj) -> JSONObj:
        self.seen.append(body)
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


@dataclass
class Server:
    url: str
    ca_file: Path
    reviews: Reviews
    tokens: dict[str, User]

    @contextlib.asynccontextmanager
    async def session(self, cert: tuple[Path, Path] | None = None) -> AsyncIterator[aiohttp.ClientSession]:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if cert is not None:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            yield session


@contextlib.asynccontextmanager
async def running_server(
    keys: PKI,
    *,
    config: RequestHeaderConfig | None = None,
    extra_routes: Callable[[web.Application], None] | None = None,
    review: Callable[[JSONObj], Awaitable[JSONObj]] | None = None,
) -> AsyncIterator[Server]:
    """The app (discovery + authn + authz; no CRD proxy) over real TLS on 127.0.0.1."""
    leaf = pki.issue(keys.serving_ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    certs = serving.ServingCerts(leaf.cert_pem, leaf.key_pem, keys.serving_ca.cert_pem)
    cfg = config or keys.config()
    ctx = serving.ssl_context(certs, cfg.requestheader_ca_pem + cfg.client_ca_pem)
    reviews = Reviews(allowed=set(), seen=[])
    tokens: dict[str, User] = {}

    async def token_review(token: str) -> User | None:
        return tokens.get(token)

    app = build_app(
        Authenticator(cfg, token_review), Authorizer(review or reviews), [instancetypes.SERVED], []
    )
    if extra_routes is not None:
        extra_routes(app)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ca_file = keys.directory / "serving-ca.crt"
    ca_file.write_bytes(keys.serving_ca.cert_pem)
    try:
        yield Server(f"https://127.0.0.1:{port}", ca_file, reviews, tokens)
    finally:
        await runner.cleanup()
