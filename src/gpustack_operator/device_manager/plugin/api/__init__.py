"""The kubelet device plugin API v1beta1 (generated from api.proto) as the rest of the code reaches it.

Messages are built at import time from a serialized descriptor, so a type checker cannot see them and
protobuf ships no stubs; the generated modules are therefore handed out as `Any` here, in one place, and
every other module imports `pb` (messages) and `rpc` (stubs, servicer registration) from this package.
Constants mirror k8s.io/kubelet `pkg/apis/deviceplugin/v1beta1/constants.go`.
"""

from __future__ import annotations

from typing import Any, Final

from gpustack_operator.device_manager.plugin.api import api_pb2 as _pb2
from gpustack_operator.device_manager.plugin.api import api_pb2_grpc as _pb2_grpc

pb: Any = _pb2
"""Messages: `pb.Device`, `pb.AllocateRequest`, ..."""
rpc: Any = _pb2_grpc
"""`rpc.DevicePluginStub`, `rpc.add_DevicePluginServicer_to_server`, `rpc.RegistrationStub`, ..."""

VERSION: Final = "v1beta1"
HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
KUBELET_SOCKET: Final = DEVICE_PLUGIN_PATH + "kubelet.sock"
CHECKPOINT_FILE: Final = "kubelet_internal_checkpoint"
PRE_START_CONTAINER_TIMEOUT_S: Final = 30.0
