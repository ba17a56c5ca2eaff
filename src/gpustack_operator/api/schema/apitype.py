"""``ApiType``: one served kind, with the validation, (de)serialisation and schema derived from its source.

Why this module exists: callers (webhooks, controllers, the aggregated API server, the CRD generator) need
the same four things for every kind: validate with field paths, load into the typed shape, dump in the Go
wire form, and the openAPIV3Schema. Bundling them per kind keeps each kind's module to its field
declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar, cast

from marshmallow import ValidationError, fields

from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.base import GoSchema
from gpustack_operator.api.schema.errors import FieldError, InvalidObjectError, flatten
from gpustack_operator.api.schema.fields import Omit
from gpustack_operator.api.schema.openapi import object_schema

T = TypeVar("T")


def kind_schema(
    kind: str,
    description: str,
    *,
    spec: type[GoSchema],
    status: type[GoSchema] | None = None,
    spec_required: bool = False,
) -> type[GoSchema]:
    """The top-level object: ``apiVersion``, ``kind``, ``metadata``, ``spec`` and (optionally) ``status``.

    ``spec`` is always written (Go's value-typed struct); ``status`` only when the object has one, since
    kube-apiserver ignores it on create and only the status subresource writes it.
    """
    body: dict[str, fields.Field[Any]] = {
        "apiVersion": dsl.string(
            "APIVersion defines the versioned schema of this representation of an object."
        ),
        "kind": dsl.string("Kind is a string value representing the REST resource this object represents."),
        "metadata": dsl.metadata(),
        "spec": dsl.obj(spec, required=spec_required, omit=Omit.NEVER),
    }
    if status is not None:
        body["status"] = dsl.obj(status, omit=Omit.NIL)
    return dsl.struct(kind, description, body)


@dataclass(frozen=True)
class ApiType(Generic[T]):
    """A kind served at ``group/version``; ``T`` is its TypedDict shape after ``load``."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    schema: type[GoSchema] = field(repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def _instance(self) -> GoSchema:
        return self.schema()

    def _identity_errors(self, obj: Mapping[str, Any]) -> list[FieldError]:
        expected = {"apiVersion": self.api_version, "kind": self.kind}
        return [
            FieldError(key, f"must be {want!r}")
            for key, want in expected.items()
            if key in obj and obj[key] != want
        ]

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        """Every schema violation in ``obj`` (wire form), by field path; empty when valid."""
        try:
            self.load(obj)
        except InvalidObjectError as e:
            return e.errors
        return []

    def load(self, obj: Mapping[str, Any]) -> T:
        """Validate ``obj`` and return it with defaults and Go zero values filled in."""
        errors = self._identity_errors(obj) if isinstance(obj, Mapping) else []
        try:
            loaded = self._instance.load(obj)
        except ValidationError as e:
            errors += flatten(e.messages)
        if errors:
            raise InvalidObjectError(self.kind, sorted(errors))
        return cast("T", loaded)

    def dump(self, obj: T | Mapping[str, Any]) -> dict[str, Any]:
        """The Go wire form: always-written fields present, ``omitempty`` fields dropped when empty."""
        dumped = self._instance.dump(obj)
        assert isinstance(dumped, dict)
        return dumped

    def openapi_schema(self) -> dict[str, Any]:
        """The openAPIV3Schema of this kind (structural, every node inline)."""
        return object_schema(self.schema)
