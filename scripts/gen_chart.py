#!/usr/bin/env python3
"""Write the Helm chart's generated files, or check (``--check``) that the committed ones are current.

Usage: ``python scripts/gen_chart.py [--check] [--dir CHART_DIR]``. What is generated and from where:
gpustack_operator.install (the RBAC rules files under files/rbac/, from the code's declarations; the
`kueue:` block of values.yaml, from the Kueue configuration the sandbox runs). ``--check`` exits 1 with a
unified diff per stale file, so a change to the code that the chart does not follow fails the unit tests.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gpustack_operator.install.chart import CHART_DIR, generated_files, stale_files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="report stale files instead of writing them")
    parser.add_argument("--dir", type=Path, default=CHART_DIR, help="chart directory (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.check:
        reports = stale_files(args.dir)
        for report in reports:
            print(report)
        if reports:
            print(f"{len(reports)} generated chart file(s) are stale: run `python scripts/gen_chart.py`")
        return 1 if reports else 0
    for name, text in generated_files(args.dir).items():
        path = args.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
