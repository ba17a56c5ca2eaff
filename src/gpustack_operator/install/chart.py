"""The chart's generated files: path (relative to the chart) -> text, and the generated block of values.yaml.

`scripts/gen_chart.py` writes them and, with `--check`, reports every file that is not as generated. The
values.yaml block sits between two marker lines, so the rest of values.yaml stays hand-written.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from gpustack_operator.install.kueue import kueue_values_block
from gpustack_operator.install.rbac import rbac_files

__all__ = ["BEGIN_KUEUE", "CHART_DIR", "END_KUEUE", "generated_files", "stale_files", "with_kueue_block"]

CHART_DIR = Path(__file__).resolve().parents[3] / "charts" / "gpustack-operator"
"""The chart in a source checkout (the generator runs from one)."""
BEGIN_KUEUE = "# BEGIN generated: kueue (scripts/gen_chart.py)"
END_KUEUE = "# END generated: kueue"


class GeneratedBlockError(ValueError):
    """values.yaml lacks the generated block's marker lines (or has them out of order)."""


def with_kueue_block(values_text: str) -> str:
    """values.yaml with the text between the Kueue markers replaced by the generated block."""
    lines = values_text.splitlines(keepends=True)
    try:
        begin = next(n for n, line in enumerate(lines) if line.rstrip() == BEGIN_KUEUE)
        end = next(n for n, line in enumerate(lines) if line.rstrip() == END_KUEUE and n > begin)
    except StopIteration:
        raise GeneratedBlockError(
            f"values.yaml needs the lines {BEGIN_KUEUE!r} and then {END_KUEUE!r} around the Kueue values"
        ) from None
    return "".join([*lines[: begin + 1], kueue_values_block(), *lines[end:]])


def generated_files(chart_dir: Path = CHART_DIR) -> dict[str, str]:
    """Every generated file of the chart, relative path -> the text it must hold."""
    files = dict(rbac_files())
    values = chart_dir / "values.yaml"
    if values.exists():  # a chart without its values.yaml yet: only the files generated whole
        files["values.yaml"] = with_kueue_block(values.read_text(encoding="utf-8"))
    return files


def stale_files(chart_dir: Path = CHART_DIR) -> list[str]:
    """A unified diff per generated file that is not as the code would write it."""
    reports = []
    for name, text in sorted(generated_files(chart_dir).items()):
        path = chart_dir / name
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            old, new = current.splitlines(keepends=True), text.splitlines(keepends=True)
            diff = difflib.unified_diff(old, new, str(path), f"{path} (generated)")
            reports.append("".join(diff) or f"{path}: missing")
    return reports
