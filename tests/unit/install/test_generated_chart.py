"""The chart's generated files are what the code generates now: code the chart does not follow fails."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpustack_operator.install.chart import CHART_DIR, generated_files, stale_files
from gpustack_operator.install.kueue import kueue_configuration
from gpustack_operator.sandbox.kueue import configuration as sandbox_configuration


def test_the_committed_chart_files_are_as_generated() -> None:
    assert stale_files(CHART_DIR) == [], "run `python scripts/gen_chart.py` and commit the result"


def test_the_chart_gives_kueue_the_sandbox_configuration_but_where_it_listens(
    tmp_path: Path,
) -> None:
    values = yaml.safe_load(generated_files()["values.yaml"])
    config = yaml.safe_load(values["kueue"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config == kueue_configuration()
    local = sandbox_configuration(9443, 8081, tmp_path)
    shared = ("apiVersion", "kind", "clientConnection", "controller", "integrations", "resources")
    assert {k: config[k] for k in shared} == {k: local[k] for k in shared}
    assert config["manageJobsWithoutQueueName"] is local["manageJobsWithoutQueueName"] is False
