"""The deploy-time environment: defaults, overrides, and errors that name the variable and its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_operator.settings.environment import Environment, EnvironmentValueError, Toolkits


def test_defaults_from_an_empty_environment() -> None:
    env = Environment.from_environ({})
    assert env == Environment()
    assert (env.data_dir, env.conf_dir) == (Path("/var/lib/gpustack"), Path("/etc/gpustack"))
    assert env.pci_class_prefixes == ("02", "03", "0b", "12")
    assert env.devices_group_id_with_memory is False
    assert (env.pod_namespace, env.service_name) == ("gpustack-system", "gpustack-operator-worker")
    assert (env.node_name, env.pod_name, env.pod_ip) == (None, None, None)
    assert env.toolkits.rocm_home == Path("/opt/rocm")
    assert env.toolkits.maca_home == Path("/opt/maca")


def test_overrides() -> None:
    env = Environment.from_environ(
        {
            "GPUSTACK_DATA_DIR": "/data/gpustack",
            "GPUSTACK_PCI_CLASS_PREFIXES": "03, 12,0B",
            "GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true",
            "KUBERNETES_NODE_NAME": "gpu-node-1.example",
            "KUBERNETES_POD_NAMESPACE": "ops",
            "KUBERNETES_POD_IP": "fd00::7",
            "KUBERNETES_SERVICE_NAME": "worker",
            "ROCM_PATH": "/usr/rocm",
            "CANN_HOME": "/opt/Ascend",
            "MACA_HOME": "   ",  # blank means unset
        }
    )
    assert env.data_dir == Path("/data/gpustack")
    assert env.pci_class_prefixes == ("03", "12", "0b")
    assert env.devices_group_id_with_memory is True
    assert (env.node_name, env.pod_namespace, env.pod_ip, env.service_name) == (
        "gpu-node-1.example",
        "ops",
        "fd00::7",
        "worker",
    )
    assert env.toolkits == Toolkits(rocm_home=Path("/usr/rocm"), cann_home=Path("/opt/Ascend"))


def test_rocm_home_wins_over_rocm_path() -> None:
    env = Environment.from_environ({"ROCM_HOME": "/a", "ROCM_PATH": "/b"})
    assert env.toolkits.rocm_home == Path("/a")


@pytest.mark.parametrize(
    ("variable", "text"),
    [
        ("GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY", "yes"),
        ("GPUSTACK_PCI_CLASS_PREFIXES", "02,display"),
        ("KUBERNETES_POD_IP", "10.0.0.256"),
        ("KUBERNETES_POD_NAMESPACE", "Gpustack_System"),
        ("KUBERNETES_SERVICE_NAME", "a.b"),
        ("KUBERNETES_NODE_NAME", "node/1"),
    ],
)
def test_bad_values_name_the_variable_and_text(variable: str, text: str) -> None:
    with pytest.raises(EnvironmentValueError) as caught:
        Environment.from_environ({variable: text})
    assert (caught.value.variable, caught.value.text) == (variable, text)
    assert str(caught.value).startswith(f"{variable}={text!r}: ")


def test_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_POD_NAMESPACE", "from-process")
    assert Environment.from_environ().pod_namespace == "from-process"
