"""What the cluster must hold for the worker to do its job, and telling the admin plainly when it does not.

The worker depends on two things it does not install: Node Feature Discovery (its NodeFeatureRule labels the
nodes by vendor) and Kueue (every pool is a ClusterQueue, every card request a Workload). Kueue must also
run with our Configuration (rules.capacity.kueueconfig): without its resource transformations a GPU request
is never turned into `credits.gpustack.ai/<manufacturer>`, and the pools' quota silently counts nothing.

- **Installed** (`wait_installed`, before Prepare): the CRDs `nodefeaturerules.nfd.k8s-sigs.io` and
  `admissionchecks.kueue.x-k8s.io` must be served. While one is missing the worker does not exit (a restart
  loop says nothing new); it says what is missing and what to do, once per change: an ERROR log line, a
  Warning Event `PrerequisiteMissing` about its Pod (or, outside a cluster, about the system namespace), and
  /readyz fails with the same text. It looks again every `RECHECK` seconds and goes on when both are there.
- **Configured** (`keep_checking_kueue`, after Prepare, every `KUEUE_RECHECK` seconds): Kueue's configuration
  is read where Kueue's own manifests put it, the `kueue-manager-config` ConfigMap (kustomize: kueue-system;
  our chart's subchart: the release namespace; `--kueue-config-map` says where). Kueue reads that file only
  at start and publishes nothing of it through the API, so the ConfigMap is the one place to learn it; a
  Kueue configured another way reads as "unknown", never as broken. A verdict that changes is reported as a
  log line, an Event (`KueueMisconfigured`, Warning; `KueueConfigured`, Normal) and the condition
  `gpustack.ai/KueueConfigured` on the `gpustack-node-devices` AdmissionCheck (server-side applied with a
  field manager of its own, so it sits beside the Active condition the admission controllers keep):
  `kubectl describe admissioncheck gpustack-node-devices` shows it. /readyz lists it as a note: the worker
  still serves its API and webhooks, which a misconfigured Kueue does not break.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import yaml

from gpustack_operator.api.conditions import set_condition
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK
from gpustack_operator.api.types.common import Condition, ConditionStatus
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.events import EventSink
from gpustack_operator.rules.capacity.kueueconfig import MANAGER_CONFIG_KEY, configuration_problems
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.settings.environment import Environment

__all__ = ["CONDITION", "RBAC", "KueueConfigMap", "Prerequisites"]

log = logging.getLogger(__name__)

RECHECK: Final = 10.0
"""Seconds between looks for a missing NFD or Kueue."""
KUEUE_RECHECK: Final = 20.0
"""Seconds between reads of Kueue's configuration (a fixed Kueue is noticed within this)."""
CONDITION: Final = "gpustack.ai/KueueConfigured"
FIELD_MANAGER: Final = "gpustack-worker-prerequisites"
_NFD_CRD: Final = "nodefeaturerules.nfd.k8s-sigs.io"
_KUEUE_CRD: Final = "admissionchecks.kueue.x-k8s.io"
_INSTALL: Final = {
    _NFD_CRD: "Node Feature Discovery is not installed (no CRD nodefeaturerules.nfd.k8s-sigs.io): install "
    "it (the chart's node-feature-discovery.enabled=true, or NFD v0.19 yourself) so nodes get vendor labels",
    _KUEUE_CRD: "Kueue is not installed (no CRD admissionchecks.kueue.x-k8s.io): install it (the chart's "
    "kueue.enabled=true, or Kueue v0.17 yourself with the Configuration in the chart's kueue values)",
}

RBAC: Final = (
    Rule.of(resources.CRDS, "get"),  # is NFD / Kueue installed
    # Kueue's ConfigMap where its own manifests put it, or where our chart's Kueue subchart does (the
    # system namespace): never a cluster-wide read of ConfigMaps.
    Rule.of(resources.CONFIGMAPS, "get", namespace="kueue-system"),
    Rule.of(resources.CONFIGMAPS, "get", namespace=SYSTEM),
    Rule.of(resources.ADMISSION_CHECKS, "patch", subresource="status"),  # the KueueConfigured condition
    Rule.of(resources.EVENTS, "create", "patch", namespace=SYSTEM),  # about the worker's Pod
)
"""The API verbs this module calls with the worker's ServiceAccount (install.rbac renders them)."""


@dataclass(frozen=True)
class KueueConfigMap:
    """`--kueue-config-map NAMESPACE/NAME`: where Kueue's configuration file is published."""

    namespace: str = "kueue-system"
    name: str = "kueue-manager-config"

    @classmethod
    def parse(cls, text: str) -> KueueConfigMap:
        namespace, sep, name = text.partition("/")
        if not sep or not namespace or not name or "/" in name:
            raise ValueError(f"{text!r}: want NAMESPACE/NAME, e.g. kueue-system/kueue-manager-config")
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class _Verdict:
    status: ConditionStatus
    reason: str
    message: str


