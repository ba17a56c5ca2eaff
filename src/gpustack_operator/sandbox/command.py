"""`gpustack-operator sandbox ...`: build, start, inspect and stop the local control plane."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from gpustack_operator.kube.definitions import NotEstablishedError
from gpustack_operator.sandbox import build, health, inventory
from gpustack_operator.sandbox.cluster import Sandbox, SandboxError

_HOME = build.REPO_ROOT if build.CHECKOUT_TOOLS.is_dir() else build.CACHE_ROOT
"""The source checkout, or (from an installed wheel) the cache directory."""
DEFAULT_RUN_DIR = Path(os.environ.get("GPUSTACK_SANDBOX_DIR", _HOME / ".sandbox"))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sandbox",
        help="a local Kubernetes control plane with Kueue and fake GPU nodes (for development and tests)",
        description=(
            "Runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler, Kueue, kwok and nfd-master "
            "on this machine (127.0.0.1 only), built from Go modules under tools/ and cached in "
            f"{build.CACHE_ROOT}. Fake nodes come from an inventory file "
            f"(default: {inventory.DEFAULT_INVENTORY}; bundled: {', '.join(inventory.bundled())})."
        ),
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=DEFAULT_RUN_DIR,
        help="where PKI, logs, etcd data, state and kubeconfig live (default: %(default)s; "
        "env GPUSTACK_SANDBOX_DIR)",
    )
    parser.add_argument(
        "--tools-dir",
        type=Path,
        default=None,
        help="the Go tool modules to build the control plane from (default: env "
        f"{build.TOOLS_ENV}, else tools/ of the source checkout this runs from)",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("build", help="build the control-plane binaries that are not cached yet").add_argument(
        "--force", action="store_true", help="rebuild even if cached"
    )
    up = actions.add_parser("up", help="build what is missing, start the cluster, write a kubeconfig")
    up.add_argument(
        "--inventory",
        type=_inventory,
        default=inventory.DEFAULT_INVENTORY,
        help="inventory YAML of fake nodes, or the name of a bundled one "
        f"({', '.join(inventory.bundled())}: one node per manufacturer) (default: %(default)s)",
    )
    actions.add_parser("status", help="show each component's health")
    actions.add_parser("down", help="stop every process `up` started (by PID)")
    parser.set_defaults(func=run)


def _inventory(text: str) -> Path:
    try:
        return inventory.resolve(text)
    except inventory.InventoryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    if args.tools_dir is not None:  # for this process and what it starts, as the variable would be
        os.environ[build.TOOLS_ENV] = str(args.tools_dir.resolve())
    try:
        if args.action in ("build", "up"):
            build.tools_dir()  # fail first, saying what to do, when there are no tool modules to build from
        if args.action == "build":
            build.build_all(force=args.force)
            return 0
        return asyncio.run(_run_async(args))
    except (
        SandboxError,
        build.BuildError,
        health.NotReadyError,
        inventory.InventoryError,
        NotEstablishedError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def link_kubectl(run_dir: Path) -> Path:
    """`<run dir>/bin/kubectl` -> the kubectl built with the control plane; returns the bin dir."""
    tools = run_dir / "bin"
    tools.mkdir(parents=True, exist_ok=True)
    link = tools / "kubectl"
    link.unlink(missing_ok=True)
    link.symlink_to(build.binary_path("kubectl"))
    return tools


async def _run_async(args: argparse.Namespace) -> int:
    if args.action == "up":
        build.build_all()
        box = Sandbox(args.run_dir, inventory_file=args.inventory)
        await box.up()
        tools = link_kubectl(box.run_dir)
        gpu_node = next((node.name for node in inventory.load(args.inventory) if node.gpus), "<node>")
        print(
            f"\nThe sandbox is up. Logs: {box.run_dir / 'logs'}\n"
            f"  export KUBECONFIG={box.kubeconfig} PATH={tools}:$PATH\n"
            "  kubectl get nodes\n"
            f"  kubectl describe node {gpu_node}   # capacity and the labels nfd-master published\n"
            "  gpustack-operator sandbox status\n"
            "  gpustack-operator sandbox down"
        )
        return 0
    box = Sandbox(args.run_dir)
    if args.action == "status":
        report = await box.status()
        if not report:
            print(f"no sandbox is running in {box.run_dir}")
            return 1
        for name, (ok, detail) in report.items():
            print(f"{name:<24} {'healthy' if ok else 'UNHEALTHY':<10} {detail}")
        print(f"kubeconfig: {box.kubeconfig}")
        print(f"kubectl:    {build.binary_path('kubectl')}")
        return 0 if all(ok for ok, _ in report.values()) else 1
    stopped = await box.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
