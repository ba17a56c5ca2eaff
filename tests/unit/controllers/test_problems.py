"""Bad input is reported once, on the object, and everything else keeps converging.

Three inputs a cluster really produces: a settings value that does not parse (the Secret gets a Warning
Event; every controller reading it uses the default), a node whose CPU vendor is 63 characters long (the
worker's CPU key then makes label keys no object may carry; the node gets a Warning Event and the
NodeFeature carries only the valid labels), and a Devices ledger of a manufacturer the operator does not
know (the Devices gets a Warning Event; the management mark is still copied). The controllers run under
the real manager over scripted informers (chain_world), with the manager's recorder faked.
"""

from __future__ import annotations

import logging

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import MANAGED_LABEL, SETTINGS_SECRET
from gpustack_operator.controllerkit.problems import ProblemReporter
from gpustack_operator.controllers import devices_labels, instance_type, node_feature, node_flavor
from gpustack_operator.kube.resources import DEVICES, INSTANCE_TYPES, NODE_FEATURES, NODES, SECRETS
from tests.unit.controllerkit.fakes import FakeRecorder

from .chain_world import SYSTEM, World, world

VENDOR = "feature.node.kubernetes.io/cpu-model."
GENERAL = "general.feature.gpustack.ai/"


def warnings(w: World, kind: str, name: str) -> list[tuple[str, str]]:
    """(reason, note) of every Warning Event recorded about the object."""
    return [
        (reason, note)
        for regarding, type_, reason, note in w.recorder.events
        if type_ == "Warning" and regarding["kind"] == kind and regarding["name"] == name
    ]


CPU_TYPE: JSONObj = {
    "metadata": {"name": "gpustack--generic-linux-amd64"},
    "spec": {"acceleratable": False, "generalGroup": "generic", "os": "linux", "arch": "amd64"},
}


def a_node(name: str, vendor: str, cpus: str = "8", labels: dict[str, str] | None = None) -> JSONObj:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {**cpu_labels(vendor), **(labels or {})}},
        "status": {"capacity": {"cpu": cpus}},
    }


def cpu_labels(vendor: str) -> dict[str, str]:
    return {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        VENDOR + "vendor_id": vendor,
        VENDOR + "family": "1",
        VENDOR + "id": "2",
    }


async def test_a_setting_that_does_not_parse_is_one_warning_event_on_the_secret_until_fixed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    async with world(node_flavor.controller, instance_type.controller, aware_cpu_manufacturer="maybe") as w:
        w.put(NODES, a_node("n1", "AMD", labels={MANAGED_LABEL: "true", GENERAL + "amd-1-2.count": "8"}))
        w.put(INSTANCE_TYPES, CPU_TYPE)
        await w.settle(lambda: bool(w.recorder.events))
        # Both controllers read the setting, several times; one view reports it once.
        assert warnings(w, "Secret", SETTINGS_SECRET) == [
            (
                "InvalidSetting",
                "setting instance-type-aware-cpu-manufacturer is unusable ('maybe' is not a boolean; use one "
                "of 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False); using its default 'false'",
            )
        ]
        regarding = w.recorder.events[0][0]
        assert (regarding["namespace"], regarding["apiVersion"]) == (SYSTEM, "v1")
        logged = [r.getMessage() for r in caplog.records if "InvalidSetting" in r.getMessage()]
        assert len(logged) == 1, logged
        assert f"{SYSTEM}/{SETTINGS_SECRET}" in logged[0]

        w.set(aware_cpu_manufacturer="false")  # fixed: nothing new
        await w.settle()
        assert len(warnings(w, "Secret", SETTINGS_SECRET)) == 1
        w.set(aware_cpu_manufacturer="maybe")  # broken again: reported again
        await w.settle(lambda: len(warnings(w, "Secret", SETTINGS_SECRET)) == 2)


