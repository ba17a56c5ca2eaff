"""The kubelet PodResources API v1 (generated from api.proto) as the rest of the code reaches it.

As with the device plugin API, the generated modules carry no type information, so they are handed out as
`Any` here and nowhere else. Constants mirror k8s.io/kubelet `pkg/apis/podresources/constants.go`.
"""

from __future__ import annotations

from typing import Any, Final

from gpustack_operator.device_manager.podresources.api import api_pb2 as _pb2
from gpustack_operator.device_manager.podresources.api import api_pb2_grpc as _pb2_grpc

pb: Any = _pb2
"""Messages: `pb.ListPodResourcesRequest`, `pb.PodResources`, `pb.ContainerDevices`, ..."""
rpc: Any = _pb2_grpc
"""`rpc.PodResourcesListerStub`, `rpc.add_PodResourcesListerServicer_to_server`, ..."""

POD_RESOURCES_DIR: Final = "/var/lib/kubelet/pod-resources/"
POD_RESOURCES_SOCKET: Final = POD_RESOURCES_DIR + "kubelet.sock"
