"""Which representation the client asked for in `Accept` (guide §3.2).

kubectl's human output asks for a `meta.k8s.io` Table first, the metadata client (garbage collector,
namespace controller) for PartialObjectMetadata(List), everyone else for JSON. We take the first media
type in the list we can produce; protobuf and CBOR alternatives are skipped; nothing acceptable is 406.
"""

from __future__ import annotations

import enum

from gpustack_operator.apiserver.status import not_acceptable

__all__ = ["ACCEPTED", "Representation", "negotiate"]


class Representation(enum.Enum):
    JSON = "json"
    TABLE = "Table"
    PARTIAL = "PartialObjectMetadata"
    PARTIAL_LIST = "PartialObjectMetadataList"


ACCEPTED = (
    "application/json",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
)

_JSON_TYPES = ("application/json", "application/*", "*/*")
_TRANSFORMS = {r.value: r for r in Representation if r is not Representation.JSON}


def _one(media: str) -> Representation | None:
    kind, *raw = (part.strip() for part in media.split(";"))
    params = {}
    for item in raw:
        key, _, value = item.partition("=")
        params[key.strip().lower()] = value.strip()
    if kind.lower() not in _JSON_TYPES:
        return None
    transform = params.get("as")
    if transform is None:
        return Representation.JSON
    if params.get("g") != "meta.k8s.io" or params.get("v") not in ("v1", "v1beta1"):
        return None
    return _TRANSFORMS.get(transform)


def negotiate(accept: str, *, is_list: bool) -> Representation:
    """The first acceptable representation for a list or a single object, else a 406 Status.

    PartialObjectMetadata fits a single object (and each watch event), PartialObjectMetadataList a list.
    """
    if not accept.strip():
        return Representation.JSON
    for media in accept.split(","):
        rep = _one(media)
        if rep is None:
            continue
        if (rep is Representation.PARTIAL and is_list) or (
            rep is Representation.PARTIAL_LIST and not is_list
        ):
            continue
        return rep
    raise not_acceptable(ACCEPTED)
