"""One schema source per API type: validation, Go-exact (de)serialisation and the CRD openAPIV3Schema.

Each kind module declares its fields once with ``dsl`` and exposes an ``ApiType``:

- ``validate(obj)`` -> ``[FieldError(path, message)]`` (paths like ``spec.unitResources.cpu``);
- ``load(obj)`` -> the TypedDict of ``api.types`` with defaults and Go zero values filled in, or
  ``InvalidObjectError``;
- ``dump(obj)`` -> the wire form a Go client writes (always-serialised fields present, ``omitempty`` ones
  dropped when empty);
- ``openapi_schema()`` -> the structural openAPIV3Schema (``structural.structural_errors`` checks it).
"""

from gpustack_operator.api.schema.apitype import ApiType
from gpustack_operator.api.schema.devices import DEVICES
from gpustack_operator.api.schema.errors import FieldError, InvalidObjectError
from gpustack_operator.api.schema.instance import INSTANCE
from gpustack_operator.api.schema.instancetype import INSTANCE_TYPE
from gpustack_operator.api.schema.setting import SETTING

__all__ = ["DEVICES", "INSTANCE", "INSTANCE_TYPE", "SETTING", "ApiType", "FieldError", "InvalidObjectError"]
