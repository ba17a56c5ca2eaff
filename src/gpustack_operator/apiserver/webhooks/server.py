"""Our webhooks as kube-apiserver meets them: one POST route each, and the two configurations naming them.

Why this module exists: the path, the name, the rule and the handler of a webhook must agree in two places,
the aiohttp routes and the Mutating/ValidatingWebhookConfiguration Prepare applies, so each webhook is one
`Webhook` value and both are derived from the same list (contract §4: paths, names, rules, objectSelector,
`failurePolicy: Fail`, `sideEffects: None`, `matchPolicy: Equivalent`, `timeoutSeconds: 10`; configuration
names `gpustack-worker-mutation`/`-validation`, which sort before Kueue's so our Pod fold runs first).

A route never answers 5xx for a review it could read: a malformed body is a 400 Status, a refusal is an
AdmissionReview with `allowed: false` and a Status, and a failed API read or a bug in a hook refuses
the object with a message that says so (the traceback goes to the log). kube-apiserver presents no
client certificate to webhooks, so these routes skip the aggregated API's authentication: they only
compute answers about the object they are sent.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.status import StatusError, bad_request
from gpustack_operator.apiserver.webhooks.review import Review, ReviewError, Verdict, answer, parse
from gpustack_operator.kube.errors import KubeError

__all__ = [
    "MUTATING_CONFIGURATION",
    "VALIDATING_CONFIGURATION",
    "ReviewObserver",
    "Rule",
    "Webhook",
    "WebhookRoutes",
    "configurations",
    "drifted",
]

log = logging.getLogger(__name__)

Hook = Callable[[Review], Awaitable[Verdict]]

CONFIGURATION_PREFIX: Final = "gpustack-worker"
MUTATING_CONFIGURATION: Final = f"{CONFIGURATION_PREFIX}-mutation"
VALIDATING_CONFIGURATION: Final = f"{CONFIGURATION_PREFIX}-validation"
TIMEOUT_SECONDS: Final = 10


@dataclass(frozen=True)
class Rule:
    """What a webhook is called for: one resource of one group version, its scope and operations."""

    group: str
    version: str
    resource: str
    kind: str
    scope: str
    operations: tuple[str, ...]

    def body(self) -> JSONObj:
        return {
            "apiGroups": [self.group],
            "apiVersions": [self.version],
            "resources": [self.resource],
            "scope": self.scope,
            "operations": list(self.operations),
        }


@dataclass(frozen=True)
class Webhook:
    """One webhook: `mutating` or validating, for `rule`, answered by `hook`."""

    rule: Rule
    mutating: bool
    hook: Hook
    name_prefix: str = ""
    object_selector: Mapping[str, Any] | None = None
    match_conditions: Sequence[Mapping[str, str]] = ()
    """CEL conditions kube-apiserver evaluates before calling us (all must hold)."""

    @property
    def _parts(self) -> tuple[str, str, str, str]:
        verb = "mutate" if self.mutating else "validate"
        return verb, self.rule.group or "core", self.rule.version, self.rule.kind.lower()

    @property
    def name(self) -> str:
        """`mutate.<group>.<version>.<kind>`, or `<prefix>.mutate.core.v1.pod` with a name prefix."""
        name = ".".join(self._parts)
        return f"{self.name_prefix}.{name}" if self.name_prefix else name

    @property
    def path(self) -> str:
        """`/mutate-<group with - for .>-<version>-<kind>`, or `/<prefix>-mutate-…` with a name prefix."""
        verb, group, version, kind = self._parts
        path = "-".join((verb, group.replace(".", "-"), version, kind))
        return f"/{self.name_prefix}-{path}" if self.name_prefix else f"/{path}"

    def body(self, client_config: JSONObj) -> JSONObj:
        """This webhook's entry in its configuration."""
        service = dict(client_config.get("service") or {}, path=self.path)
        entry: JSONObj = {
            "name": self.name,
            "clientConfig": {**client_config, "service": service},
            "rules": [self.rule.body()],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "admissionReviewVersions": ["v1"],
        }
        if self.object_selector is not None:
            entry["objectSelector"] = dict(self.object_selector)
        if self.match_conditions:
            entry["matchConditions"] = [dict(c) for c in self.match_conditions]
        if self.mutating:
            entry["reinvocationPolicy"] = "Never"
        return entry


