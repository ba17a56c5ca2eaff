"""Resident memory of a serving device manager (8 cards, 100 Pods on its node) against a bare interpreter.

Run: `.venv/bin/python -m tests.bench.bench_device_manager [--settle 20]` (about two minutes: it starts
its own sandbox with one 8 x H100 node and one CPU node).

`device-manager serve` runs as a DaemonSet on every GPU node, so its footprint is paid once per node. The
sandbox starts the node's device manager as it does for tests (simulated backend, real gRPC to the kubelet
stand-in, `--kubeconfig`); the script puts 100 Pods on the node (8 holding a card each through the real
scheduler and Allocate, 92 CPU-only bound to it directly), lets the manager settle and reads its VmRSS.
Then it restarts the same manager as a DaemonSet Pod runs it: in-cluster configuration, i.e. the
`KUBERNETES_SERVICE_*` variables and a service-account token (a TokenRequest for a ServiceAccount bound to
cluster-admin) with the cluster CA, in a directory standing in for the Pod's
`/var/run/secrets/kubernetes.io/serviceaccount` mount; and reads its VmRSS again after it has re-listed the
100 Pods and settled.

Baseline, same run, same machine: the VmRSS of a bare `python -c` with the same interpreter, read by
itself. Printed: each VmRSS in MB with its anonymous part (the rest is mapped from files: the interpreter,
OpenSSL, grpc's library), its ratio to the baseline and to the goal (issue 14: ≤ 60 MB with 8 cards and 100
Pods).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tests.helpers import eventually
from tests.integration.worker_support import service_account_mount as mount

from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.resources import Resource
from gpustack_operator.sandbox import inventory
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.nodeagents import device_manager_name

NODE = "h100-0"
CPU_NODE = "cpu-0"
GOAL_MB = 60.0
SA_NAMESPACE = "kube-system"
SA_NAME = "bench-device-manager"
IN_CLUSTER = (
    "import sys; from pathlib import Path; import gpustack_operator.kube.incluster as c; "
    "c.SERVICE_ACCOUNT_DIR = Path(sys.argv[1]); from gpustack_operator.cli import main; "
    "sys.exit(main(sys.argv[2:]))"
)
"""The device manager's own command line, with the service-account directory moved to the stand-in mount."""
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)


READ_OWN_STATUS = "import sys; sys.stdout.write(open('/proc/self/status').read())"
"""What `python -c pass` holds, read by the bare interpreter itself (a parent's ru_maxrss of a child
would count the parent's pages the child had before exec)."""


def memory_mb(status: str) -> Memory:
    """VmRSS and its anonymous part (heap, stacks) from a /proc/<pid>/status text, in MB (MiB)."""
    fields = {line.split(":")[0]: line.split()[1] for line in status.splitlines() if line.endswith(" kB")}
    return Memory(int(fields["VmRSS"]) / 1024, int(fields["RssAnon"]) / 1024)


@dataclass(frozen=True)
class Memory:
    rss: float
    anonymous: float
    """Of rss, what is not mapped from files (shared libraries and the interpreter count as files)."""


def process_memory(pid: int) -> Memory:
    return memory_mb(Path(f"/proc/{pid}/status").read_text())


def bare_python() -> Memory:
    out = subprocess.run([sys.executable, "-c", READ_OWN_STATUS], capture_output=True, text=True, check=True)
    return memory_mb(out.stdout)


