#!/usr/bin/env python3
"""Write the operator's CRDs into the Helm chart, or check (``--check``) that the committed files are current.

Usage: ``python scripts/gen_crds.py [--check] [--dir DIR]``. The CRDs come from
``gpustack_operator.api.crds``; a schema that kube-apiserver would refuse as non-structural is never written.
``--check`` exits 1 and prints a unified diff per stale file (and names generated files that should not be
there), so CI fails when someone changes a schema without regenerating.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from gpustack_operator.api.crds import HEADER, custom_resource_definitions, rendered_files
from gpustack_operator.api.schema.structural import structural_errors

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "charts" / "gpustack-operator" / "crds"


def _structural_problems() -> list[str]:
    return [
        f"{crd['metadata']['name']} {version['name']}: {problem}"
        for crd in custom_resource_definitions()
        for version in crd["spec"]["versions"]
        for problem in structural_errors(version["schema"]["openAPIV3Schema"])
    ]


def _changes(directory: Path) -> dict[Path, str | None]:
    """Each file that is not as generated: path -> the text it should hold (None: it should go)."""
    expected = rendered_files()
    changes: dict[Path, str | None] = {}
    for name, text in expected.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            changes[path] = text
    for path in directory.glob("*.yaml"):
        if path.name not in expected and path.read_text(encoding="utf-8").startswith(HEADER):
            changes[path] = None
    return dict(sorted(changes.items()))


def stale_files(directory: Path) -> list[str]:
    """A report per file that differs from what would be generated: a unified diff, or why it should go."""
    reports = []
    for path, text in _changes(directory).items():
        if text is None:
            reports.append(f"{path.name}: generated earlier but no longer produced; delete it\n")
            continue
        current = path.read_text(encoding="utf-8").splitlines(keepends=True) if path.exists() else []
        diff = difflib.unified_diff(
            current, text.splitlines(keepends=True), f"a/{path.name}", f"b/{path.name}"
        )
        reports.append("".join(diff))
    return reports


def write(directory: Path) -> list[Path]:
    """Bring ``directory`` up to date (write changed files, delete dropped ones); the paths touched."""
    directory.mkdir(parents=True, exist_ok=True)
    changes = _changes(directory)
    for path, text in changes.items():
        if text is None:
            path.unlink()
        else:
            path.write_text(text, encoding="utf-8")
    return list(changes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed files are stale")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="output folder (default: the chart's)")
    args = parser.parse_args(argv)
    problems = _structural_problems()
    if problems:
        print("refusing to generate non-structural CRDs:", *problems, sep="\n  ", file=sys.stderr)
        return 2
    if args.check:
        reports = stale_files(args.dir)
        if reports:
            print(f"CRDs in {args.dir} are stale; run scripts/gen_crds.py", file=sys.stderr)
            sys.stdout.write("".join(reports))
            return 1
        return 0
    for path in write(args.dir):
        print(f"{'wrote' if path.exists() else 'removed'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