def configurations(
    webhooks: Sequence[Webhook], namespace: str, service: str, port: int, ca_pem: bytes | None
) -> list[JSONObj]:
    """The Mutating and Validating configurations routing to Service `namespace/service` on `port`."""
    client_config: JSONObj = {"service": {"namespace": namespace, "name": service, "port": port}}
    if ca_pem:
        client_config["caBundle"] = base64.b64encode(ca_pem).decode()
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": [w.body(client_config) for w in webhooks if w.mutating == mutating],
        }
        for kind, name, mutating in (
            ("MutatingWebhookConfiguration", MUTATING_CONFIGURATION, True),
            ("ValidatingWebhookConfiguration", VALIDATING_CONFIGURATION, False),
        )
    ]


def _contains(live: Any, want: Any) -> bool:
    """True when `live` holds everything `want` says (the server may add defaults beside it)."""
    if isinstance(want, dict):
        return isinstance(live, dict) and all(k in live and _contains(live[k], v) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(live, list)
            and len(live) == len(want)
            and all(_contains(a, b) for a, b in zip(live, want, strict=True))
        )
    return bool(live == want)


def drifted(live: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """True when a configuration is missing, or its webhooks are not exactly ours as we wrote them."""
    if live is None:
        return True
    hooks = {w.get("name"): w for w in live.get("webhooks") or [] if isinstance(w, dict)}
    wanted = {w["name"]: w for w in desired["webhooks"]}
    return hooks.keys() != wanted.keys() or not all(_contains(hooks[n], w) for n, w in wanted.items())


def _failure(webhook: Webhook, message: str) -> Verdict:
    return Verdict.deny(StatusError(500, "InternalError", f"webhook {webhook.name}: {message}"))


ReviewObserver = Callable[[str, str, float], None]
"""Told of every review answered: (webhook name, outcome: allowed, denied or error, seconds taken)."""


class WebhookRoutes:
    """The aiohttp routes of `webhooks` (registry-style: `add_routes`); `paths` skip authentication.

    `observe` hears of every review answered (for the worker's latency histogram): an error is a review
    the hook could not decide (the API server unreachable, a bug), answered by a denial all the same.
    """

    def __init__(self, webhooks: Sequence[Webhook], observe: ReviewObserver | None = None) -> None:
        self.webhooks = list(webhooks)
        self.paths = frozenset(w.path for w in self.webhooks)
        self.observe = observe

    def add_routes(self, router: web.UrlDispatcher) -> None:
        for webhook in self.webhooks:

            async def handle(request: web.Request, webhook: Webhook = webhook) -> web.Response:
                return await self._handle(webhook, request)

            router.add_post(webhook.path, handle)

    async def _handle(self, webhook: Webhook, request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            raise StatusError(
                415,
                "UnsupportedMediaType",
                f"an AdmissionReview must be application/json, not {request.content_type}",
            )
        try:
            review = parse(await request.read())
        except ReviewError as err:
            raise bad_request(f"not an AdmissionReview v1 request: {err}") from None
        started = time.perf_counter()
        outcome = "error"
        try:
            verdict = await webhook.hook(review)
            outcome = "allowed" if verdict.allowed else "denied"
        except StatusError as err:
            verdict = Verdict.deny(err)
            outcome = "denied"
        except KubeError as err:
            log.warning(
                "Webhook %s: refusing %s %s/%s: %s",
                webhook.name,
                review.operation,
                review.namespace,
                review.name,
                err,
            )
            verdict = _failure(webhook, f"could not read from the API server: {err}")
        except Exception:
            log.exception(
                "Webhook %s failed on %s %s/%s", webhook.name, review.operation, review.namespace, review.name
            )
            verdict = _failure(webhook, "internal error; the worker's log has the details")
        if not verdict.allowed and verdict.status is not None:
            log.info(
                "Webhook %s denied %s %s %s/%s by %s: %s",
                webhook.name,
                review.operation,
                review.kind,
                review.namespace,
                review.name,
                review.username or "?",
                verdict.status.message,
            )
        if self.observe is not None:
            self.observe(webhook.name, outcome, time.perf_counter() - started)
        return web.json_response(answer(review, verdict))
