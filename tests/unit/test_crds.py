"""The CRDs: names and scope an admin knows, structural schemas, printer columns, and fresh chart files."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from gpustack_operator.api.crds import HEADER, custom_resource_definitions, rendered_files
from gpustack_operator.api.schema.structural import structural_errors

ROOT = Path(__file__).resolve().parents[2]
CHART_CRDS = ROOT / "charts" / "gpustack-operator" / "crds"
CRDS = {crd["metadata"]["name"]: crd for crd in custom_resource_definitions()}


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "scripts" / "gen_crds.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_chart_crds_are_fresh() -> None:
    stale = load_script().stale_files(CHART_CRDS)
    assert stale == [], "CRDs are stale; run `python scripts/gen_crds.py`:\n" + "".join(stale)


def test_chart_files_are_the_crds_and_carry_the_header() -> None:
    for name, text in rendered_files().items():
        assert text.startswith(HEADER)
        assert yaml.safe_load(text) == CRDS[name.removesuffix(".yaml")]


@pytest.mark.parametrize(
    ("name", "kind", "scope", "singular", "short"),
    [
        ("instancetypes.worker.gpustack.ai", "InstanceType", "Cluster", "instancetype", ["instype"]),
        ("devices.worker.gpustack.ai", "Devices", "Cluster", "devices", ["devs"]),
        ("instances.worker.gpustack.ai", "Instance", "Namespaced", "instance", ["inst"]),
    ],
)
def test_names_scope_and_status_subresource(
    name: str, kind: str, scope: str, singular: str, short: list[str]
) -> None:
    spec = CRDS[name]["spec"]
    assert (spec["group"], spec["scope"]) == ("worker.gpustack.ai", scope)
    assert spec["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": name.split(".")[0],
        "singular": singular,
        "shortNames": short,
        "categories": ["gpustack"],
    }
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("name", sorted(CRDS))
def test_every_crd_schema_is_structural(name: str) -> None:
    for version in CRDS[name]["spec"]["versions"]:
        assert structural_errors(version["schema"]["openAPIV3Schema"]) == []


def resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    """The schema node a simple `.a.b.c` JSONPath reads."""
    node = schema
    for part in json_path.lstrip(".").split("."):
        node = node["properties"][part]
    return node


def test_instancetype_printer_columns_read_the_remaining_of_each_view() -> None:
    [version] = CRDS["instancetypes.worker.gpustack.ai"]["spec"]["versions"]
    columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Entrance", ".status.entrance"),
        ("Accel.(Exclusive)", ".status.accelerator.remaining"),
        ("Accel.(Shared)", ".status.acceleratorShared.remaining"),
        ("Accel.(Sliced)", ".status.acceleratorSliced.remaining"),
        ("CPU", ".status.cpu.remaining"),
        ("Product", ".spec.product"),
        ("Memory", ".spec.memory"),
        ("Phase", ".status.phase"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    schema = version["schema"]["openAPIV3Schema"]
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"].startswith((".status.", ".spec.")):
            node = resolve(schema, column["jsonPath"])
            assert node.get("type") == "string" or node.get("x-kubernetes-int-or-string")


def test_check_mode_fails_on_stale_files_and_passes_after_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script()
    (tmp_path / "instancetypes.worker.gpustack.ai.yaml").write_text(HEADER + "stale: true\n")
    (tmp_path / "old.worker.gpustack.ai.yaml").write_text(HEADER + "kind: CustomResourceDefinition\n")
    (tmp_path / "hand-written.yaml").write_text("kind: ConfigMap\n")

    assert script.main(["--check", "--dir", str(tmp_path)]) == 1
    report = capsys.readouterr().out
    assert "-stale: true" in report
    assert "+++ b/devices.worker.gpustack.ai.yaml" in report
    assert "old.worker.gpustack.ai.yaml: generated earlier but no longer produced" in report

    assert script.main(["--dir", str(tmp_path)]) == 0
    assert script.main(["--check", "--dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*rendered_files(), "hand-written.yaml"])
