"""Who the aggregated API believes a caller is, over real TLS on 127.0.0.1 (guide §4.3).

Only a connection that presents the front proxy's certificate (right CA, allowed CN) may name a user in
X-Remote-* headers; forged headers on any other connection never authenticate anyone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from multidict import CIMultiDict, CIMultiDictProxy

from gpustack_operator.apiserver.authn import Authenticator, User
from gpustack_operator.apiserver.status import StatusError
from gpustack_operator.certs import pki
from tests.unit.apiserver.tls_support import PKI, Server, make_pki, running_server

DISCOVERY = "/apis/worker.gpustack.ai/v1"
LIST = "/apis/worker.gpustack.ai/v1/instancetypes"
MASTERS = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest_asyncio.fixture
async def server(keys: PKI) -> AsyncIterator[Server]:
    async with running_server(keys) as srv:
        yield srv


async def call(
    server: Server, path: str, cert: tuple[Path, Path] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    async with server.session(cert) as session, session.get(server.url + path, headers=headers or {}) as resp:
        return resp.status, await resp.json(content_type=None)


async def test_front_proxy_with_masters_group_reads_discovery_without_a_review(
    keys: PKI, server: Server
) -> None:
    proxy = keys.client_cert(keys.proxy_ca, "front-proxy-client", stem="proxy")
    status, body = await call(
        server, DISCOVERY, proxy, {"X-Remote-User": "system:kube-aggregator", **MASTERS}
    )
    assert status == 200
    assert body["groupVersion"] == "worker.gpustack.ai/v1"
    assert server.reviews.seen == []


@pytest.mark.parametrize(
    "path", [pytest.param(DISCOVERY, id="discovery"), pytest.param(LIST, id="resource list")]
)
async def test_forged_identity_headers_without_a_certificate_are_401(server: Server, path: str) -> None:
    status, body = await call(server, path, None, MASTERS)
    assert status == 401
    assert body["kind"] == "Status"
    assert (body["reason"], body["message"]) == ("Unauthorized", "Unauthorized")
    assert server.reviews.seen == []


async def test_forged_headers_on_a_user_certificate_are_that_user_not_the_header(
    keys: PKI, server: Server
) -> None:
    mallory = keys.client_cert(keys.client_ca, "mallory", orgs=["dev"], stem="mallory")
    status, body = await call(server, LIST, mallory, MASTERS)
    assert status == 403
    assert body["message"].startswith(
        'instancetypes.worker.gpustack.ai is forbidden: User "mallory" cannot list'
    )
    spec = server.reviews.seen[-1]["spec"]
    assert (spec["user"], spec["groups"]) == ("mallory", ["dev", "system:authenticated"])


async def test_proxy_ca_certificate_with_a_cn_outside_the_allowed_names_is_401(
    keys: PKI, server: Server
) -> None:
    intruder = keys.client_cert(keys.proxy_ca, "intruder", stem="intruder")
    status, _ = await call(server, DISCOVERY, intruder, MASTERS)
    assert status == 401


async def test_front_proxy_without_a_user_header_is_401(keys: PKI, server: Server) -> None:
    proxy = keys.client_cert(keys.proxy_ca, "front-proxy-client", stem="proxy")
    status, _ = await call(server, DISCOVERY, proxy, {"X-Remote-Group": "system:masters"})
    assert status == 401


async def test_certificate_from_an_untrusted_ca_is_refused_at_the_handshake(
    keys: PKI, server: Server
) -> None:
    rogue = keys.client_cert(keys.rogue_ca, "front-proxy-client", stem="rogue")
    with pytest.raises(aiohttp.ClientError):
        await call(server, DISCOVERY, rogue, MASTERS)


async def test_front_proxy_identity_reaches_the_access_review_with_groups_and_extra(
    keys: PKI, server: Server
) -> None:
    proxy = keys.client_cert(keys.proxy_ca, "front-proxy-client", stem="proxy")
    server.reviews.allowed.add("alice")
    headers = {
        "X-Remote-User": "alice",
        "X-Remote-Uid": "u-1",
        "X-Remote-Group": "dev",
        "X-Remote-Extra-Authentication.kubernetes.io%2fcredential-Id": "JTI=1",
    }
    status, _ = await call(server, DISCOVERY, proxy, headers)
    assert status == 200
    spec = server.reviews.seen[-1]["spec"]
    assert spec == {
        "user": "alice",
        "uid": "u-1",
        "groups": ["dev", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=1"]},
        "nonResourceAttributes": {"path": DISCOVERY, "verb": "get"},
    }


async def test_bearer_token_is_reviewed_and_an_unknown_token_is_401(server: Server) -> None:
    server.tokens["good"] = User("bob", groups=("ops",))
    server.reviews.allowed.add("bob")
    status, _ = await call(server, DISCOVERY, None, {"Authorization": "Bearer good", **MASTERS})
    assert status == 200
    assert server.reviews.seen[-1]["spec"]["user"] == "bob"
    status, _ = await call(server, DISCOVERY, None, {"Authorization": "Bearer forged"})
    assert status == 401


async def test_a_rotated_front_proxy_ca_is_trusted_after_update_and_the_old_one_is_not(keys: PKI) -> None:
    """kube-apiserver rotates its front-proxy CA in the trust ConfigMap; the worker's trust reloader
    hands the new config to the Authenticator without a restart."""
    new_ca = pki.new_ca("front-proxy-ca-2")
    old_leaf = pki.issue(keys.proxy_ca, "front-proxy-client", client=True)
    new_leaf = pki.issue(new_ca, "front-proxy-client", client=True)
    headers = CIMultiDictProxy(CIMultiDict(MASTERS))
    authenticator = Authenticator(keys.config())
    assert (await authenticator.authenticate(_der(old_leaf.cert_pem), headers)).name == "admin"
    with pytest.raises(StatusError) as refused:
        await authenticator.authenticate(_der(new_leaf.cert_pem), headers)
    assert refused.value.code == 401

    authenticator.update(dataclasses.replace(keys.config(), requestheader_ca_pem=new_ca.cert_pem.decode()))
    assert (await authenticator.authenticate(_der(new_leaf.cert_pem), headers)).name == "admin"
    with pytest.raises(StatusError):
        await authenticator.authenticate(_der(old_leaf.cert_pem), headers)


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
