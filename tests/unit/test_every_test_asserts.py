"""Every test function states what it expects: a test that checks nothing passes whatever the code does.

The rule, read from the source with `ast` (nothing is run): a `test_*` function in a `test_*.py` module
under tests/ must, in its own body (nested functions included), hold at least one of

* an `assert` or a `raise AssertionError`;
* `pytest.raises`, `pytest.warns` or `pytest.fail`;
* a call to `eventually` (tests/helpers.py: it fails the test when its condition never holds) or to a
  helper named `assert_*` or `expect_*`.

Other helpers do not count, even when they assert inside: setup helpers check their own preconditions,
which says nothing about what the test expects. A test that checks only through some other helper goes in
ALLOWED with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CHECKING_PYTEST_CALLS = {"raises", "warns", "fail"}
CHECKING_HELPERS = {"eventually"}
CHECKING_PREFIXES = ("assert_", "expect_")

_SETTLE = "asserts through World.settle(until=...), which fails the test when `until` never holds"
# "tests/path/test_module.py::test_name" -> how it checks where this rule cannot see.
ALLOWED: dict[str, str] = {
    (
        "tests/unit/controllers/test_node_devices_admission_check.py::"
        "test_the_promise_holds_until_the_ledger_shows_the_cards_taken"
    ): _SETTLE,
    "tests/unit/controllers/test_node_devices_admission_check.py::test_unhealthy_cards_do_not_count": _SETTLE,
    "tests/unit/controllers/test_node_queue.py::test_a_deleting_queue_is_drained": _SETTLE,
    (
        "tests/unit/controllers/test_node_queue_entrance.py::test_a_recreated_queue_takes_over_its_entrances"
    ): _SETTLE,
}

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _tests(tree: ast.AST) -> Iterator[Function]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
            yield node


def _checks(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(raised, ast.Name) and raised.id == "AssertionError"
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "pytest":
            return func.attr in CHECKING_PYTEST_CALLS
        name = func.attr
    elif isinstance(func, ast.Name):
        name = func.id
    else:
        return False
    return name in CHECKING_HELPERS or name.startswith(CHECKING_PREFIXES)


def silent_tests(root: Path) -> list[str]:
    """`path::name (line n)` of every test under root that checks nothing by the rule above."""
    found = []
    for path in sorted(root.rglob("test_*.py")):
        for fn in _tests(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(root.parent)}::{fn.name}"
            if where not in ALLOWED and not any(_checks(node) for node in ast.walk(fn)):
                found.append(f"{where} (line {fn.lineno})")
    return found


def test_every_test_function_asserts_something() -> None:
    silent = silent_tests(TESTS)
    assert silent == [], "tests that assert nothing (see this module's docstring):\n  " + "\n  ".join(silent)


def test_the_rule_accepts_each_kind_of_check_and_names_a_silent_test(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sample.py").write_text(
        "import pytest\n"
        "def test_direct():\n    assert 1\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
        "async def test_waits():\n    await eventually(lambda: True)\n"
        "def test_helper():\n    expect_two(2)\n"
        "def test_nested_probe():\n    def probe():\n        assert True\n    probe()\n"
        "def test_setup_only():\n    helper_that_asserts_inside()\n"
    )
    assert silent_tests(tmp_path / "tests") == ["tests/test_sample.py::test_setup_only (line 15)"]


def test_every_allowed_entry_names_an_existing_test_and_says_why() -> None:
    for where, reason in ALLOWED.items():
        path, _, name = where.partition("::")
        assert reason.strip(), f"{where}: give the reason"
        assert f"def {name}(" in (TESTS.parent / path).read_text(), f"{where}: no such test"
