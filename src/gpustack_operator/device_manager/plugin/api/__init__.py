"""The kubelet device plugin API v1beta1 (generated from api.proto) as the rest of the code reaches it.

The generated modules carry typed stubs (`api_pb2.pyi`, `api_pb2_grpc.pyi`, made with them by
scripts/gen_deviceplugin.py), so mypy checks every message built and every call made; the rest of the
code imports `pb` (messages) and `rpc` (stubs, servicers, servicer registration) from this package.
Constants mirror k8s.io/kubelet `pkg/apis/deviceplugin/v1beta1/constants.go`.
"""

from __future__ import annotations

from typing import Final

from gpustack_operator.device_manager.plugin.api import api_pb2 as pb
from gpustack_operator.device_manager.plugin.api import api_pb2_grpc as rpc

__all__ = ["pb", "rpc"]

VERSION: Final = "v1beta1"
HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"
DEVICE_PLUGIN_PATH: Final = "/var/lib/kubelet/device-plugins/"
KUBELET_SOCKET: Final = DEVICE_PLUGIN_PATH + "kubelet.sock"
CHECKPOINT_FILE: Final = "kubelet_internal_checkpoint"
PRE_START_CONTAINER_TIMEOUT_S: Final = 30.0
