"""The gpustack-cpu-info NodeFeatureRule asks NFD for exactly the annotations and label of contract §5.3."""

from __future__ import annotations

import pytest

from gpustack_operator.rules.naming.cpuinforule import cpu_annotation_values, cpu_info_rule

CONTRACT_ANNOTATIONS = {
    f"feature.gpustack.ai/cpu-{key}": f"@cpu.model.{attribute}"
    for key, attribute in [
        ("name", "name"),
        ("family", "family"),
        ("physical-cores", "physical_cores"),
        ("threads-per-core", "threads_per_core"),
        ("logical-cores", "logical_cores"),
        ("stepping", "stepping"),
        ("cache-line", "cache_line"),
        ("hz", "hz"),
        ("boost-freq", "boost_freq"),
        ("cache-l1i", "cache_l1i"),
        ("cache-l1d", "cache_l1d"),
        ("cache-l2", "cache_l2"),
        ("cache-l3", "cache_l3"),
    ]
}


def test_each_cpu_annotation_refers_to_its_cpu_model_attribute() -> None:
    assert cpu_annotation_values() == CONTRACT_ANNOTATIONS


def test_annotations_apply_to_every_node_whose_cpu_vendor_nfd_knows() -> None:
    details = cpu_info_rule(["10de"])["spec"]["rules"][0]
    assert details["annotations"] == CONTRACT_ANNOTATIONS
    assert details["matchFeatures"] == [
        {"feature": "cpu.model", "matchExpressions": {"vendor_id": {"op": "Exists"}}}
    ]


def test_nodes_without_a_managed_accelerator_class_device_are_labelled_not_acceleratable() -> None:
    rule = cpu_info_rule(["10de", "19E5", "10de"])
    assert rule["metadata"]["name"] == "gpustack-cpu-info"
    assert rule["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1"
    _, detect, label = rule["spec"]["rules"]
    (device,) = detect["matchFeatures"]
    assert device["feature"] == "pci.device"
    assert device["matchExpressions"] == {
        "class": {"op": "InRegexp", "value": ["^02", "^03", "^0b", "^12"]},
        "vendor": {"op": "In", "value": ["10de", "19e5"]},
    }
    (var,) = detect["vars"]
    assert label["labels"] == {"feature.gpustack.ai/acceleratable": "false"}
    assert label["matchFeatures"] == [
        {"feature": "rule.matched", "matchExpressions": {var: {"op": "DoesNotExist"}}}
    ]


def test_a_rule_without_any_managed_vendor_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one managed PCI vendor ID"):
        cpu_info_rule([])
