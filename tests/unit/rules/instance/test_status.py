"""What a user reads in an Instance's status, for every state its Pod can be in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation, encode
from gpustack_operator.rules.instance.pod import PodSettings, render_pod
from gpustack_operator.rules.instance.status import UNREADABLE_ALLOCATION, pod_status
from tests.unit.rules.instance.test_pod import h100, instance

QUEUE = h100()["status"]["entrance"]
H100_GROUP = "h100-80g"


def pod(**status: Any) -> JSONObj:
    """The Instance's Pod as rendered (gated by Kueue, unscheduled), with ``status`` applied."""
    rendered = render_pod(
        instance(ports=[{"port": 8888, "name": "jupyter"}]), h100(), PodSettings(True, "sshd")
    )
    rendered["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    rendered["status"] = {"phase": "Pending", **status}
    return rendered


def admitted(**status: Any) -> JSONObj:
    built = pod(**status)
    del built["spec"]["schedulingGates"]
    return built


def on_node(**status: Any) -> JSONObj:
    built = admitted(**status)
    built["spec"]["nodeName"] = "gpu-node-1"
    return built


def waiting(reason: str, message: str = "") -> JSONObj:
    state: JSONObj = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    return {"name": "main", "ready": False, "state": state}


def running_ready() -> JSONObj:
    return on_node(
        phase="Running",
        conditions=[{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        hostIP="10.0.0.7",
        hostIPs=[{"ip": "10.0.0.7"}],
        podIP="172.16.0.9",
        podIPs=[{"ip": "172.16.0.9"}, {"ip": "fd00::9"}],
        containerStatuses=[{"name": "main", "ready": True, "state": {"running": {}}}],
    )


def deleting(built: JSONObj) -> JSONObj:
    built["metadata"]["deletionTimestamp"] = "2026-12-01T20:00:00Z"
    return built


def stopped(inst: JSONObj) -> JSONObj:
    inst["spec"]["stop"] = True
    return inst


@pytest.mark.parametrize(
    ("the_pod", "inst", "phase", "message"),
    [
        pytest.param(None, instance(), "Pending", "creating the Pod", id="no Pod yet"),
        pytest.param(None, stopped(instance()), "Stopped", "the instance is stopped", id="stopped, Pod gone"),
        pytest.param(
            pod(), instance(), "Pending", f"waiting for admission in queue {QUEUE}", id="queued in Kueue"
        ),
        pytest.param(
            admitted(
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                    }
                ]
            ),
            instance(),
            "Pending",
            "waiting for scheduling: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            id="admitted but no node fits",
        ),
        pytest.param(
            on_node(containerStatuses=[waiting("ContainerCreating")]),
            instance(),
            "Starting",
            "container main: ContainerCreating",
            id="on a node, container being created",
        ),
        pytest.param(
            on_node(
                containerStatuses=[
                    waiting("ImagePullBackOff", 'Back-off pulling image "pytorch/pytorch:2.4"')
                ]
            ),
            instance(),
            "Failed",  # not Starting: a Starting Instance cannot be stopped, and this one needs a change
            'container main: ImagePullBackOff: Back-off pulling image "pytorch/pytorch:2.4"',
            id="image cannot be pulled",
        ),
        pytest.param(
            on_node(
                phase="Running",
                containerStatuses=[
                    {"name": "main", "ready": True, "state": {"running": {}}},
                    {
                        "name": "sshd",
                        "ready": False,
                        "state": {"terminated": {"reason": "Error", "exitCode": 1}},
                    },
                ],
            ),
            instance(),
            "Starting",
            "container sshd exited: Error (exit code 1)",
            id="sidecar exited",
        ),
        pytest.param(
            on_node(), instance(), "Starting", "starting the containers", id="on a node, no statuses yet"
        ),
        pytest.param(running_ready(), instance(), "Running", None, id="running and ready"),
        pytest.param(
            on_node(phase="Failed", reason="Evicted", message="The node was low on resource: memory."),
            instance(),
            "Failed",
            "the Pod ended: The node was low on resource: memory.",
            id="evicted by the kubelet",
        ),
        pytest.param(
            running_ready(),
            stopped(instance()),
            "Stopping",
            "stopping: deleting the Pod",
            id="stop asked, Pod runs",
        ),
        pytest.param(
            deleting(
                on_node(
                    conditions=[
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "message": "Preempted to accommodate a workload",
                        }
                    ]
                )
            ),
            instance(),
            "Stopping",
            "the Pod is being deleted: Preempted to accommodate a workload",
            id="Kueue preempts the Pod",
        ),
    ],
)
def test_phase_and_message(the_pod: JSONObj | None, inst: JSONObj, phase: str, message: str | None) -> None:
    status = pod_status(the_pod, inst)
    assert status["phase"] == phase
    assert status.get("phaseMessage") == message


