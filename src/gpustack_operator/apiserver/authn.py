"""Who is calling: kube-apiserver's delegating authentication, in the guide's order (§4.3).

1. Front proxy: a client certificate that the requestheader CA of `kube-system/extension-apiserver-
   authentication` signed, with the clientAuth usage and a CN in its allowed names (else 401), makes the
   X-Remote-User/Uid/Group/Extra-* headers the identity. Without that certificate on *this* connection,
   those headers are never read: a forged X-Remote-User is just an anonymous request.
2. A client certificate from `client-ca-file` (a direct caller): user = CN, groups = O.
3. `Authorization: Bearer`: a TokenReview, cached for 10 s.
Anonymous is off: anything else is 401. `system:authenticated` is added to every user, as Go does, so
discovery and OpenAPI fetches by users without groups pass RBAC's `system:discovery`.

OpenSSL has already verified the chain and dates during the handshake (the server trusts both CAs); the
check here only decides which CA signed the leaf, and so which of steps 1 and 2 applies.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import CIMultiDictProxy

from gpustack_operator.apiserver.status import unauthorized

__all__ = ["Authenticator", "RequestHeaderConfig", "User", "load_pem_bundle", "user_from_token_review"]

AUTHENTICATED = "system:authenticated"
TOKEN_CACHE_TTL = 10.0

TokenReviewer = Callable[[str], Awaitable["User | None"]]
"""A bearer token -> its user, or None when the API server does not accept it."""


@dataclass(frozen=True)
class User:
    """An authenticated identity: what a SubjectAccessReview names."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def load_pem_bundle(pem: str | bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle ([] for an empty one)."""
    data = pem.encode() if isinstance(pem, str) else pem
    return x509.load_pem_x509_certificates(data) if data.strip() else []


def _strings(data: Mapping[str, str], key: str, default: Sequence[str]) -> tuple[str, ...]:
    raw = data.get(key)
    if raw is None:
        return tuple(default)
    values = json.loads(raw)
    return tuple(str(v) for v in values or ())


@dataclass(frozen=True)
class RequestHeaderConfig:
    """The `extension-apiserver-authentication` ConfigMap, parsed (guide §4.2)."""

    client_ca_pem: str = ""
    requestheader_ca_pem: str = ""
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_configmap_data(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        return cls(
            client_ca_pem=data.get("client-ca-file", ""),
            requestheader_ca_pem=data.get("requestheader-client-ca-file", ""),
            allowed_names=_strings(data, "requestheader-allowed-names", ()),
            username_headers=_strings(data, "requestheader-username-headers", ()),
            uid_headers=_strings(data, "requestheader-uid-headers", ()),
            group_headers=_strings(data, "requestheader-group-headers", ()),
            extra_prefixes=_strings(data, "requestheader-extra-headers-prefix", ()),
        )


def _issued_by(leaf: x509.Certificate, cas: Sequence[x509.Certificate]) -> bool:
    for ca in cas:
        try:
            leaf.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def _has_client_usage(leaf: x509.Certificate) -> bool:
    try:
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return ExtendedKeyUsageOID.CLIENT_AUTH in usages or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""


def _with_authenticated(user: User) -> User:
    if AUTHENTICATED in user.groups:
        return user
    return User(user.name, user.uid, (*user.groups, AUTHENTICATED), user.extra)


class Authenticator:
    """Turns a request (its peer certificate and headers) into a User, or raises a 401 Status."""

    def __init__(
        self,
        config: RequestHeaderConfig,
        review_token: TokenReviewer | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._proxy_cas: list[x509.Certificate] = []
        self._client_cas: list[x509.Certificate] = []
        self.update(config)
        self._review_token = review_token
        self._clock = clock
        self._tokens: dict[str, tuple[float, User | None]] = {}

    def update(self, config: RequestHeaderConfig) -> None:
        """Trust `config` from now on (kube-apiserver rotated its front-proxy CA or client CA); a caller
        whose certificate only a replaced CA signed is no longer recognised."""
        self._proxy_cas = load_pem_bundle(config.requestheader_ca_pem)
        self._client_cas = load_pem_bundle(config.client_ca_pem)
        self.config = config

    async def authenticate(self, peer_der: bytes | None, headers: CIMultiDictProxy[str]) -> User:
        """The caller of a request whose TLS peer certificate is `peer_der` (None: no certificate)."""
        if peer_der:
            leaf = x509.load_der_x509_certificate(peer_der)
            if _issued_by(leaf, self._proxy_cas):
                user = self._front_proxy(leaf, headers)
                if user is not None:
                    return _with_authenticated(user)
            elif _issued_by(leaf, self._client_cas) and _has_client_usage(leaf):
                groups = tuple(
                    str(a.value) for a in leaf.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
                )
                return _with_authenticated(User(_common_name(leaf), groups=groups))
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            user = await self._token_user(token.strip())
            if user is not None:
                return _with_authenticated(user)
        raise unauthorized()

    def _front_proxy(self, leaf: x509.Certificate, headers: CIMultiDictProxy[str]) -> User | None:
        cfg = self.config
        if not _has_client_usage(leaf):
            raise unauthorized()
        if cfg.allowed_names and _common_name(leaf) not in cfg.allowed_names:
            raise unauthorized()
        name = next((v for h in cfg.username_headers for v in headers.getall(h, []) if v), "")
        if not name:
            return None
        uid = next((v for h in cfg.uid_headers for v in headers.getall(h, []) if v), "")
        groups = tuple(v for h in cfg.group_headers for v in headers.getall(h, []) if v)
        extra: dict[str, list[str]] = {}
        for header, value in headers.items():
            for prefix in cfg.extra_prefixes:
                if header.lower().startswith(prefix.lower()):
                    key = urllib.parse.unquote(header[len(prefix) :].lower())
                    extra.setdefault(key, []).append(value)
        return User(name, uid, groups, {k: tuple(v) for k, v in extra.items()})

    async def _token_user(self, token: str) -> User | None:
        now = self._clock()
        key = hashlib.sha256(token.encode()).hexdigest()  # no bearer token is kept in memory
        cached = self._tokens.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        if self._review_token is None:
            return None
        user = await self._review_token(token)
        self._tokens[key] = (now + TOKEN_CACHE_TTL, user)
        if len(self._tokens) > 4096:
            self._tokens = {k: v for k, v in self._tokens.items() if v[0] > now}
        return user


def user_from_token_review(review: Mapping[str, Any]) -> User | None:
    """The user of a TokenReview answer, None when it was not authenticated."""
    status = review.get("status") or {}
    if not status.get("authenticated"):
        return None
    user = status.get("user") or {}
    extra = {str(k): tuple(str(x) for x in v or ()) for k, v in (user.get("extra") or {}).items()}
    return User(
        str(user.get("username") or ""),
        str(user.get("uid") or ""),
        tuple(str(g) for g in user.get("groups") or ()),
        extra,
    )
