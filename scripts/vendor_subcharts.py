#!/usr/bin/env python3
"""Copy the Kueue and NFD Helm charts from the Go module cache into the operator chart's charts/ folder.

Usage: ``python scripts/vendor_subcharts.py [--dir DIR]`` (see gpustack_operator.install.subcharts).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gpustack_operator.install.chart import CHART_DIR
from gpustack_operator.install.subcharts import SUBCHARTS, vendor
from gpustack_operator.sandbox.build import BuildError

DEFAULT_DIR = CHART_DIR / "charts"


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