class Prerequisites:
    """The checks, their last verdicts (for /readyz) and their reports (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        environment: Environment,
        events: EventSink,
        config_maps: Sequence[KueueConfigMap] = (KueueConfigMap(),),
        environ: Environ = DEFAULT_ENVIRON,
    ) -> None:
        self.client = client
        self.events = events
        self.config_maps = tuple(config_maps)
        self.environ = environ
        namespace = environment.pod_namespace
        self.regarding: JSONObj = (
            {"apiVersion": "v1", "kind": "Pod", "name": environment.pod_name, "namespace": namespace}
            if environment.pod_name
            else {"apiVersion": "v1", "kind": "Namespace", "name": namespace}
        )
        self.missing: list[str] = []
        self.kueue: _Verdict | None = None

    # /readyz

    def installed(self) -> bool | str:
        """The readiness check: true, or what is missing."""
        return "; ".join(self.missing) if self.missing else True

    def kueue_note(self) -> str | None:
        """The readiness note on Kueue's configuration (None until checked or when it is right)."""
        if self.kueue is None or self.kueue.status == "True":
            return None
        return self.kueue.message

    # installed

    async def _missing(self) -> list[str]:
        found = []
        for crd, advice in _INSTALL.items():
            if await self.client.get_or_none(resources.CRDS, crd) is None:
                found.append(advice)
        return found

    async def wait_installed(self, recheck: float = RECHECK) -> None:
        """Return once NFD's and Kueue's CRDs are served; report each change meanwhile."""
        while True:
            missing = await self._missing()
            if missing != self.missing:
                for advice in missing:
                    log.error("Waiting: %s", advice)
                    self.events.event(
                        self.regarding, "Warning", "PrerequisiteMissing", advice, action="Prepare"
                    )
                if not missing:
                    log.info("Prerequisites found: Node Feature Discovery and Kueue are installed")
            self.missing = missing
            if not missing:
                return
            await asyncio.sleep(recheck)

    # configured

    async def _kueue_verdict(self) -> _Verdict:
        unread = []
        for where in self.config_maps:
            try:
                config_map = await self.client.get(resources.CONFIGMAPS, where.name, where.namespace)
            except (errors.NotFound, errors.Forbidden) as e:
                unread.append(f"{where} ({e.reason})")
                continue
            text = (config_map.get("data") or {}).get(MANAGER_CONFIG_KEY)
            try:
                config = yaml.safe_load(text) if text else None
            except yaml.YAMLError as e:
                return _Verdict("Unknown", "Unreadable", f"Kueue's configuration in {where} is not YAML: {e}")
            if not isinstance(config, dict):
                return _Verdict("Unknown", "Unreadable", f"{where} holds no {MANAGER_CONFIG_KEY} mapping")
            problems = configuration_problems(config, self.environ)
            if problems:
                return _Verdict(
                    "False",
                    "KueueMisconfigured",
                    f"Kueue's configuration ({where}) is not the operator's: {'; '.join(problems)}. Run "
                    "Kueue with the Configuration in the chart's values (kueue.managerConfig) and restart it",
                )
            return _Verdict("True", "KueueConfigured", f"Kueue's configuration ({where}) has the operator's")
        return _Verdict(
            "Unknown",
            "ConfigurationNotFound",
            f"could not read Kueue's configuration from {', '.join(unread)}; the credit transformations the "
            "GPU pools need were not checked (--kueue-config-map says where Kueue's ConfigMap is)",
        )

    async def check_kueue(self, now: datetime | None = None) -> None:
        """Read Kueue's configuration once; report the verdict when it changed."""
        verdict = await self._kueue_verdict()
        if verdict == self.kueue:
            return
        self.kueue = verdict
        level = logging.INFO if verdict.status == "True" else logging.WARNING
        log.log(level, "Kueue configuration: %s", verdict.message)
        self.events.event(
            self.regarding,
            "Normal" if verdict.status == "True" else "Warning",
            verdict.reason,
            verdict.message,
        )
        conditions: list[Condition] = set_condition(
            [],
            CONDITION,
            verdict.status,
            verdict.reason,
            verdict.message,
            generation=None,
            now=now or datetime.now(UTC),
        )
        body = {"metadata": {"name": NODE_DEVICES_ADMISSION_CHECK}, "status": {"conditions": conditions}}
        try:
            await self.client.apply(
                resources.ADMISSION_CHECKS, body, field_manager=FIELD_MANAGER, subresource="status"
            )
        except errors.KubeError as e:
            log.warning(
                "Could not set %s on AdmissionCheck %s: %s", CONDITION, NODE_DEVICES_ADMISSION_CHECK, e
            )

    async def keep_checking_kueue(self, recheck: float = KUEUE_RECHECK) -> None:
        """Check Kueue's configuration every `recheck` seconds until cancelled."""
        while True:
            try:
                await self.check_kueue()
            except errors.KubeError as e:
                log.warning("Could not read Kueue's configuration: %s", e)
            await asyncio.sleep(recheck)
