"""The rows `kubectl get instancetypes` prints: the contract's columns, ages as kube renders them."""

from __future__ import annotations

import datetime as dt

import pytest

from gpustack_operator.api.crds import INSTANCE_COLUMNS
from gpustack_operator.apiserver.negotiation import Representation
from gpustack_operator.apiserver.registry.generic.representation import render_event, render_list
from gpustack_operator.apiserver.registry.instancetypes import COLUMNS
from gpustack_operator.apiserver.status import StatusError
from gpustack_operator.apiserver.table import age, human_duration, printer_column, table

A100 = {
    "apiVersion": "worker.gpustack.ai/v1",
    "kind": "InstanceType",
    "metadata": {"name": "a100", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"product": "NVIDIA-A100-SXM4-80GB", "memory": "81920Mi"},
    "status": {
        "entrance": "gpustack-fnv64-0123456789abcdef",
        "phase": "Active",
        "accelerator": {"onceMaxRequest": "8", "remaining": "6", "capacity": "8"},
        "acceleratorShared": {"onceMaxRequest": "80", "remaining": "60"},
        "cpu": {"onceMaxRequest": "64", "remaining": "32"},
    },
}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (45, "45s"),
        (303, "5m3s"),
        (300, "5m"),
        (2520, "42m"),
        (18240, "5h4m"),
        (108000, "30h"),
        (273600, "3d4h"),
        (120 * 86400, "120d"),
        (3 * 365 * 86400 + 20 * 86400, "3y20d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_ages_read_like_kubes(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_instance_type_row_has_the_contract_columns_and_age_only_in_wide() -> None:
    doc = table(COLUMNS, [A100], list_meta={"resourceVersion": "9", "continue": "c"})
    names = [c["name"] for c in doc["columnDefinitions"] if c["priority"] == 0]
    assert names == [
        "Name",
        "Entrance",
        "Accel.(Exclusive)",
        "Accel.(Shared)",
        "Accel.(Sliced)",
        "CPU",
        "Product",
        "Memory",
        "Phase",
    ]
    assert doc["columnDefinitions"][-1]["name"] == "Age"
    assert doc["columnDefinitions"][-1]["priority"] == 1
    assert doc["columnDefinitions"][0]["format"] == "name"
    cells = doc["rows"][0]["cells"]
    assert cells[:9] == [
        "a100",
        "gpustack-fnv64-0123456789abcdef",
        "8/6",
        "80/60",
        "<none>",
        "64/32",
        "NVIDIA-A100-SXM4-80GB",
        "81920Mi",
        "Active",
    ]
    bare = table(COLUMNS, [{k: v for k, v in A100.items() if k != "spec"}])["rows"][0]["cells"]
    assert bare[6:8] == ["<none>", "<none>"]
    assert doc["metadata"] == {"resourceVersion": "9", "continue": "c"}
    assert doc["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_include_object_none_object_and_bad_value() -> None:
    assert "object" not in table(COLUMNS, [A100], include_object="None")["rows"][0]
    assert table(COLUMNS, [A100], include_object="Object")["rows"][0]["object"] is A100
    with pytest.raises(StatusError) as bad:
        table(COLUMNS, [A100], include_object="Everything")
    assert bad.value.code == 400


def test_watch_table_headers_only_on_the_first_event_and_bookmarks_keep_their_version() -> None:
    first = render_event(Representation.TABLE, {"type": "ADDED", "object": A100}, COLUMNS, "", headers=True)
    later = render_event(
        Representation.TABLE, {"type": "MODIFIED", "object": A100}, COLUMNS, "", headers=False
    )
    assert first["object"]["columnDefinitions"]
    assert not later["object"]["columnDefinitions"]
    assert later["object"]["rows"][0]["cells"][0] == "a100"
    bookmark = {"type": "BOOKMARK", "object": {"kind": "InstanceType", "metadata": {"resourceVersion": "12"}}}
    rendered = render_event(Representation.TABLE, bookmark, COLUMNS, "", headers=False)
    assert rendered["object"]["rows"] == []
    assert rendered["object"]["metadata"]["resourceVersion"] == "12"
    error = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
    assert render_event(Representation.TABLE, error, COLUMNS, "", headers=False) == error


def test_partial_object_metadata_list_keeps_list_metadata() -> None:
    doc = {"kind": "InstanceTypeList", "metadata": {"resourceVersion": "5"}, "items": [A100]}
    out = render_list(Representation.PARTIAL_LIST, doc, COLUMNS, "")
    assert out["kind"] == "PartialObjectMetadataList"
    assert out["metadata"] == {"resourceVersion": "5"}
    assert out["items"][0]["metadata"]["name"] == "a100"
    assert (
        render_list(Representation.JSON, {"kind": "InstanceTypeList", "items": None}, COLUMNS, "")["items"]
        == []
    )


def test_age_column_counts_from_creation() -> None:
    now = dt.datetime(2026, 1, 1, 0, 0, 45, tzinfo=dt.UTC)
    assert age(A100, now) == "45s"
    assert age({"metadata": {}}, now) == "<unknown>"


def test_printer_columns_of_a_crd_read_as_kubectl_shows_them_for_the_crd() -> None:
    """The v1 Instance Table reuses the CRD's printer columns: a missing field is `<none>`, a boolean
    prints as kube prints it, Age is an age."""
    columns = [printer_column(c) for c in INSTANCE_COLUMNS]
    created = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj = {"metadata": {"creationTimestamp": created}, "spec": {"type": "h100", "stop": True}}
    assert [c.cell(obj) for c in columns] == ["h100", "<none>", "<none>", "true", "5m", "<none>", "<none>"]
    assert [c.type for c in columns] == ["string", "string", "string", "boolean", "date", "string", "integer"]
    assert [c.priority for c in columns] == [0, 0, 0, 0, 0, 1, 1]


def test_wide_instance_columns_say_where_to_connect() -> None:
    """`-o wide` adds the access address and the SSH node port (a filtered JSONPath, first match)."""
    columns = {c.name: c for c in (printer_column(c) for c in INSTANCE_COLUMNS)}
    status = {
        "accessAddresses": ["10-0-0-7.traefik.me", "other"],
        "ports": [{"name": "jupyter", "nodePort": 31888}, {"name": "ssh", "nodePort": 30022}],
    }
    obj = {"metadata": {}, "spec": {}, "status": status}
    assert columns["Address"].cell(obj) == "10-0-0-7.traefik.me"
    assert columns["SSH-Port"].cell(obj) == 30022
    assert columns["SSH-Port"].cell({"status": {"ports": [{"name": "jupyter", "nodePort": 1}]}}) == "<none>"


def test_an_unsupported_printer_column_path_is_refused_when_the_column_is_built() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        printer_column({"name": "X", "jsonPath": ".status.ports[1:2]"})
