"""The deploy-time environment (contract §6), parsed once into typed, frozen values.

Why this module exists: the worker and the device manager read ``GPUSTACK_*``, the Kubernetes-injected
``KUBERNETES_*`` variables and the vendor toolkit paths at startup. Parsing them here, from an injected
mapping, gives one typed object with defaults, and a clear error naming the variable and its bad text
(``GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY=yes`` is an error, not a silent false).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpustack_operator.settings.admission import parse_bool

DEFAULT_NAMESPACE = "gpustack-system"
DEFAULT_SERVICE_NAME = "gpustack-operator-worker"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PCI_CLASS = re.compile(r"[0-9a-f]{1,6}")


class EnvironmentValueError(ValueError):
    """A variable holds text its setting cannot take; names the variable, the text and what is expected."""

    def __init__(self, variable: str, text: str, expected: str) -> None:
        self.variable = variable
        self.text = text
        super().__init__(f"{variable}={text!r}: {expected}")


class _Reader:
    """Typed reads of one environment mapping; an unset or empty variable yields the default."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def text(self, *names: str) -> str | None:
        """The first of ``names`` that is set and non-blank, stripped."""
        return next((v.strip() for n in names if (v := self._environ.get(n, "")).strip()), None)

    def path(self, *names: str) -> Path | None:
        text = self.text(*names)
        return Path(text) if text else None

    def flag(self, name: str, default: bool) -> bool:
        text = self.text(name)
        if text is None:
            return default
        try:
            return parse_bool(text)
        except ValueError as e:
            raise EnvironmentValueError(name, text, str(e)) from e

    def name(self, variable: str, pattern: re.Pattern[str], what: str) -> str | None:
        text = self.text(variable)
        if text is not None and (len(text) > 253 or not pattern.fullmatch(text)):
            raise EnvironmentValueError(variable, text, f"want a {what}")
        return text

    def ip(self, variable: str) -> str | None:
        text = self.text(variable)
        if text is not None:
            try:
                ipaddress.ip_address(text)
            except ValueError as e:
                raise EnvironmentValueError(variable, text, "want an IPv4 or IPv6 address") from e
        return text

    def pci_classes(self, variable: str, default: tuple[str, ...]) -> tuple[str, ...]:
        text = self.text(variable)
        if text is None:
            return default
        prefixes = tuple(p.strip().lower() for p in text.split(","))
        if not all(_PCI_CLASS.fullmatch(p) for p in prefixes):
            raise EnvironmentValueError(
                variable, text, "want comma-separated hex PCI class prefixes, e.g. 02,03"
            )
        return prefixes


@dataclass(frozen=True)
class Toolkits:
    """Where the vendor toolkits live on the host (read by the device manager's detectors)."""

    rocm_home: Path = Path("/opt/rocm")
    """``ROCM_HOME``, else ``ROCM_PATH``."""
    rocm_smi_lib_path: Path | None = None
    amd_smi_lib_path: Path | None = None
    cann_home: Path = Path("/usr/local/Ascend")
    ascend_toolkit_home: Path | None = None
    neuware_home: Path = Path("/usr/local/neuware")
    ppu_home: Path = Path("/usr/local/PPU_SDK")
    corex_home: Path = Path("/usr/local/corex")
    maca_home: Path = Path("/opt/maca")


@dataclass(frozen=True)
class Environment:
    """Deploy-time configuration of a worker or device-manager process."""

    data_dir: Path = Path("/var/lib/gpustack")
    """``GPUSTACK_DATA_DIR``: state on the host (libraries, per-pod work dirs)."""
    conf_dir: Path = Path("/etc/gpustack")
    """``GPUSTACK_CONF_DIR``: configuration, e.g. bundled charts under ``charts/``."""
    pci_class_prefixes: tuple[str, ...] = ("02", "03", "0b", "12")
    """``GPUSTACK_PCI_CLASS_PREFIXES``: PCI classes that mark an accelerator (device manager only)."""
    devices_group_id_with_memory: bool = False
    """``GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY``: append the VRAM size to accelerator group IDs."""
    node_name: str | None = None
    """``KUBERNETES_NODE_NAME``: the node a device manager runs on (names its NodeFeature and Devices)."""
    pod_name: str | None = None
    """``KUBERNETES_POD_NAME``."""
    pod_namespace: str = DEFAULT_NAMESPACE
    """``KUBERNETES_POD_NAMESPACE``: the system namespace (Secret gpustack-settings, Services, leases)."""
    pod_ip: str | None = None
    """``KUBERNETES_POD_IP``."""
    service_name: str = DEFAULT_SERVICE_NAME
    """``KUBERNETES_SERVICE_NAME``: the worker Service that routes the aggregated API and webhooks."""
    toolkits: Toolkits = field(default_factory=Toolkits)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """Parse ``environ`` (default ``os.environ``); raises ``EnvironmentValueError`` on a bad value."""
        read = _Reader(os.environ if environ is None else environ)
        defaults, kits = cls(), Toolkits()
        return cls(
            data_dir=read.path("GPUSTACK_DATA_DIR") or defaults.data_dir,
            conf_dir=read.path("GPUSTACK_CONF_DIR") or defaults.conf_dir,
            pci_class_prefixes=read.pci_classes("GPUSTACK_PCI_CLASS_PREFIXES", defaults.pci_class_prefixes),
            devices_group_id_with_memory=read.flag("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", False),
            node_name=read.name("KUBERNETES_NODE_NAME", _DNS_SUBDOMAIN, "node name (DNS subdomain)"),
            pod_name=read.name("KUBERNETES_POD_NAME", _DNS_SUBDOMAIN, "pod name (DNS subdomain)"),
            pod_namespace=read.name("KUBERNETES_POD_NAMESPACE", _DNS_LABEL, "namespace (DNS label)")
            or defaults.pod_namespace,
            pod_ip=read.ip("KUBERNETES_POD_IP"),
            service_name=read.name("KUBERNETES_SERVICE_NAME", _DNS_LABEL, "service name (DNS label)")
            or defaults.service_name,
            toolkits=Toolkits(
                rocm_home=read.path("ROCM_HOME", "ROCM_PATH") or kits.rocm_home,
                rocm_smi_lib_path=read.path("ROCM_SMI_LIB_PATH"),
                amd_smi_lib_path=read.path("AMD_SMI_LIB_PATH"),
                cann_home=read.path("CANN_HOME") or kits.cann_home,
                ascend_toolkit_home=read.path("ASCEND_TOOLKIT_HOME"),
                neuware_home=read.path("NEUWARE_HOME") or kits.neuware_home,
                ppu_home=read.path("PPU_HOME") or kits.ppu_home,
                corex_home=read.path("COREX_HOME") or kits.corex_home,
                maca_home=read.path("MACA_HOME") or kits.maca_home,
            ),
        )
