"""`gpustack-operator device-manager` (and `dm`) as a user runs it."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from gpustack_operator.cli import main
from gpustack_operator.device_manager import command
from gpustack_operator.device_manager.detector.ascend import AscendDetector
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from tests.unit.device_manager.recorded import build_sysfs
from tests.unit.device_manager.recorded_dcmi import A2_PCI, ATLAS_800T_A2, opener, record_dcmi, toolkit

INVENTORY = str(Path(__file__).parents[3] / "src/gpustack_operator/sandbox/inventory.yaml")


@pytest.mark.parametrize("command", ["device-manager", "dm"])
def test_detect_prints_the_groups_as_yaml(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main([command, "detect", "--backend", "simulated", "--inventory", INVENTORY, "--node-name", "h100-0"])
        == 0
    )
    groups = yaml.safe_load(capsys.readouterr().out)["groups"]
    assert [(g["id"], len(g["accelerators"])) for g in groups] == [("h100-80gb-hbm3", 8)]


def test_detect_on_a_machine_without_cards_prints_no_groups_and_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["dm", "detect", "--backend", "pci", "--manufacturer", "nvidia"]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out) == {"groups": []}
    assert err == "note: no accelerator of nvidia is on the PCI bus (/sys/bus/pci/devices)\n"
    assert main(["dm", "detect", "--backend", "nvml"]) == 0
    err = capsys.readouterr().err
    assert "no accelerator of NVIDIA is on the PCI bus" in err
    assert err.endswith("so no vendor library was asked; --no-pci-check asks them anyway\n")


def test_simulated_backend_without_inventory_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_NODE_NAME", raising=False)
    assert main(["dm", "detect", "--backend", "simulated", "--node-name", "x"]) == 1
    assert "--inventory" in capsys.readouterr().err


def test_node_name_defaults_to_the_kubernetes_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_NODE_NAME", "a10-0")
    assert main(["dm", "detect", "--backend", "simulated", "--inventory", INVENTORY]) == 0
    assert "NVIDIA A10" in capsys.readouterr().out


def test_monitor_prints_a_reading_per_card(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["dm", "monitor", "--backend", "simulated", "--inventory", INVENTORY, "--node-name", "a10-0"]
    assert main([*argv, "--count", "2", "--period", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if line.startswith("nvidia")]) == 8


def test_unknown_manufacturer_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["dm", "detect", "--manufacturer", "intel"])
    assert "invalid choice" in capsys.readouterr().err


def test_detect_on_an_ascend_node_prints_its_group_labels_and_sliced_capacities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eight 910B2 NPUs (64 GiB, 24 AI cores) as DCMI answers them: contract §7.2/§5.3 labels, and the four
    `.sliced.*` capacities of §5.2 (63 overcommitted slices per card) that make vcann-rt reachable."""
    detectors = vendor_detectors()
    detectors["ascend"] = AscendDetector(opener(record_dcmi(ATLAS_800T_A2)), toolkit(tmp_path / "host"), {})
    sysfs = build_sysfs(tmp_path / "sys", A2_PCI)
    monkeypatch.setattr(
        command, "HardwareBackend", functools.partial(HardwareBackend, detectors=detectors, sysfs=sysfs)
    )
    assert main(["dm", "detect", "--manufacturer", "ascend", "--labels"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert [(g["id"], g["memory"], g["cores"], len(g["accelerators"])) for g in shown["groups"]] == [
        ("910b2", 65536, 24, 8)
    ]
    model = "acceleratable.feature.gpustack.ai/ascend-910b2"
    assert shown["labels"] == {
        "feature.gpustack.ai/acceleratable": "true",
        "acceleratable.feature.gpustack.ai/ascend": "true",
        "acceleratable.feature.gpustack.ai/ascend.driver-version": "24.1.rc3",
        "acceleratable.feature.gpustack.ai/ascend.runtime-version": "8.0",
        model: "true",
        f"{model}.product": "Ascend910B2",
        f"{model}.memory": "64Gi",
        f"{model}.cores": "24",
        f"{model}.count": "8",
        f"{model}.family": "910B",
    }
    assert shown["capacities"] == {
        "huawei.com/npu.sliced.units": "12800000",
        "huawei.com/npu.sliced.cores-percentage": "50400",
        "huawei.com/npu.sliced.memory-percentage": "800",
        "huawei.com/npu.sliced.memory-mib": "524288",
    }
