"""The aggregated API server and its webhooks: serve a table of resources, register it, wait until
kube-apiserver routes here.

What is served comes from a `ServedAPI` (catalog.CATALOG in the worker) and the `Backends` its storages
use; the worker wires both (worker/aggregation.py). Serving starts first (the trust ConfigMap is read
first, since the TLS context must trust the front proxy's CA); `register` (the worker's Prepare step)
applies the routing Service (outside a cluster) and the table's APIServices once we listen, so the
aggregator's first probe finds us, then the webhook configurations (same Service, port and CA);
`wait_available` returns once every APIService reports Available (contract §3 startup order: the
controllers start only then), or raises NotAvailableError after `available_timeout`.

Keepers run beside the server, each until cancelled: the serving certificate reloader (`--cert-dir`),
the CA bundle keeper (re-applies the registrations when `ca.crt` changes there), the front-proxy trust
reloader (re-reads the trust ConfigMap), and the webhook configuration keeper (puts back what was
deleted or edited).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack_operator.api.conditions import status_conditions
from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver import delegation, registration, serving
from gpustack_operator.apiserver.authn import Authenticator
from gpustack_operator.apiserver.authz import Authorizer
from gpustack_operator.apiserver.served import Backends, ServedAPI
from gpustack_operator.apiserver.webhooks.server import WebhookRoutes, configurations, drifted
from gpustack_operator.certs import pki
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import resources
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.runtime import Supervisor
from gpustack_operator.settings.environment import Environment

__all__ = ["AggregatedAPI", "AggregationOptions", "NotAvailableError"]

log = logging.getLogger(__name__)

CONFIGURATION_KINDS = (resources.MUTATING_WEBHOOKS, resources.VALIDATING_WEBHOOKS)
WEBHOOK_RECHECK = 30.0
"""Seconds between checks that our webhook configurations are still as we wrote them."""
CA_RECHECK = 10.0

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.APISERVICES, "get", "create", "patch"),  # register, wait Available, re-apply the CA
    *(Rule.of(kind, "get", "create", "patch") for kind in CONFIGURATION_KINDS),  # register, keep_webhooks
    # In a cluster the Service's port is read; outside one the ExternalName Service is applied.
    Rule.of(resources.SERVICES, "get", "create", "patch", namespace=SYSTEM),
)
"""Registration of the aggregated API and the webhooks (delegation.BUILT_IN_ROLES: authn and authz)."""
"""Seconds between looks at `<cert-dir>/ca.crt` (a file read; the certificate reloader's pace)."""
TRUST_RECHECK = 30.0
"""Seconds between reads of the front proxy's trust ConfigMap."""


@dataclass(frozen=True)
class AggregationOptions:
    """`--secure-port` (0: no aggregated API), `--bind-address`, `--cert-dir`."""

    secure_port: int = 31443
    bind_address: str = "127.0.0.1"
    cert_dir: Path | None = None
    available_timeout: float = 120.0
    in_cluster: bool = True
    """In a Pod the chart's Service routes to us; outside, Prepare makes an ExternalName Service."""
    webhooks: bool = True
    """Serve the admission webhooks and install their configurations (`--no-webhooks` turns it off)."""


class NotAvailableError(RuntimeError):
    """Our APIServices did not all report Available within `available_timeout`."""


class AggregatedAPI:
    """One aggregated API server (the table `api` over `backends`, and the webhooks when given) and its
    registration."""

    def __init__(
        self,
        api: ServedAPI,
        backends: Backends,
        options: AggregationOptions,
        environment: Environment,
        webhooks: WebhookRoutes | None = None,
    ) -> None:
        self.api = api
        self.backends = backends
        self.client = backends.client
        self.webhooks = webhooks
        self.options = options
        self.namespace = environment.pod_namespace
        self.service = environment.service_name
        hosts = pki.service_hosts(self.service, self.namespace)
        self.certs = serving.load_or_create(options.cert_dir, hosts)
        self.listening = asyncio.Event()
        self.registered = asyncio.Event()
        self._configurations: list[dict[str, Any]] = []
        self._owner: list[JSONObj] = []
        self._port = options.secure_port
        self.ca_pem = self.certs.ca_pem
        """The CA bundle our APIServices and webhook configurations carry (`ca.crt`, or our own CA)."""
        self.ctx: ssl.SSLContext | None = None
        self.authenticator: Authenticator | None = None

    @property
    def names(self) -> list[str]:
        return self.api.apiservice_names

    def spawn(self, sup: Supervisor) -> None:
        """Start the server and its keepers under `sup`, each until cancelled."""
        sup.spawn("aggregated API server", self.serve)
        sup.spawn("front-proxy trust reloader", self.keep_trust)
        if self.webhooks is not None:
            sup.spawn("webhook configuration keeper", self.keep_webhooks)
        if self.options.cert_dir is not None:
            sup.spawn("serving certificate reloader", self.reload_certificates)
            sup.spawn("CA bundle keeper", self.keep_ca_bundle)

    async def serve(self) -> None:
        """Read the trust ConfigMap, then serve until cancelled."""
        config = await delegation.load_request_header_config(self.client)
        if not config.requestheader_ca_pem:
            log.warning(
                "No requestheader CA in %s/%s: no front proxy can reach us", *delegation.AUTH_CONFIGMAP
            )
        ctx = serving.ssl_context(self.certs, config.requestheader_ca_pem + "\n" + config.client_ca_pem)
        self.ctx = ctx
        self.authenticator = Authenticator(config, delegation.token_reviewer(self.client))
        app = self.api.app(
            self.authenticator,
            Authorizer(delegation.access_reviewer(self.client)),
            self.backends,
            extra=[self.webhooks] if self.webhooks is not None else [],
            public_paths=self.webhooks.paths if self.webhooks is not None else frozenset(),
        )
        address = (self.options.bind_address, self.options.secure_port)
        await serving.serve(app, address, ctx, started=self.listening)

    async def reload_certificates(self) -> None:
        """With `--cert-dir`: once serving, reload the serving certificate whenever its files change."""
        await self.listening.wait()
        if self.options.cert_dir is None or self.ctx is None:
            return
        await serving.CertificateReloader(self.ctx, self.options.cert_dir).run()

    async def register(self, owner: Sequence[JSONObj] = ()) -> None:
        """The Prepare step: the routing Service (outside a cluster), our APIServices and webhooks; with
        `owner` (worker.prepare.owner_references) the APIServices and webhook configurations carry it."""
        self._owner = list(owner)
        await self.listening.wait()
        if not self.options.in_cluster:
            svc = registration.external_name_service(self.namespace, self.service)
            await self.client.apply(resources.SERVICES, svc)
        else:
            self._port = await self._service_port()
        await self._apply_registration("Prepare")
        self.registered.set()

    async def _apply_registration(self, why: str) -> None:
        """Apply our APIServices and (when served) webhook configurations with the current CA bundle."""
        for group_version in self.api.group_versions:
            body = registration.apiservice(
                *group_version, self.namespace, self.service, self._port, self.ca_pem
            )
            if self._owner:
                body["metadata"]["ownerReferences"] = self._owner
            await self.client.apply(resources.APISERVICES, body)
            log.info(
                "%s: applied APIService %s -> %s/%s:%s",
                why,
                body["metadata"]["name"],
                self.namespace,
                self.service,
                self._port,
            )
        if self.webhooks is not None:
            self._configurations = configurations(
                self.webhooks.webhooks, self.namespace, self.service, self._port, self.ca_pem
            )
            for body in self._configurations:
                if self._owner:
                    body["metadata"]["ownerReferences"] = self._owner
            for res, body in zip(CONFIGURATION_KINDS, self._configurations, strict=True):
                await self.client.apply(res, body)
                log.info(
                    "%s: applied %s %s (%d webhooks)",
                    why,
                    res.kind,
                    body["metadata"]["name"],
                    len(body["webhooks"]),
                )

    async def keep_ca_bundle(self) -> None:
        """With `--cert-dir`: once registered, re-apply the APIServices and webhook configurations when
        `ca.crt` changes (a CA rotation: kube-apiserver must trust the new serving certificate, which the
        certificate reloader loads from the same directory). Runs until cancelled."""
        await self.registered.wait()
        if self.options.cert_dir is None:
            return
        ca_file = self.options.cert_dir / "ca.crt"
        while True:
            await asyncio.sleep(CA_RECHECK)
            try:
                ca = ca_file.read_bytes() if ca_file.is_file() else None
            except OSError as err:
                log.warning("Could not read %s: %s", ca_file, err)
                continue
            if not ca or ca == self.ca_pem or b"-----END CERTIFICATE-----" not in ca:
                continue  # unchanged, absent, or half-written: looked at again next time
            self.ca_pem = ca
            try:
                await self._apply_registration(f"CA bundle changed in {ca_file}")
            except KubeError as err:
                self.ca_pem = None  # differs from the file: retried at the next look
                log.warning("Could not apply the new CA bundle: %s", err)

    async def keep_trust(self) -> None:
        """Once serving: every `TRUST_RECHECK` seconds, re-read the front proxy's trust ConfigMap, so a
        rotated requestheader CA (or a changed allowed-names list) applies without a restart. The new CAs
        join the TLS store (OpenSSL cannot drop one); which CA a caller may use is decided by the
        Authenticator, which holds only the current ones. Runs until cancelled."""
        await self.listening.wait()
        while True:
            await asyncio.sleep(TRUST_RECHECK)
            if self.authenticator is None or self.ctx is None:
                continue
            try:
                config = await delegation.load_request_header_config(self.client)
            except KubeError as err:
                log.warning("Could not re-read %s/%s: %s", *delegation.AUTH_CONFIGMAP, err)
                continue
            if config == self.authenticator.config:
                continue
            trusted = (config.requestheader_ca_pem + "\n" + config.client_ca_pem).strip()
            if trusted:
                self.ctx.load_verify_locations(cadata=trusted)
                self.ctx.verify_mode = ssl.CERT_OPTIONAL  # none were trusted at start: now ask for them
            self.authenticator.update(config)
            log.info("Front-proxy trust reloaded from %s/%s", *delegation.AUTH_CONFIGMAP)

    async def keep_webhooks(self) -> None:
        """Once registered: every `WEBHOOK_RECHECK` seconds, put back a webhook configuration that was
        deleted or edited (only what we wrote is compared; server defaults beside it are fine). Runs
        until cancelled; spawn it only when the webhooks are served."""
        await self.registered.wait()
        while True:
            await asyncio.sleep(WEBHOOK_RECHECK)
            for res, body in zip(CONFIGURATION_KINDS, self._configurations, strict=True):
                try:
                    live = await self.client.get_or_none(res, body["metadata"]["name"])
                    if drifted(live, body):
                        await self.client.apply(res, body)
                        log.warning(
                            "%s %s was %s; restored ours",
                            res.kind,
                            body["metadata"]["name"],
                            "deleted" if live is None else "changed",
                        )
                except KubeError as err:
                    log.warning("Could not check %s %s: %s", res.kind, body["metadata"]["name"], err)

    async def _service_port(self) -> int:
        svc = await self.client.get_or_none(resources.SERVICES, self.service, self.namespace)
        ports = ((svc or {}).get("spec") or {}).get("ports") or []
        return int(ports[0].get("port", 443)) if ports else 443

    async def wait_available(self) -> None:
        """Return once every APIService is Available; NotAvailableError after `available_timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.available_timeout
        pending = self.names
        while pending:
            waiting = []
            for name in pending:
                obj = await self.client.get_or_none(resources.APISERVICES, name)
                available = next(
                    (c for c in status_conditions(obj or {}) if c.get("type") == "Available"), None
                )
                if available is None:
                    waiting.append((name, "no status yet"))
                elif available.get("status") != "True":
                    waiting.append((name, str(available.get("message") or available.get("reason"))))
            pending = [name for name, _ in waiting]
            if not pending:
                break
            if loop.time() > deadline:
                detail = "; ".join(f"{n}: {m}" for n, m in waiting)
                raise NotAvailableError(
                    f"APIServices not Available after {self.options.available_timeout:.0f}s: {detail}"
                )
            await asyncio.sleep(0.5)
        log.info("APIServices Available: %s", ", ".join(self.names))