async def settled(pid: int, seconds: float) -> Memory:
    """The largest VmRSS seen over `seconds` (sampled every half second): the idle footprint, not a dip."""
    peak = Memory(0.0, 0.0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = process_memory(pid)
        peak = max(peak, now, key=lambda m: m.rss)
        await asyncio.sleep(0.5)
    return peak


def pod(name: str, *, gpu: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if gpu:  # scheduled, so the kubelet stand-in calls Allocate
        spec["nodeSelector"] = {"kubernetes.io/hostname": NODE}
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    else:
        spec["nodeName"] = NODE
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def hundred_pods(kube: Client, namespace: str) -> None:
    """8 pods holding one card each (allocated and annotated), 92 CPU-only pods, all on NODE."""
    await kube.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    for i in range(100):
        await kube.create(resources.PODS, pod(f"p-{i:03d}", gpu=i < 8), namespace)

    async def allocated() -> bool:
        pods = await kube.list(resources.PODS, namespace)
        held = [
            p for p in pods if ACCELERATOR_ALLOCATED_ANNOTATION in (p["metadata"].get("annotations") or {})
        ]
        return len(pods) == 100 and len(held) == 8

    await eventually(allocated, timeout=180, interval=1.0, what="8 pods allocated a card, 100 on the node")


async def service_account_mount(kube: Client, box: Sandbox, directory: Path) -> None:
    """token + ca.crt as a Pod of a cluster-admin ServiceAccount would see them."""
    await kube.create(resources.SERVICEACCOUNTS, {"metadata": {"name": SA_NAME}}, SA_NAMESPACE)
    binding = {
        "metadata": {"name": SA_NAME},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
    }
    await kube.create(CLUSTER_ROLE_BINDINGS, binding)
    await mount(kube, box.certs.ca_crt, directory, SA_NAME, SA_NAMESPACE)


def in_cluster_argv(argv: list[str], host: str, mount: Path) -> list[str]:
    """The sandbox's device-manager command line, run as a Pod: in-cluster configuration, no kubeconfig."""
    start = argv.index("-m")  # env VAR=... python -m gpustack_operator.cli device-manager serve ...
    flags = argv[start + 2 :]
    at = flags.index("--kubeconfig")
    del flags[at : at + 2]
    server_host, port = host.removeprefix("https://").rsplit(":", 1)
    env = [f"KUBERNETES_SERVICE_HOST={server_host}", f"KUBERNETES_SERVICE_PORT={port}"]
    return [*argv[: start - 1], *env, argv[start - 1], "-c", IN_CLUSTER, str(mount), *flags]


def report(what: str, mb: Memory, baseline: Memory) -> None:
    print(
        f"{what:<56} {mb.rss:6.1f} MB ({mb.anonymous:5.1f} anon)  "
        f"×{mb.rss / baseline.rss:4.1f} bare python   {mb.rss / GOAL_MB:5.2f} of goal"
    )


@contextlib.asynccontextmanager
async def one_gpu_node_sandbox() -> AsyncIterator[Sandbox]:
    run_dir = Path(tempfile.mkdtemp(prefix="bd-", dir="/tmp"))  # unix socket paths below it must stay short
    nodes = yaml.safe_load(inventory.DEFAULT_INVENTORY.read_text())["nodes"]
    chosen = run_dir / "inventory.yaml"
    chosen.write_text(yaml.safe_dump({"nodes": [n for n in nodes if n["name"] in (NODE, CPU_NODE)]}))
    box = Sandbox(run_dir, inventory_file=chosen, progress=lambda text: print(text, flush=True))
    await box.up()
    try:
        yield box
    finally:
        await box.down()


async def main(settle: float) -> None:
    baseline = bare_python()
    async with one_gpu_node_sandbox() as box:
        assert box.state is not None
        name = device_manager_name(NODE)
        kube = await connect(box.kubeconfig)
        try:
            await hundred_pods(kube, "bench-dm")
            with_kubeconfig = await settled(box.state.pids[name], settle)
            await service_account_mount(kube, box, box.run_dir / "serviceaccount")
            box.state.argv[name] = in_cluster_argv(
                box.state.argv[name], kube.host, box.run_dir / "serviceaccount"
            )
            print(f"restarting {name} in-cluster: {shlex.join(box.state.argv[name])}", flush=True)
            await box.restart(name)
            in_cluster = await settled(box.state.pids[name], settle)
        finally:
            await kube.close()
    print(f"\n{'':<56} {'RSS':>6}                 ratio to baseline  to goal ({GOAL_MB:.0f} MB)")
    report("baseline: bare python -c", baseline, baseline)
    report("device-manager serve, --kubeconfig (8 cards, 100 pods)", with_kubeconfig, baseline)
    report("device-manager serve, in-cluster (8 cards, 100 pods)", in_cluster, baseline)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to watch RSS after each start")
    asyncio.run(main(parser.parse_args().settle))
