"""The chart's values: the manufacturer table is the code's, and values.schema.json describes every value.

Helm validates values against the schema on install, lint and template, so a key the schema does not know
is refused (our objects say additionalProperties false); a key the schema knows but values.yaml lacks is
harmless. What helm cannot see is a manufacturer whose defaults drifted from
rules/naming/manufacturers.py: the device-manager DaemonSet would then select nodes by one PCI vendor while
the code counts another's cards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpustack_operator.rules.naming.manufacturers import known_manufacturers, manufacturers

CHART = Path(__file__).resolve().parents[2] / "charts" / "gpustack-operator"
VALUES_TEXT = (CHART / "values.yaml").read_text(encoding="utf-8")
VALUES: dict[str, Any] = yaml.safe_load(VALUES_TEXT)
SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
SUBCHARTS = ("kueue", "node-feature-discovery")


def test_manufacturer_table_is_the_codes() -> None:
    table = VALUES["global"]["manufacturers"]
    assert sorted(table) == list(known_manufacturers())
    for name, default in manufacturers({}).items():
        assert {k: table[name][k] for k in ("pciVendorID", "resourceName", "runtimeName")} == {
            "pciVendorID": (f"{default.pci_class}_" if default.pci_class else "") + default.pci_vendor_id,
            "resourceName": default.resource_name,
            "runtimeName": default.runtime_class,
        }, f"values.yaml global.manufacturers.{name} disagrees with rules/naming/manufacturers.py"


def _child(schema: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The schema of `key` inside an object schema; None when the schema refuses the key."""
    if key in schema.get("properties", {}):
        return dict(schema["properties"][key])
    extra = schema.get("additionalProperties", True)
    if extra is False:
        return None
    return dict(extra) if isinstance(extra, dict) else {}  # {}: an open object, described as such


def _undescribed(value: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    """Every key path in `value` the schema has no entry for (open objects end the walk)."""
    if isinstance(value, dict) and (
        "properties" in schema or isinstance(schema.get("additionalProperties"), dict)
    ):
        for key, item in value.items():
            child = _child(schema, key)
            if child is None:
                yield f"{path}.{key}"
            else:
                yield from _undescribed(item, child, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _undescribed(item, schema["items"], f"{path}[{index}]")


def test_schema_describes_every_value() -> None:
    assert list(_undescribed(VALUES, SCHEMA, "")) == []


def test_schema_walk_finds_an_undescribed_key() -> None:
    values = {"worker": {"replicas": 1, "replicaz": 2}, "global": {"manufacturers": {"acme": {}}}}
    assert sorted(_undescribed(values, SCHEMA, "")) == [".global.manufacturers.acme", ".worker.replicaz"]


def _object_schemas(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if "properties" in schema:
        yield path, schema
        for key, child in schema["properties"].items():
            yield from _object_schemas(child, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _object_schemas(schema["additionalProperties"], f"{path}.*")
    if isinstance(schema.get("items"), dict):
        yield from _object_schemas(schema["items"], f"{path}[]")


@pytest.mark.parametrize("path", ["." + name for name in SUBCHARTS])
def test_subchart_values_stay_open_with_a_boolean_enabled(path: str) -> None:
    schema = SCHEMA["properties"][path[1:]]
    assert schema.get("additionalProperties", True) is not False
    assert schema["properties"]["enabled"]["type"] == "boolean"


def test_our_objects_refuse_unknown_keys() -> None:
    """A typo in a value (worker.replica) fails helm install instead of being silently ignored."""
    open_ones = [
        path
        for path, schema in _object_schemas(SCHEMA, "")
        if schema.get("additionalProperties", True) is True
        and path not in {"." + name for name in SUBCHARTS}
        and set(schema["properties"]) != {"name"}
    ]
    assert open_ones == []
