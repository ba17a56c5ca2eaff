"""Accept headers as kubectl, the metadata client and the aggregator send them (guide §3.2)."""

from __future__ import annotations

import pytest

from gpustack_operator.apiserver.negotiation import Representation, negotiate
from gpustack_operator.apiserver.status import StatusError

KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
METADATA_GET = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
METADATA_LIST = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)


@pytest.mark.parametrize(
    ("accept", "is_list", "expected"),
    [
        pytest.param(KUBECTL_GET, True, Representation.TABLE, id="kubectl get: Table"),
        pytest.param(METADATA_GET, False, Representation.PARTIAL, id="metadata client get"),
        pytest.param(
            METADATA_GET, True, Representation.JSON, id="PartialObjectMetadata on a list falls to JSON"
        ),
        pytest.param(METADATA_LIST, True, Representation.PARTIAL_LIST, id="metadata client list"),
        pytest.param(METADATA_LIST, False, Representation.JSON, id="PartialObjectMetadataList on an object"),
        pytest.param("", False, Representation.JSON, id="availability probe sends none"),
        pytest.param("*/*", True, Representation.JSON, id="anything"),
    ],
)
def test_first_acceptable_representation(accept: str, is_list: bool, expected: Representation) -> None:
    assert negotiate(accept, is_list=is_list) is expected


def test_nothing_acceptable_is_406() -> None:
    with pytest.raises(StatusError) as refused:
        negotiate("application/vnd.kubernetes.protobuf,application/yaml", is_list=True)
    assert (refused.value.code, refused.value.reason) == (406, "NotAcceptable")
