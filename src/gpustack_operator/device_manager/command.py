"""`gpustack-operator device-manager ...` (alias `dm`): detect, monitor and (see below) serve.

`detect` prints the Devices `spec.groups` this node would report, as YAML; `monitor` prints health and
utilisation every period, and with `--report` also publishes the NodeFeature/Devices and rebuilds the
ledger, as the DaemonSet does. The backend flags are shared by every action, so `serve` detects
exactly what `detect` shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import yaml

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager import serve as serve_module
from gpustack_operator.device_manager.detector.hardware import HardwareBackend
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.model import Backend, DetectionError, Metrics
from gpustack_operator.device_manager.monitor import DetectLoop, format_metrics
from gpustack_operator.device_manager.reporting import Reporter
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.kube.client import connect
from gpustack_operator.kube.errors import KubeConfigError
from gpustack_operator.rules.capacity.nodes import sliced_capacities
from gpustack_operator.rules.environ import DEFAULT_ENVIRON
from gpustack_operator.rules.naming.labels import construct_acceleratable_node_labels
from gpustack_operator.rules.naming.manufacturers import ManufacturerConfigError, known_manufacturers
from gpustack_operator.rules.naming.manufacturers import manufacturer as lookup_manufacturer
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for
from gpustack_operator.runtime import logs
from gpustack_operator.settings.environment import Environment, EnvironmentValueError

BACKENDS = ("auto", "nvml", "pci", "simulated")


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that choose what to detect (shared by detect, monitor and serve)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="auto: vendor libraries, PCI facts where one is missing; nvml: NVIDIA through NVML only; "
        "pci: PCI facts only; simulated: an inventory file (default: %(default)s)",
    )
    parser.add_argument("--inventory", type=Path, help="inventory YAML for --backend simulated")
    parser.add_argument("--faults", type=Path, help="faults file for --backend simulated (re-read each time)")
    parser.add_argument(
        "--node-name",
        default=os.environ.get("KUBERNETES_NODE_NAME"),
        help="this node's name (default: env KUBERNETES_NODE_NAME)",
    )
    parser.add_argument(
        "--manufacturer",
        action="append",
        choices=known_manufacturers(),
        help="detect only this manufacturer; repeatable (default: all nine). `serve` told one publishes "
        "nothing until its cards have been detected once (see --no-fast-failed)",
    )
    parser.add_argument(
        "--no-pci-check", action="store_true", help="ask vendor libraries even when no card is on the PCI bus"
    )


def backend_from_args(args: argparse.Namespace, environment: Environment) -> Backend:
    """The backend the flags ask for; ValueError naming the missing flag."""
    manufacturers = args.manufacturer or list(known_manufacturers())
    if args.backend == "simulated":
        if args.inventory is None or not args.node_name:
            raise ValueError(
                "--backend simulated needs --inventory and --node-name (or KUBERNETES_NODE_NAME)"
            )
        return SimulatedBackend(args.inventory, args.node_name, args.faults)
    return HardwareBackend(
        ["nvidia"] if args.backend == "nvml" else manufacturers,
        use_libraries=args.backend != "pci",
        require_library=args.backend == "nvml",
        pci_check=not args.no_pci_check,
        class_prefixes=environment.pci_class_prefixes,
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "device-manager",
        aliases=["dm"],
        help="the per-node agent: accelerator detection, reporting and the kubelet device plugin",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    detect = actions.add_parser("detect", help="print the detected Devices spec.groups as YAML")
    add_backend_flags(detect)
    detect.add_argument(
        "--labels",
        action="store_true",
        help="also print the NodeFeature labels these groups give and the .sliced.* capacities the worker "
        "publishes once the device plugin advertises every sliceable card's tokens",
    )
    detect.set_defaults(func=run_detect)
    monitor = actions.add_parser("monitor", help="print health and utilisation every period")
    add_backend_flags(monitor)
    monitor.add_argument("--period", type=float, default=15.0, help="seconds between readings (default: 15)")
    monitor.add_argument("--count", type=int, default=0, help="stop after this many readings (0: never)")
    monitor.add_argument(
        "--report", action="store_true", help="also publish NodeFeature/Devices and rebuild the ledger"
    )
    monitor.add_argument("--kubeconfig", type=Path, help="kubeconfig for --report (default: in-cluster)")
    monitor.set_defaults(func=run_monitor)
    # ==== `serve` (the kubelet device plugin, issue 5 items 3-4) is registered here: ====
    serve = actions.add_parser(
        "serve", help="detect and report, and serve the kubelet device plugin (what the DaemonSet runs)"
    )
    add_backend_flags(serve)
    serve_module.add_flags(serve)
    serve.set_defaults(func=run_serve)
    # ==== end of `serve` ====


def _setup(args: argparse.Namespace) -> tuple[Environment, Backend]:
    environment = Environment.from_environ()
    return environment, backend_from_args(args, environment)


def run_detect(args: argparse.Namespace) -> int:
    try:
        _, backend = _setup(args)
        groups = group_cards(backend.detect())
    except (ValueError, DetectionError, EnvironmentValueError, ManufacturerConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not groups:
        print(f"note: {_why_none(args)}", file=sys.stderr)
    shown: dict[str, object] = {"groups": groups}
    if args.labels:
        shown["labels"] = construct_acceleratable_node_labels(groups)
        shown["capacities"] = sliced_capacities(advertised_sliced_tokens(groups), groups)
    sys.stdout.write(yaml.safe_dump(shown, sort_keys=False))
    return 0


def _why_none(args: argparse.Namespace) -> str:
    """What an empty `detect` means for the flags given (stdout stays the YAML a script reads)."""
    if args.backend == "simulated":
        return f"the inventory lists no card for node {args.node_name}"
    makers = ", ".join(args.manufacturer or ["any manufacturer"])
    if args.backend == "nvml" and args.no_pci_check:
        return "NVML lists no card"
    if args.no_pci_check:
        return f"no card of {makers} was found by its library or on the PCI bus"
    where = "NVIDIA" if args.backend == "nvml" else makers
    on_bus = f"no accelerator of {where} is on the PCI bus (/sys/bus/pci/devices)"
    if args.backend == "pci":
        return on_bus
    return f"{on_bus}, so no vendor library was asked; --no-pci-check asks them anyway"


def advertised_sliced_tokens(groups: list[DevicesGroup]) -> dict[str, str]:
    """`<base>.sliced` capacity the device plugin gives the node: `maxSize` tokens per sliceable card."""
    tokens: dict[str, int] = {}
    for group in groups:
        info = lookup_manufacturer(group.get("manufacturer", ""))
        sliced = (group.get("acceleratorsFeature") or {}).get("logicalSliced")
        slices = sliced.get("maxSize", 0) if sliced else 0
        if info is not None and slices > 0:
            name = resource_name_for(info.resource_name, ResourceKind.SLICED)
            tokens[name] = tokens.get(name, 0) + slices * len(group.get("accelerators") or [])
    return {name: str(count) for name, count in tokens.items()}


async def _monitor(args: argparse.Namespace, environment: Environment, backend: Backend) -> None:
    client = await connect(args.kubeconfig) if args.report else None
    reporter = Reporter(client, args.node_name, environment.pod_namespace) if client else None
    loop = DetectLoop(backend, reporter, period=args.period) if reporter else None
    try:
        for reading in range(1, args.count + 1 if args.count > 0 else sys.maxsize):
            if loop is not None:
                await loop.step()
            print(format_metrics(await asyncio.to_thread(_metrics, backend)), flush=True)
            if reading != args.count:
                await asyncio.sleep(args.period)
    finally:
        if client is not None:
            await client.close()


def _metrics(backend: Backend) -> list[Metrics]:
    """The backend's readings, or health alone from detection when it has no metrics."""
    read = getattr(backend, "metrics", None)
    if callable(read):
        readings: list[Metrics] = read()
        return readings
    return [Metrics(c.manufacturer, c.uuid, c.index, c.healthy) for c in backend.detect()]


def run_monitor(args: argparse.Namespace) -> int:
    try:
        environment, backend = _setup(args)
        if args.report and not args.node_name:
            raise ValueError("--report needs --node-name (or KUBERNETES_NODE_NAME)")
        asyncio.run(_monitor(args, environment, backend))
    except (ValueError, DetectionError, EnvironmentValueError, ManufacturerConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """`serve`: see device_manager.serve."""
    logs.configure()
    try:
        environment, backend = _setup(args)
        options = serve_module.options_from_args(args, environment)
    except (ValueError, DetectionError, EnvironmentValueError, ManufacturerConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    DEFAULT_ENVIRON.freeze()  # validated above; a DaemonSet Pod's environment cannot change
    try:
        return asyncio.run(serve_module.serve(options, backend))
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
