#!/usr/bin/env python3
"""Copy the Kueue and NFD Helm charts from the Go module cache into the operator chart's charts/ folder.

Usage: ``python scripts/vendor_subcharts.py [--dir DIR]``. The chart's two dependencies (Chart.yaml, no
repository) are the in-tree charts of the very modules the sandbox builds its control plane from, so the
versions come from ``gpustack_operator.sandbox.build`` (KUEUE_VERSION, NFD_VERSION): one pin for both. A
module missing from the cache is fetched with ``go mod download``. The copies are writable (the module cache
is read-only) and gitignored; each run replaces them.
"""

from __future__ import annotations

import argparse
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from gpustack_operator.sandbox.build import KUEUE_VERSION, NFD_VERSION, BuildError, module_source

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "charts" / "gpustack-operator" / "charts"


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the chart's charts/ folder")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    for chart in SUBCHARTS:
        try:
            target = vendor(chart, args.dir)
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"vendored {chart.module}@{chart.version} {chart.path} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
