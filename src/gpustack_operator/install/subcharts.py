"""The chart's two dependencies, Kueue and NFD, copied from the Go module cache into its charts/ folder.

They are the in-tree charts of the very modules the sandbox builds its control plane from, so the versions
come from sandbox.build (KUEUE_VERSION, NFD_VERSION): one pin for both. A module missing from the cache is
fetched with `go mod download`. The copies are writable (the module cache is read-only) and gitignored; each
run replaces them. Helm refuses to install a chart whose dependency folder is missing, even a disabled one,
so `make chart` and the chart's install test vendor first.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import NamedTuple

from gpustack_operator.install.chart import CHART_DIR
from gpustack_operator.sandbox.build import KUEUE_VERSION, NFD_VERSION, BuildError, module_source


class Subchart(NamedTuple):
    name: str
    module: str
    version: str
    path: str
    """The chart's folder inside the module."""


SUBCHARTS = (
    Subchart("kueue", "sigs.k8s.io/kueue", KUEUE_VERSION, "charts/kueue"),
    Subchart(
        "node-feature-discovery",
        "sigs.k8s.io/node-feature-discovery",
        NFD_VERSION,
        "deployment/helm/node-feature-discovery",
    ),
)

# Upstream's chart-testing fixtures and doc templates are not part of the chart.
_IGNORE = shutil.ignore_patterns("tests", "*.gotmpl", "ci")


def _make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IWUSR | (stat.S_IXUSR if path.is_dir() else 0))


def vendor(chart: Subchart, directory: Path) -> Path:
    """Replace directory/<name> with a writable copy of the chart from module@version; returns it."""
    source = module_source(chart.module, chart.version) / chart.path
    if not (source / "Chart.yaml").is_file():
        raise BuildError(f"{chart.module}@{chart.version} has no chart at {chart.path}")
    target = directory / chart.name
    if target.exists():
        _make_writable(target)
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=_IGNORE)
    _make_writable(target)
    return target


def vendor_all(directory: Path = CHART_DIR / "charts") -> list[Path]:
    """Vendor every subchart into `directory`; BuildError names a module that cannot be had."""
    directory.mkdir(parents=True, exist_ok=True)
    return [vendor(chart, directory) for chart in SUBCHARTS]