def test_no_pod_reports_only_the_phase() -> None:
    assert set(pod_status(None, instance())) == {"phase", "phaseMessage"}


def test_a_running_instance_shows_where_and_on_which_cards() -> None:
    cards = ContainerAllocation(
        DeviceAllocationMode.EXCLUSIVE,
        (
            AllocatedCard(H100_GROUP, "nvidia", "GPU-aaaa", 0, 1_600_000),
            AllocatedCard(H100_GROUP, "nvidia", "GPU-bbbb", 1, 1_600_000),
        ),
        ("GPU-aaaa", "GPU-bbbb"),
    )
    running = running_ready()
    running["metadata"]["annotations"] = {ACCELERATOR_ALLOCATED_ANNOTATION: encode({"main": cards})}
    assert pod_status(running, instance()) == {
        "phase": "Running",
        "nodeName": "gpu-node-1",
        "accessAddresses": ["10.0.0.7"],
        "hostIPs": ["10.0.0.7"],
        "podIPs": ["172.16.0.9", "fd00::9"],
        "ports": [{"port": 8888, "protocol": "TCP", "name": "jupyter"}],
        "allocations": [
            {
                "id": H100_GROUP,
                "manufacturer": "nvidia",
                "accelerators": [
                    {"id": "GPU-aaaa", "index": 0, "mode": 1, "allocated": 1_600_000},
                    {"id": "GPU-bbbb", "index": 1, "mode": 1, "allocated": 1_600_000},
                ],
            }
        ],
    }


def test_a_slice_shows_its_units() -> None:
    slice_ = ContainerAllocation(
        DeviceAllocationMode.SLICED, (AllocatedCard("a10-24g", "nvidia", "GPU-cccc", 3, 400_000),), ("tok-1",)
    )
    running = running_ready()
    running["metadata"]["annotations"] = {ACCELERATOR_ALLOCATED_ANNOTATION: encode({"main": slice_})}
    assert pod_status(running, instance())["allocations"] == [
        {
            "id": "a10-24g",
            "manufacturer": "nvidia",
            "accelerators": [{"id": "GPU-cccc", "index": 3, "mode": 3, "allocated": 400_000}],
        }
    ]


def test_ips_fall_back_to_the_single_ip_fields() -> None:
    running = running_ready()
    del running["status"]["hostIPs"], running["status"]["podIPs"]
    status = pod_status(running, instance())
    assert (status["hostIPs"], status["podIPs"]) == (["10.0.0.7"], ["172.16.0.9"])


@pytest.mark.parametrize(
    "annotation", ["{not json", '["main"]', '{"main": 7}', '{"main": {"devices": []}}'], ids=str
)
def test_an_unreadable_allocation_is_reported_not_raised(annotation: str) -> None:
    running = running_ready()
    running["metadata"]["annotations"] = {ACCELERATOR_ALLOCATED_ANNOTATION: annotation}
    status = pod_status(running, instance())
    assert status["phase"] == "Running"
    assert "allocations" not in status
    assert status["phaseMessage"] == UNREADABLE_ALLOCATION


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
_POD_KEYS = st.sampled_from(
    ["metadata", "spec", "status", "phase", "conditions", "containerStatuses", "schedulingGates", "nodeName"]
)


@settings(max_examples=300, deadline=None)
@given(
    shape=st.dictionaries(_POD_KEYS, _ANY_JSON, max_size=4),
    status=st.dictionaries(_POD_KEYS, _ANY_JSON, max_size=4),
    annotation=_ANY_JSON,
)
def test_a_pod_of_any_shape_yields_a_status(shape: JSONObj, status: JSONObj, annotation: Any) -> None:
    bent = running_ready() | shape
    if isinstance(bent.get("status"), dict):
        bent["status"] = bent["status"] | status
    if isinstance(bent.get("metadata"), dict):
        bent["metadata"]["annotations"] = {ACCELERATOR_ALLOCATED_ANNOTATION: annotation}
    result = pod_status(bent, instance())
    assert result["phase"] in {"Pending", "Starting", "Running", "Failed", "Stopping"}
