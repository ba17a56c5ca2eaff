"""What runs beside each fake GPU node: its kubelet stand-in and its device manager, as two processes.

On a real node the kubelet and the device manager DaemonSet pod are separate processes that meet on the
device-plugin directory; the sandbox keeps that shape so the plugin's registration, re-registration after a
crash, and Allocate all cross a real process boundary. Per inventory node with GPUs: a stand-in (started
first: it owns `kubelet.sock`) and `device-manager serve --backend simulated` on the same directory, with
the node's data dir and a faults file tests can write. Both are started and stopped by PID like every
other sandbox component; the device manager counts as ready once the stand-in reports all its resources.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.plugin.handler import ResourceSpec
from gpustack_operator.device_manager.plugin.server import MAX_SOCKET_PATH, socket_name
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.resources import (
    ResourceKind,
    resource_name_for,
    visibility_resource_name,
)
from gpustack_operator.sandbox import process
from gpustack_operator.sandbox.inventory import InventoryNode

MONITOR_PERIOD = "5s"


@dataclass(frozen=True)
class Agent:
    """One process: its sandbox name, command line and readiness URL."""

    name: str
    argv: list[str]
    probe: str
    metrics: str | None = None
    """The agent's Prometheus endpoint, when it serves one (the device managers)."""


def kubelet_name(node: str) -> str:
    return f"kubelet-{node}"


def device_manager_name(node: str) -> str:
    return f"device-manager-{node}"


def node_dir(run_dir: Path, node: str) -> Path:
    return run_dir / "nodes" / node


def plugin_dir(run_dir: Path, node: str) -> Path:
    return node_dir(run_dir, node) / "plugins"


def socket_path_problem(run_dir: Path, nodes: list[InventoryNode]) -> str | None:
    """Why the run directory is too deep for the plugins' unix sockets (107 bytes at most), or None."""
    for node in nodes:
        for gpu in node.gpus:
            for mode in set(DeviceAllocationMode) - {DeviceAllocationMode.NONE}:
                spec = ResourceSpec(name="", manufacturer=gpu.manufacturer, mode=mode)
                path = plugin_dir(run_dir, node.name) / socket_name(spec)
                if len(str(path).encode()) > MAX_SOCKET_PATH:
                    return (
                        f"the device-plugin socket {path} would be longer than {MAX_SOCKET_PATH} bytes, "
                        "the unix socket limit; choose a shorter --run-dir"
                    )
    return None


def pod_resources_dir(run_dir: Path, node: str) -> Path:
    return node_dir(run_dir, node) / "pod-resources"


def faults_file(run_dir: Path, node: str) -> Path:
    """Write `{unhealthy: [uuid], missing: [uuid]}` here to fault the node's simulated cards (re-read every
    MONITOR_PERIOD; `device_manager.simulated.Faults.save` writes it atomically); remove a UUID to heal it."""
    return node_dir(run_dir, node) / "faults.yaml"


def expected_resources(node: InventoryNode) -> list[str]:
    """Every resource the node's device manager registers (all its GPUs' vendors slice, or not)."""
    names: list[str] = []
    known = manufacturers()
    for gpu in node.gpus:
        info = known[gpu.manufacturer]
        kinds = [ResourceKind.EXCLUSIVE, ResourceKind.SHARED]
        if info.max_logical_slices > 0:
            kinds.append(ResourceKind.SLICED)
        names += [resource_name_for(info.resource_name, kind) for kind in kinds]
        names.append(visibility_resource_name(gpu.manufacturer))
    return sorted(set(names))


def agents(run_dir: Path, kubeconfig: Path, inventory_file: Path, node: InventoryNode) -> tuple[Agent, Agent]:
    """The stand-in and the device manager of one GPU node."""
    port = process.free_port()
    directory = plugin_dir(run_dir, node.name)
    kubelet = Agent(
        kubelet_name(node.name),
        [
            *(sys.executable, "-m", "gpustack_operator.sandbox.kubelet"),
            *("--node", node.name, "--dir", str(directory), "--kubeconfig", str(kubeconfig)),
            *("--pod-resources-dir", str(pod_resources_dir(run_dir, node.name))),
            *("--port", str(port)),
        ],
        f"http://127.0.0.1:{port}/healthz",
    )
    ready = urlencode([("resource", name) for name in expected_resources(node)])
    metrics_port = process.free_port()
    manager = Agent(
        device_manager_name(node.name),
        [
            *("env", f"GPUSTACK_DATA_DIR={node_dir(run_dir, node.name) / 'data'}"),
            *(sys.executable, "-m", "gpustack_operator.cli", "device-manager", "serve"),
            *("--backend", "simulated", "--inventory", str(inventory_file.resolve())),
            *("--faults", str(faults_file(run_dir, node.name)), "--node-name", node.name),
            *("--kube-socket", str(directory / "kubelet.sock"), "--kubeconfig", str(kubeconfig)),
            *("--pod-resources-socket", str(pod_resources_dir(run_dir, node.name) / "kubelet.sock")),
            *("--monitor-period", MONITOR_PERIOD),
            *("--metrics-bind-address", f"127.0.0.1:{metrics_port}"),
        ],
        f"http://127.0.0.1:{port}/readyz?{ready}",
        f"http://127.0.0.1:{metrics_port}/metrics",
    )
    return kubelet, manager
