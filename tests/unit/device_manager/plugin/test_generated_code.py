"""The committed kubelet API code and its typed stubs are what the generators make of the protos today."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from gpustack_operator.device_manager.plugin.api import pb, rpc
from gpustack_operator.device_manager.podresources.api import pb as podresources_pb

SCRIPT = Path(__file__).resolve().parents[4] / "scripts" / "gen_deviceplugin.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_deviceplugin", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_generated_code_matches_a_fresh_generation() -> None:
    diffs = _script().stale()
    assert not diffs, "stale generated code; run scripts/gen_deviceplugin.py:\n" + "\n".join(diffs.values())


def test_services_keep_the_kubelets_wire_names() -> None:
    services = pb.DESCRIPTOR.services_by_name
    assert services["Registration"].full_name == "v1beta1.Registration"
    assert services["DevicePlugin"].full_name == "v1beta1.DevicePlugin"
    assert hasattr(rpc, "add_DevicePluginServicer_to_server")
    lister = podresources_pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert lister.full_name == "v1.PodResourcesLister"
    assert [m.name for m in lister.methods] == ["List", "GetAllocatableResources", "Get"]


def test_proto_header_names_its_source_and_no_gogo_options_remain() -> None:
    proto = (SCRIPT.parents[1] / "src/gpustack_operator/device_manager/plugin/api/api.proto").read_text()
    assert "k8s.io/kubelet@v0.37.2" in proto
    assert "gogoproto." not in proto
    assert "package v1beta1;" in proto


def test_typed_stubs_declare_every_message_and_service() -> None:
    for package, module in (("plugin", pb), ("podresources", podresources_pb)):
        api = SCRIPT.parents[1] / "src/gpustack_operator/device_manager" / package / "api"
        messages = (api / "api_pb2.pyi").read_text()
        services = (api / "api_pb2_grpc.pyi").read_text()
        for name in module.DESCRIPTOR.message_types_by_name:
            assert f"\nclass {name}(_message.Message):" in messages, (package, name)
        for name in module.DESCRIPTOR.services_by_name:
            assert f"\nclass {name}Stub:" in services, (package, name)
            assert f"\nclass {name}Servicer(" in services, (package, name)
