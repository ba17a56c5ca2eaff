"""What authentication and authorization ask of kube-apiserver: the trust ConfigMap and the reviews.

`kube-system/extension-apiserver-authentication` names the front proxy's CA, its allowed CNs and header
names (kube-apiserver keeps it current); TokenReview and SubjectAccessReview are posted with the worker's
own credentials, which need the `system:auth-delegator` ClusterRole and the
`extension-apiserver-authentication-reader` Role in kube-system (guide §4.2).
"""

from __future__ import annotations

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.authn import RequestHeaderConfig, TokenReviewer, User, user_from_token_review
from gpustack_operator.apiserver.authz import Reviewer
from gpustack_operator.controllerkit.rbac import BuiltInRole, Rule
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client

__all__ = [
    "AUTH_CONFIGMAP",
    "BUILT_IN_ROLES",
    "access_reviewer",
    "load_request_header_config",
    "token_reviewer",
]

AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")
TOKEN_REVIEWS = resources.TOKEN_REVIEWS.path()
ACCESS_REVIEWS = resources.SUBJECT_ACCESS_REVIEWS.path()

BUILT_IN_ROLES: tuple[BuiltInRole, ...] = (
    BuiltInRole(
        "ClusterRole",
        "system:auth-delegator",
        (Rule.of(resources.TOKEN_REVIEWS, "create"), Rule.of(resources.SUBJECT_ACCESS_REVIEWS, "create")),
    ),
    BuiltInRole(
        "Role",
        "extension-apiserver-authentication-reader",
        (Rule.of(resources.CONFIGMAPS, "get", namespace=AUTH_CONFIGMAP[0]),),
        namespace=AUTH_CONFIGMAP[0],
    ),
)
"""What delegated authentication and authorization call, granted by roles Kubernetes ships (the chart
binds them to the worker's ServiceAccount)."""


async def load_request_header_config(client: Client) -> RequestHeaderConfig:
    """The parsed trust ConfigMap (an empty config, trusting no front proxy, when it is absent)."""
    namespace, name = AUTH_CONFIGMAP
    cm = await client.get_or_none(resources.CONFIGMAPS, name, namespace)
    return RequestHeaderConfig.from_configmap_data((cm or {}).get("data") or {})


def token_reviewer(client: Client) -> TokenReviewer:
    async def review(token: str) -> User | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        return user_from_token_review(await client.request("POST", TOKEN_REVIEWS, body=body, retries=1))

    return review


def access_reviewer(client: Client) -> Reviewer:
    async def review(body: JSONObj) -> JSONObj:
        return await client.request("POST", ACCESS_REVIEWS, body=body, retries=1)

    return review
