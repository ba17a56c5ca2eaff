"""What kube-apiserver stores after a mutating hook's answer: the review's object with the patch applied."""

from __future__ import annotations

import base64
import json

import jsonpatch

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.webhooks.review import Review, Verdict, answer


def patched(review: Review, verdict: Verdict) -> JSONObj:
    """The object as kube-apiserver would store it: `verdict` answered, its JSON patch applied."""
    assert review.object is not None
    response = answer(review, verdict)["response"]
    if "patch" not in response:
        return review.object
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    result: JSONObj = jsonpatch.apply_patch(review.object, ops)
    return result
