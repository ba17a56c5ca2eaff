"""The process environment: read live until frozen; a frozen one gives the same manufacturer table without
reading the environment again."""

from __future__ import annotations

import pytest

from gpustack_operator.rules.environ import FrozenEnviron, ProcessEnviron, frozen
from gpustack_operator.rules.naming.manufacturers import manufacturers


def test_the_process_environment_is_live_until_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    process = ProcessEnviron()
    monkeypatch.setenv("GPUSTACK_THEAD_PCI_VENDOR_ID", "abcd")
    assert frozen(process) is None
    assert manufacturers(process)["thead"].pci_vendor_id == "abcd"
    process.freeze()
    monkeypatch.setenv("GPUSTACK_THEAD_PCI_VENDOR_ID", "0302_beef")
    assert process["GPUSTACK_THEAD_PCI_VENDOR_ID"] == "abcd"
    assert manufacturers(process)["thead"].pci_vendor_id == "abcd"


def test_equal_frozen_environments_share_one_table_and_callers_cannot_change_it() -> None:
    first = FrozenEnviron({"GPUSTACK_NVIDIA_ACCELERATABLE_RESOURCE_NAME": "example.com/gpu"})
    second = FrozenEnviron(dict(first))
    assert hash(first) == hash(second)
    assert first == second
    table = manufacturers(first)
    assert table["nvidia"].resource_name == "example.com/gpu"
    del table["nvidia"]
    assert manufacturers(second)["nvidia"].resource_name == "example.com/gpu"
    assert manufacturers(FrozenEnviron({}))["nvidia"].resource_name == "nvidia.com/gpu"
