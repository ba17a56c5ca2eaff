"""`settings.gpustack.ai/v1`: each operator setting as an object, backed by one key of a Secret (§2.7, §6).

Why this module exists: admins change the operator's behaviour (overcommit, derived InstanceTypes, the
SSH image, ...) by writing settings; a raw Secret edit accepts any text, so a typo such as `ture` would
silently read as a default. Here every setting of the catalog (but the private ones) is a `Setting` in the
system namespace: `status` shows its description, whether it is editable or sensitive, and its value
(`(sensitive)` for a sensitive one); `spec.value` is the write side. A write runs the setting's admission
checks (settings.admission) and is refused with a 422 naming `spec.value` and the reason, as is a setting
that is not editable; an unknown name is a 404. Only get, list, update (PUT) and merge patch exist:
`kubectl get/describe/edit/patch --type=merge` work; JSON and strategic-merge patches and server-side apply
are 415, watch and the other verbs 405.

Reads go to the API server (the Secret is one small object; a write must see the value it replaces). The
Secret's resourceVersion is every Setting's resourceVersion, so a write carrying one is conditional on the
whole Secret being unchanged (409 Conflict otherwise), and the write itself is a patch of the one data key.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from gpustack_operator.api import field
from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import CATEGORY, CORE_GROUP, V1
from gpustack_operator.api.schema.setting import SETTING
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.negotiation import negotiate
from gpustack_operator.apiserver.registry.generic.crdproxy import decode_json, patch_type
from gpustack_operator.apiserver.registry.generic.representation import render_list, render_object
from gpustack_operator.apiserver.requestinfo import is_watch
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.status import (
    StatusError,
    bad_request,
    invalid,
    method_not_allowed,
    not_found,
)
from gpustack_operator.apiserver.table import Column
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import MERGE_PATCH, Client
from gpustack_operator.kube.patches import merge_patch
from gpustack_operator.settings import secret
from gpustack_operator.settings.catalog import SETTINGS
from gpustack_operator.settings.setting import Setting, SettingValueError

__all__ = ["COLUMNS", "RESOURCE", "SCHEMA", "SERVED", "SettingsAPI", "setting_object"]

SENSITIVE_VALUE: Final = "(sensitive)"

SERVED = ServedResource(
    group=CORE_GROUP,
    version=V1,
    plural="settings",
    singular="setting",
    kind="Setting",
    namespaced=True,
    verbs=("get", "list", "patch", "update"),
    short_names=("set",),
    categories=(CATEGORY,),
    patch_types=(MERGE_PATCH,),
)
SCHEMA = SETTING.openapi_schema()
QUALIFIED: Final = f"{SERVED.plural}.{SERVED.group}"


def _status(key: str) -> Any:
    return lambda obj: (obj.get("status") or {}).get(key)


COLUMNS = (
    Column("Name", lambda obj: str(obj["metadata"]["name"]), format="name", description="The setting."),
    Column("Value", _status("value"), description="Its value, or (sensitive)."),
    Column("Editable", _status("editable"), type="boolean", description="Whether it can be written."),
    Column("Description", _status("description"), description="What it does.", priority=1),
)


def _visible(name: str) -> Setting | None:
    setting = SETTINGS.get(name)
    return None if setting is None or setting.private else setting


def setting_object(setting: Setting, stored: JSONObj | None, namespace: str) -> JSONObj:
    """The Setting as served, from the Secret (None: not created yet, every value is its default)."""
    meta = (stored or {}).get("metadata") or {}
    value = secret.decode_values(stored or {}).get(setting.name, setting.default)
    metadata: JSONObj = {"name": setting.name, "namespace": namespace}
    uid = (meta.get("annotations") or {}).get(secret.uid_annotation(setting.name))
    for key, found in (
        ("uid", uid),
        ("resourceVersion", meta.get("resourceVersion")),
        ("creationTimestamp", meta.get("creationTimestamp")),
    ):
        if found:
            metadata[key] = found
    return {
        "apiVersion": SERVED.api_version,
        "kind": SERVED.kind,
        "metadata": metadata,
        "spec": {},
        "status": {
            "description": setting.description,
            "editable": setting.editable,
            "sensitive": setting.sensitive,
            "value": SENSITIVE_VALUE if setting.sensitive else value,
        },
    }


def _decode(raw: bytes) -> JSONObj:
    doc = decode_json(raw)
    if not isinstance(doc, dict):
        raise bad_request("the body of the request must be a JSON object")
    return doc


def _refusal(name: str, error: field.FieldError) -> StatusError:
    return invalid(SERVED.kind, SERVED.group, name, [error])


class SettingsAPI:
    """The handlers; settings live in `namespace` (the system namespace) only."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def add_routes(self, router: web.UrlDispatcher) -> None:
        base = f"/apis/{SERVED.group}/{SERVED.version}"
        router.add_route("*", f"{base}/{SERVED.plural}", self.collection)
        router.add_route("*", f"{base}/namespaces/{{namespace}}/{SERVED.plural}", self.collection)
        router.add_route("*", f"{base}/namespaces/{{namespace}}/{SERVED.plural}/{{name}}", self.item)

    async def _secret(self) -> JSONObj | None:
        return await self.client.get_or_none(resources.SECRETS, secret.SECRET_NAME, self.namespace)

    async def collection(self, request: web.Request) -> web.Response:
        if request.method not in ("GET", "HEAD"):
            raise method_not_allowed(request.method.lower(), QUALIFIED)
        if is_watch(request.query):
            raise method_not_allowed("watch", QUALIFIED)
        rep = negotiate(request.headers.get("Accept", ""), is_list=True)
        stored = await self._secret()
        namespace = request.match_info.get("namespace", self.namespace)
        items = []
        if namespace == self.namespace:
            items = [setting_object(s, stored, self.namespace) for s in SETTINGS.values() if not s.private]
        version = str(((stored or {}).get("metadata") or {}).get("resourceVersion") or "")
        doc = {
            "apiVersion": SERVED.api_version,
            "kind": f"{SERVED.kind}List",
            "metadata": {"resourceVersion": version},
            "items": items,
        }
        return web.json_response(render_list(rep, doc, COLUMNS, request.query.get("includeObject", "")))

    async def item(self, request: web.Request) -> web.Response:
        name, namespace = request.match_info["name"], request.match_info["namespace"]
        setting = _visible(name) if namespace == self.namespace else None
        if request.method in ("GET", "HEAD"):
            if setting is None:
                raise not_found(SERVED.plural, SERVED.group, name)
            rep = negotiate(request.headers.get("Accept", ""), is_list=False)
            obj = setting_object(setting, await self._secret(), self.namespace)
            return web.json_response(render_object(rep, obj, COLUMNS, request.query.get("includeObject", "")))
        if request.method == "PUT":
            body = _decode(await request.read())
        elif request.method == "PATCH":
            patch_type(request, SERVED)
            patch = _decode(await request.read())
            if setting is None:
                raise not_found(SERVED.plural, SERVED.group, name)
            body = merge_patch(setting_object(setting, await self._secret(), self.namespace), patch)
        else:
            raise method_not_allowed(request.method.lower(), QUALIFIED)
        if setting is None:
            raise not_found(SERVED.plural, SERVED.group, name)
        return web.json_response(
            await self._write(setting, body, dry_run=request.query.get("dryRun") == "All")
        )

    async def _write(self, setting: Setting, body: JSONObj, *, dry_run: bool) -> JSONObj:
        spec = body.get("spec")
        value = spec.get("value") if isinstance(spec, dict) else None
        stored = await self._secret()
        if value is None:  # nothing to write: answer the object as it is
            return setting_object(setting, stored, self.namespace)
        if not isinstance(value, str):
            raise _refusal(setting.name, field.invalid("spec.value", value, "must be a string"))
        if not setting.editable:
            raise _refusal(setting.name, field.forbidden("spec.value", "this setting is not editable"))
        try:
            setting.admit(value, source="spec.value")
        except SettingValueError as e:
            shown = SENSITIVE_VALUE if setting.sensitive else value
            raise _refusal(setting.name, field.invalid("spec.value", shown, e.reason)) from None
        if stored is None:
            raise StatusError(
                503,
                "ServiceUnavailable",
                f"the settings Secret {self.namespace}/{secret.SECRET_NAME} does not exist yet",
            )
        meta: JSONObj = {}
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted:
            meta["resourceVersion"] = wanted
        patch = {"metadata": meta, "data": {setting.name: secret.encode(value)}}
        if dry_run:
            written = merge_patch(stored, {"data": patch["data"]})
        else:
            written = await self.client.patch(
                resources.SECRETS, secret.SECRET_NAME, patch, namespace=self.namespace
            )
        return setting_object(setting, written, self.namespace)


def _storage(backends: Backends) -> SettingsAPI:
    return SettingsAPI(backends.client, backends.namespace)


RBAC: tuple[Rule, ...] = (Rule.of(resources.SECRETS, "get", "patch", namespace=SYSTEM),)
"""Settings are the keys of the settings Secret: read it, and merge-patch it for patch and update."""
RESOURCE = Resource(SERVED, SCHEMA, _storage, COLUMNS, rbac=RBAC)
