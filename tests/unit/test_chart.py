"""The Helm chart ships this package's version and every generated CRD."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpustack_operator import __version__
from gpustack_operator.api import crds

CHART = Path(__file__).resolve().parents[2] / "charts" / "gpustack-operator"


def test_chart_version_matches_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["name"] == "gpustack-operator"
    assert chart["version"] == chart["appVersion"] == __version__


def test_chart_crds_directory_holds_exactly_the_generated_crds() -> None:
    shipped = {p.name for p in (CHART / "crds").glob("*.yaml")}
    assert shipped == set(crds.rendered_files())
