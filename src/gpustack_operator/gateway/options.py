"""The worker-gateway's options and their validation (contract §9), apart from argparse so tests and
the composition root share one place that says what a good value is."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_SOCKET",
    "ConnectionMode",
    "GatewayOptions",
    "OptionError",
    "parse_duration",
]

DEFAULT_SOCKET = Path("/var/lib/gpustack/gpustack-operator-worker-gateway.sock")
MIN_RESYNC = 300.0
MIN_TIMEOUT = 10.0
MIN_QPS = 10.0
MIN_BURST = 10

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class OptionError(ValueError):
    """A bad option value; the message names the flag."""


class ConnectionMode(enum.StrEnum):
    """How the gateway reaches cluster <c>: through the GPUStack server's proxy, or the local kubeconfig."""

    GPUSTACK_API = "gpustack-api"
    LOOPBACK = "loopback"


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (`5m`, `1h30m`, `10s`, `250ms`); a bare number is seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match[1]) * _UNITS[match[2]]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"{text!r} is not a duration (e.g. 10s, 5m, 1h30m)")
    return total


@dataclass(frozen=True)
class GatewayOptions:
    """Everything the gateway runs from; `check()` refuses what contract §9 refuses."""

    mode: ConnectionMode = ConnectionMode.GPUSTACK_API
    gpustack_api_port: int = 30080
    gpustack_api_scheme: str | None = None
    """http or https; None: https when the port is 443, else http."""
    kubeconfig: Path | None = None
    """loopback: the kubeconfig whose context named after each cluster reaches it (None: in-cluster,
    every cluster is the local one)."""
    resync: float = 600.0
    timeout: float = 30.0
    qps: float = 20.0
    burst: int = 30
    unix_socket: Path = DEFAULT_SOCKET
    secure_port: int = 0
    bind_address: str = "127.0.0.1"
    cert_dir: Path | None = None
    probe_interval: float = 5.0
    """Seconds between two checks that a synced cluster still answers (not a flag)."""

    def check(self) -> None:
        """Raise OptionError naming the first flag whose value contract §9 refuses."""
        if self.resync < MIN_RESYNC:
            raise OptionError(f"--resync-period must be at least 5m, got {self.resync:g}s")
        if self.timeout < MIN_TIMEOUT:
            raise OptionError(f"--worker-conn-timeout must be at least 10s, got {self.timeout:g}s")
        if self.qps < MIN_QPS:
            raise OptionError(f"--worker-conn-qps must be at least 10, got {self.qps:g}")
        if self.burst < MIN_BURST:
            raise OptionError(f"--worker-conn-burst must be at least 10, got {self.burst}")
        if self.burst <= self.qps:
            raise OptionError(
                f"--worker-conn-burst ({self.burst}) must be greater than --worker-conn-qps ({self.qps:g})"
            )
        if not 0 < self.gpustack_api_port < 65536:
            raise OptionError(f"--worker-conn-gpustack-api-port {self.gpustack_api_port} is not a TCP port")
        if self.gpustack_api_scheme not in (None, "http", "https"):
            raise OptionError(
                f"--worker-conn-gpustack-api-scheme must be http or https, got {self.gpustack_api_scheme!r}"
            )
        if not 0 <= self.secure_port < 65536:
            raise OptionError(f"--secure-port {self.secure_port} is not a TCP port (0-65535)")

    @property
    def scheme(self) -> str:
        return self.gpustack_api_scheme or ("https" if self.gpustack_api_port == 443 else "http")

    def proxy_host(self, cluster: str) -> str:
        """gpustack-api mode: the rest host of `cluster` behind the GPUStack server's proxy."""
        return f"{self.scheme}://localhost:{self.gpustack_api_port}/v2/clusters/{cluster}/proxy"
