"""LocalQueue names fit a label value whatever the ClusterQueue's name is (§7.8)."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gpustack_operator.rules.naming.queues import fnv1a_64, format_local_queue_name
from tests.unit.rules.builders import is_dns_label, is_label_value

LOCAL_QUEUE = re.compile(r"gpustack-fnv64-[0-9a-f]{16}")


@pytest.mark.parametrize(
    ("cluster_queue", "local_queue"),
    [
        pytest.param("gpustack--generic-linux-amd64", "gpustack-fnv64-3b93966fd73eb9ec", id="generic-cpu"),
        pytest.param("gpustack--nvidia-tesla-t4-linux-amd64", "gpustack-fnv64-6b371caa2da0b799", id="t4"),
        pytest.param(
            "gpustack--amd-epyc-7763--nvidia-tesla-t4-linux-amd64",
            "gpustack-fnv64-007a192c49d4a8cf",
            id="zero-padded",
        ),
        pytest.param(
            "gpustack--intel-6-143-12c-48g--nvidia-rtx-6000-ada-generation-1d-8s",
            "gpustack-fnv64-acc7da830f65ee1d",
            id="long-name",
        ),
        pytest.param("gpustack--amd-25-1-1c-2g", "gpustack-fnv64-e1642bdbc7d7e63a", id="short-name"),
        pytest.param("", "gpustack-fnv64-cbf29ce484222325", id="empty-is-the-offset-basis"),
    ],
)
def test_format_local_queue_name(cluster_queue: str, local_queue: str) -> None:
    assert format_local_queue_name(cluster_queue) == local_queue


def test_fnv1a_64_reference_values() -> None:
    assert fnv1a_64(b"") == 0xCBF29CE484222325
    assert fnv1a_64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a_64(b"foobar") == 0x85944171F73967E8


@given(st.text(max_size=300))
def test_local_queue_name_is_a_31_char_dns_label(cluster_queue: str) -> None:
    name = format_local_queue_name(cluster_queue)
    assert LOCAL_QUEUE.fullmatch(name)
    assert len(name) == 31
    assert is_dns_label(name)
    assert is_label_value(name)
    assert format_local_queue_name(cluster_queue) == name, "deterministic"


@given(st.text(), st.text())
def test_distinct_cluster_queues_get_distinct_local_queues(a: str, b: str) -> None:
    assume(a != b)
    assert format_local_queue_name(a) != format_local_queue_name(b)
