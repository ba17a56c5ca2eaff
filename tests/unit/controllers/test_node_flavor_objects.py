"""The ResourceFlavor patch (pure): what changes on a flavor others also touch, and nothing at rest."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpustack_operator.controllers.node_flavor_contributions import flavor_problem, node_flavor_index
from gpustack_operator.controllers.node_flavor_objects import flavor_patch, resource_flavor
from gpustack_operator.rules.naming.flavors import NodeFlavor

G = "general.feature.gpustack.ai/"
FLAVOR = NodeFlavor(
    name="gpustack--amd-25-1-linux-amd64-8c",
    general_key="amd-25-1",
    accel_key="",
    os="linux",
    arch="amd64",
    count=8,
    node_labels={"gpustack.ai/managed": "true", f"{G}amd-25-1.count": "8"},
    notes={"manufacturer": "amd", "cpuDetail": '{"physicalCores":"8"}'},
)


def applied(**change: Any) -> dict[str, Any]:
    """The flavor as the server holds it after our writes, with `change` merged into its metadata/spec."""
    current: dict[str, Any] = copy.deepcopy(dict(resource_flavor(FLAVOR, nodes=2, aware=False)))
    for part, values in change.items():
        current[part].update(values)
    return current


@pytest.mark.parametrize(
    ("current", "patch"),
    [
        pytest.param(applied(), None, id="at rest: nothing to write"),
        pytest.param(
            applied(metadata={"labels": {"team": "ml", **applied()["metadata"]["labels"]}}),
            None,
            id="someone else's label stays and costs no write",
        ),
        pytest.param(
            applied(metadata={"annotations": {"note.gpustack.ai/old": "x", "owner": "ops"}}),
            {
                "metadata": {
                    "annotations": {
                        "note.gpustack.ai/manufacturer": "amd",
                        "note.gpustack.ai/cpuDetail": '{"physicalCores":"8"}',
                        "note.gpustack.ai/old": None,
                    }
                }
            },
            id="our notes are replaced as a set, other annotations are left",
        ),
        pytest.param(
            applied(spec={"nodeLabels": {"gpustack.ai/managed": "true", "extra": "1"}}),
            {"spec": {"nodeLabels": {f"{G}amd-25-1.count": "8", "extra": None}}},
            id="nodeLabels are pinned exactly",
        ),
        pytest.param(
            applied(spec={"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
            {"spec": {"tolerations": [{"operator": "Exists"}]}},
            id="tolerations are pinned exactly",
        ),
    ],
)
def test_flavor_patch(current: dict[str, Any], patch: dict[str, Any] | None) -> None:
    assert flavor_patch(current, resource_flavor(FLAVOR, nodes=2, aware=False)) == patch


def test_a_device_flavor_drops_the_cpu_detail_note_unless_pools_split_by_cpu_maker() -> None:
    device = NodeFlavor(**{**FLAVOR.__dict__, "accel_key": "nvidia-tesla-t4", "name": "gpustack--x-2d"})
    note = "note.gpustack.ai/cpuDetail"
    assert note not in resource_flavor(device, 1, aware=False)["metadata"]["annotations"]
    assert note in resource_flavor(device, 1, aware=True)["metadata"]["annotations"]
    assert note in resource_flavor(FLAVOR, 1, aware=False)["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param({"os": "Linux"}, "not a DNS-1123 subdomain", id="capitals in the name"),
        pytest.param({"general_key": "a" * 57}, "not a valid label key", id="capacity key too long"),
        pytest.param(
            {"node_labels": {f"k{n}": "v" for n in range(9)}}, "Kueue allows 8", id="nine node labels"
        ),
    ],
)
def test_flavors_kubernetes_would_refuse_are_named(change: dict[str, Any], problem: str) -> None:
    name = f"gpustack--{change.get('general_key', 'amd-25-1')}-{change.get('os', 'linux')}-amd64-8c"
    bad = NodeFlavor(**{**FLAVOR.__dict__, "name": name, **change})
    assert problem in (flavor_problem(bad) or "")
    assert flavor_problem(FLAVOR) is None


def test_the_index_never_raises_and_files_unmanaged_nodes_nowhere() -> None:
    assert node_flavor_index({}) == []
    assert node_flavor_index({"metadata": {"name": "n", "labels": None}}) == []
    assert node_flavor_index({"metadata": {"name": "n", "labels": {"gpustack.ai/managed": "false"}}}) == []
