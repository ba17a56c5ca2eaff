"""The kubelet PodResources API v1 (generated from api.proto) as the rest of the code reaches it.

As with the device plugin API, the generated modules come with typed stubs and are reached as `pb` and
`rpc` from here. Constants mirror k8s.io/kubelet `pkg/apis/podresources/constants.go`.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.podresources.api import api_pb2 as pb
from gpustack_operator.device_manager.podresources.api import api_pb2_grpc as rpc

__all__ = ["pb", "rpc"]

POD_RESOURCES_DIR: Final = "/var/lib/kubelet/pod-resources/"
POD_RESOURCES_SOCKET: Final = POD_RESOURCES_DIR + "kubelet.sock"
