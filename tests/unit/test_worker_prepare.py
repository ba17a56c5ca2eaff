"""Prepare's steps against a scripted client: races with another replica, and CRDs that never settle."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.resources import Resource
from gpustack_operator.settings import secret
from gpustack_operator.worker.prepare import (
    PrepareError,
    initialize_settings,
    install_admission_check,
    install_crds,
    install_node_feature_rule,
)

VALUES = {"image-pull-policy": "IfNotPresent", "node-management-manual": "false"}


def conflict() -> errors.Conflict:
    return errors.Conflict(status=409, reason="Conflict", message="the object has been modified")


class SecretApi:
    """One Secret; `races` lists errors the next writes hit (another replica got there first, and what it
    wrote, `theirs`, is what a re-read then returns)."""

    def __init__(
        self,
        current: JSONObj | None = None,
        races: list[errors.KubeError] | None = None,
        theirs: JSONObj | None = None,
    ) -> None:
        self.current = current
        self.races = list(races or [])
        self.theirs = theirs
        self.patches: list[JSONObj] = []

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj | None:
        return self.current

    def _race(self) -> None:
        if self.races:
            self.current = self.theirs or self.current
            raise self.races.pop(0)

    async def create(self, res: Resource, obj: JSONObj, namespace: str | None = None) -> JSONObj:
        self._race()
        self.current = obj
        return obj

    async def patch(self, res: Resource, name: str, patch: JSONObj, **_: Any) -> JSONObj:
        self._race()
        self.patches.append(patch)
        return patch


async def test_a_secret_created_by_another_replica_meanwhile_is_backfilled_instead() -> None:
    theirs = {"metadata": {"name": secret.SECRET_NAME, "resourceVersion": "5"}, "data": {}}
    exists = errors.AlreadyExists(status=409, reason="AlreadyExists", message="exists")
    api = SecretApi(races=[exists], theirs=theirs)
    await initialize_settings(api, "gpustack-system", VALUES)  # type: ignore[arg-type]
    [patch] = api.patches
    assert set(patch["data"]) == set(VALUES)
    assert patch["metadata"]["resourceVersion"] == "5"


async def test_a_concurrent_edit_makes_the_backfill_reread_and_retry() -> None:
    current = {"metadata": {"name": secret.SECRET_NAME, "resourceVersion": "5"}, "data": {}}
    api = SecretApi(current, races=[conflict()])
    await initialize_settings(api, "gpustack-system", VALUES)  # type: ignore[arg-type]
    assert len(api.patches) == 1


async def test_a_secret_that_keeps_changing_fails_prepare_by_name() -> None:
    current = {"metadata": {"name": secret.SECRET_NAME, "resourceVersion": "5"}, "data": {}}
    api = SecretApi(current, races=[conflict() for _ in range(5)])
    with pytest.raises(PrepareError, match="gpustack-system/gpustack-settings kept changing"):
        await initialize_settings(api, "gpustack-system", VALUES)  # type: ignore[arg-type]


async def test_a_complete_secret_is_not_written() -> None:
    complete = secret.new_secret(VALUES, namespace="gpustack-system")
    complete["metadata"]["resourceVersion"] = "5"
    api = SecretApi(complete)
    await initialize_settings(api, "gpustack-system", VALUES)  # type: ignore[arg-type]
    assert api.patches == []


class CrdApi:
    def __init__(self, established: set[str]) -> None:
        self.established = established
        self.applied: list[str] = []

    async def apply(self, res: Resource, obj: JSONObj) -> JSONObj:
        assert res == resources.CRDS
        self.applied.append(obj["metadata"]["name"])
        return obj

    async def get(self, res: Resource, name: str) -> JSONObj:
        status = "True" if name in self.established else "False"
        return {"status": {"conditions": [{"type": "Established", "status": status}]}}


async def test_crds_are_applied_and_awaited_until_established() -> None:
    api = CrdApi(
        {"instancetypes.worker.gpustack.ai", "devices.worker.gpustack.ai", "instances.worker.gpustack.ai"}
    )
    await install_crds(api, timeout=5)  # type: ignore[arg-type]
    assert sorted(api.applied) == sorted(api.established)


async def test_a_crd_that_never_becomes_established_fails_prepare_naming_it() -> None:
    api = CrdApi({"instancetypes.worker.gpustack.ai", "devices.worker.gpustack.ai"})
    with pytest.raises(PrepareError, match=r"not Established within 1s: instances\.worker\.gpustack\.ai"):
        await install_crds(api, timeout=1)  # type: ignore[arg-type]


class RuleApi:
    """Server-side applies of NodeFeatureRules; `served` False plays a cluster without NFD's CRDs."""

    def __init__(self, served: bool = True) -> None:
        self.served = served
        self.applied: list[JSONObj] = []

    async def apply(self, res: Resource, obj: JSONObj) -> JSONObj:
        assert res == resources.NODE_FEATURE_RULES
        if not self.served:
            raise errors.NotFound(status=404, reason="NotFound", message="the server could not find it")
        self.applied.append(obj)
        return obj


async def test_the_cpu_info_rule_is_applied_for_every_known_manufacturer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUSTACK_THEAD_PCI_VENDOR_ID", "0302_abcd")
    api = RuleApi()
    await install_node_feature_rule(api)  # type: ignore[arg-type]
    [rule] = api.applied
    assert rule["metadata"]["name"] == "gpustack-cpu-info"
    vendors = rule["spec"]["rules"][1]["matchFeatures"][0]["matchExpressions"]["vendor"]["value"]
    assert vendors == ["1002", "10de", "19e5", "1d94", "1e3e", "1ed5", "9999", "abcd", "cabc"]


async def test_a_cluster_without_nfd_fails_prepare_saying_so() -> None:
    with pytest.raises(PrepareError, match="NFD's CRDs are not installed"):
        await install_node_feature_rule(RuleApi(served=False))  # type: ignore[arg-type]


class CheckApi:
    """Server-side applies of AdmissionChecks; `served` False plays a cluster without Kueue's CRDs."""

    def __init__(self, served: bool = True) -> None:
        self.served = served
        self.applied: list[JSONObj] = []

    async def apply(self, res: Resource, obj: JSONObj) -> JSONObj:
        assert res == resources.ADMISSION_CHECKS
        if not self.served:
            raise errors.NotFound(status=404, reason="NotFound", message="the server could not find it")
        self.applied.append(obj)
        return obj


async def test_the_node_devices_admission_check_is_applied_without_finalizers() -> None:
    api = CheckApi()
    await install_admission_check(api)  # type: ignore[arg-type]
    assert api.applied == [
        {
            "metadata": {"name": "gpustack-node-devices"},
            "spec": {"controllerName": "worker.gpustack.ai/node-devices"},
        }
    ]


async def test_a_cluster_without_kueue_fails_prepare_saying_so() -> None:
    with pytest.raises(PrepareError, match="Kueue's CRDs are not installed"):
        await install_admission_check(CheckApi(served=False))  # type: ignore[arg-type]
