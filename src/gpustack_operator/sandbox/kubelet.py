"""A kubelet stand-in for one kwok node: the kubelet's half of the device plugin API, and nothing else.

kwok fakes nodes and pod lifecycles but has no device manager, so nothing would register our device
plugin, call its Allocate, or turn what it advertises into node capacity. This process does exactly that
for one node, over real gRPC on real unix sockets: it serves Registration on `<dir>/kubelet.sock`
(kubelet_registry), publishes capacity/allocatable on the Node (kubelet_status), admits the pods bound to
the node by calling GetPreferredAllocation and Allocate (kubelet_admission), serves PodResources v1 on
`<pod-resources-dir>/kubelet.sock` (kubelet_podresources), and reports on HTTP for probes and tests
(kubelet_http). It runs as its own process, as a kubelet does, so killing the device manager
looks to it like a plugin crash. Run: `python -m gpustack_operator.sandbox.kubelet --node NAME ...`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import connect
from gpustack_operator.kube.informer import Informer
from gpustack_operator.runtime import Supervisor, logs, run_until_signal
from gpustack_operator.sandbox import kubelet_http, kubelet_pods
from gpustack_operator.sandbox.kubelet_admission import Admission
from gpustack_operator.sandbox.kubelet_podresources import PodResourcesServer
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry
from gpustack_operator.sandbox.kubelet_status import NodeStatus

log = logging.getLogger(__name__)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kubelet-stand-in", description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True, help="the kwok Node this stand-in is the kubelet of")
    parser.add_argument(
        "--dir", type=Path, required=True, help="device-plugin directory (holds kubelet.sock)"
    )
    parser.add_argument(
        "--pod-resources-dir", type=Path, required=True, help="PodResources directory (holds kubelet.sock)"
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True, help="HTTP port on 127.0.0.1 (probes, records)")
    parser.add_argument(
        "--grace-period", type=float, default=300.0, help="seconds a dead plugin's capacity is kept"
    )
    parser.add_argument("--status-period", type=float, default=10.0, help="node status update period")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    client = await connect(args.kubeconfig)
    informer = Informer(client, resources.PODS, field_selector=kubelet_pods.field_selector(args.node))

    def changed() -> None:
        status.kick()
        admission.wake()

    registry = DeviceRegistry(args.dir, changed, grace_period=args.grace_period)
    status = NodeStatus(client, args.node, registry, period=args.status_period)
    admission = Admission(client, registry, informer.store.list)
    informer.add_handler(admission)
    pod_resources = PodResourcesServer(args.pod_resources_dir, admission, registry)
    runner = None

    async def setup(sup: Supervisor) -> None:
        nonlocal runner
        await registry.start()
        await pod_resources.start()
        runner = await kubelet_http.serve(kubelet_http.application(registry, admission), args.port)
        sup.spawn("informer:pods", informer.run, restart="on-failure")
        sup.spawn("admission", admission.run, restart="on-failure")
        sup.spawn("node-status", status.run, restart="on-failure")
        log.info("kubelet stand-in node=%s dir=%s port=%d", args.node, args.dir, args.port)

    try:
        return await run_until_signal(setup)
    finally:
        await pod_resources.stop()
        await registry.stop()
        if runner is not None:
            await runner.cleanup()
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    logs.configure()
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