async def test_a_node_whose_cpu_key_makes_invalid_label_keys_is_warned_and_publishes_the_valid_ones() -> None:
    long_vendor = "Z" * 63
    async with world(node_feature.controller) as w:
        w.put(NODES, a_node("junk", long_vendor))
        w.put(NODES, a_node("fine", "AMD"))
        await w.settle(lambda: w.get(NODE_FEATURES, f"{SYSTEM}/junk-gpustack-worker") is not None)
        junk = w.get(NODE_FEATURES, f"{SYSTEM}/junk-gpustack-worker")
        assert junk is not None
        key = "z" * 63
        assert junk["spec"]["labels"] == {MANAGED_LABEL: "true", GENERAL + key: "true"}
        ((reason, note),) = warnings(w, "Node", "junk")
        assert reason == "InvalidNodeLabels"
        assert f"label key '{GENERAL}{key}-1-2' is not a valid label key" in note
        assert f"left out of NodeFeature {SYSTEM}/junk-gpustack-worker" in note
        fine = w.get(NODE_FEATURES, f"{SYSTEM}/fine-gpustack-worker")
        assert fine is not None
        assert fine["spec"]["labels"][GENERAL + "amd-1-2.count"] == "8"
        assert warnings(w, "Node", "fine") == []

        # The node changes (a heartbeat, a new label) but not its problem: no second warning.
        w.update(NODES, "junk", {"metadata": {"labels": {"team": "a"}}})
        await w.settle()
        assert len(warnings(w, "Node", "junk")) == 1


async def test_a_devices_ledger_of_an_unknown_manufacturer_is_warned_and_still_gets_the_mark() -> None:
    group = {"id": "x1", "manufacturer": "acme", "name": "Acme X1", "memory": 1024, "accelerators": []}
    async with world(devices_labels.controller) as w:
        w.put(NODES, {"metadata": {"name": "n1", "labels": {MANAGED_LABEL: "true"}}})
        w.put(DEVICES, {"metadata": {"name": "n1"}, "spec": {"groups": [group]}})
        await w.settle(lambda: bool((w.get(DEVICES, "n1") or {})["metadata"].get("labels")))
        devices = w.get(DEVICES, "n1")
        assert devices is not None
        assert devices["metadata"]["labels"] == {MANAGED_LABEL: "true"}
        ((reason, note),) = warnings(w, "Devices", "n1")
        assert reason == "UnknownManufacturer"
        assert note.startswith("spec.groups name unknown manufacturer(s) 'acme' (known: amd, ascend, ")
        w.update(DEVICES, "n1", {"spec": {"groups": [{**group, "manufacturer": "nvidia"}]}})
        await w.settle()
        assert len(warnings(w, "Devices", "n1")) == 1


def test_the_reporter_warns_once_per_object_and_topic_and_again_after_a_fix() -> None:
    recorder = FakeRecorder()
    reporter = ProblemReporter(recorder)
    secret = {"metadata": {"name": SETTINGS_SECRET, "namespace": SYSTEM, "uid": "u1"}}
    for _ in range(3):
        reporter.report(SECRETS, secret, "InvalidSetting", "a is bad", topic="a")
    reporter.report(SECRETS, secret, "InvalidSetting", "b is bad", topic="b")
    reporter.report(SECRETS, secret, "InvalidSetting", "a is worse", topic="a")
    reporter.report(SECRETS, secret, "InvalidSetting", None, topic="a")
    reporter.report(SECRETS, secret, "InvalidSetting", "a is worse", topic="a")
    assert [note for _, _, _, note in recorder.events] == ["a is bad", "b is bad", "a is worse", "a is worse"]
    assert recorder.events[0][0] == {
        "apiVersion": "v1",
        "kind": "Secret",
        "name": SETTINGS_SECRET,
        "namespace": SYSTEM,
        "uid": "u1",
    }
    ProblemReporter(None).report(SECRETS, secret, "InvalidSetting", "logged only")  # no recorder: no error
