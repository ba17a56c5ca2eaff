"""`gpustack-operator device-manager` (and `dm`) as a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpustack_operator.cli import main

INVENTORY = str(Path(__file__).parents[3] / "src/gpustack_operator/sandbox/inventory.yaml")


@pytest.mark.parametrize("command", ["device-manager", "dm"])
def test_detect_prints_the_groups_as_yaml(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main([command, "detect", "--backend", "simulated", "--inventory", INVENTORY, "--node-name", "h100-0"])
        == 0
    )
    groups = yaml.safe_load(capsys.readouterr().out)["groups"]
    assert [(g["id"], len(g["accelerators"])) for g in groups] == [("h100-80gb-hbm3", 8)]


def test_detect_on_a_machine_without_cards_prints_no_groups(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dm", "detect", "--backend", "pci", "--manufacturer", "nvidia"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {"groups": []}


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
