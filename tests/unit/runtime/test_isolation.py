"""The runtime kit stays domain-free: only the standard library and its own modules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import gpustack_operator.runtime as runtime

PACKAGE = Path(runtime.__file__).parent


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_runtime_imports_only_the_standard_library() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 6
    outside = {
        path.name: sorted(root for root in imported_roots(path) if root not in sys.stdlib_module_names)
        for path in modules
    }
    assert {name: roots for name, roots in outside.items() if roots} == {}


def test_only_the_supervisor_creates_tasks() -> None:
    creators = sorted(path.name for path in PACKAGE.glob("*.py") if "create_task(" in path.read_text())
    assert creators == ["tasks.py"]
