"""The device manager's PodResources client: ask the kubelet which pods it is admitting or running.

An Allocate call names no pod. The kubelet adds a pod to its pod manager before it admits it and admits one
pod at a time (HandlePodAdditions in pkg/kubelet/kubelet.go), and PodResources List reports exactly the
pod manager's active pods; so during an Allocate the pods it lists are the ones admitted earlier and the
one being admitted now, which is what lets the allocator identify the pod exactly. The socket lives in the
kubelet's `pod-resources/` directory; a kubelet restart replaces it, so a failed call, or a call that finds
the socket gone, drops the channel and the next call dials again. When the socket is missing or does not
answer, `active()` returns None and the allocator falls back to its ordering heuristic; each change between
the two is logged once.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from gpustack_operator.device_manager.plugin.server import LOCAL_POOL
from gpustack_operator.device_manager.podresources.api import pb, rpc
from gpustack_operator.device_manager.podresources.model import KubeletPods, from_list

log = logging.getLogger(__name__)


class PodResourcesClient:
    """`active()`: the kubelet's active pods with their committed devices, or None when it cannot say."""

    def __init__(self, socket: Path, timeout: float = 5.0) -> None:
        self.socket = socket
        self.timeout = timeout
        self._channel: grpc.aio.Channel | None = None
        self._available: bool | None = None

    async def active(self) -> KubeletPods | None:
        if not self.socket.exists():
            # The kubelet is gone or restarting: drop the channel too, or the next call would go out on
            # the old connection (in reconnect backoff) and fail although the new kubelet is listening.
            await self.close()
            self._note(False, f"no socket at {self.socket}")
            return None
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(f"unix://{self.socket}", options=[LOCAL_POOL])
        try:
            response = await rpc.PodResourcesListerStub(self._channel).List(
                pb.ListPodResourcesRequest(), timeout=self.timeout
            )
        except grpc.aio.AioRpcError as err:
            await self.close()
            self._note(False, f"List failed: {err.code().name} {err.details()}")
            return None
        self._note(True, str(self.socket))
        return from_list(response)

    async def close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    def _note(self, available: bool, detail: str) -> None:
        if available == self._available:
            return
        self._available = available
        if available:
            log.info("kubelet PodResources API answers at %s: Allocate identifies pods exactly", detail)
        else:
            log.warning(
                "kubelet PodResources API unavailable (%s): Allocate falls back to the oldest pending pod",
                detail,
            )
