"""A kubeconfig file made into kubernetes-asyncio's ApiClient, the transport kube.client sends through.

kubernetes-asyncio reads every kind of kubeconfig (contexts, client certificates, exec and auth-provider
plugins, token refresh), so it stays the loader for them; it costs about 40 MB resident to import, so this
module is imported only when a kubeconfig is given (kube.client.connect) and a Pod using its service
account (kube.incluster) never loads it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from gpustack_operator.kube import errors


async def api_client(kubeconfig: Path, *, context: str | None = None) -> Any:
    """An ApiClient for the file's `context` (default: its current one); KubeConfigError when the file
    or the context is missing or unusable."""
    if not await asyncio.to_thread(kubeconfig.is_file):
        raise errors.KubeConfigError(f"kubeconfig {kubeconfig} does not exist or is not a file")
    configuration = k8s_client.Configuration()
    try:
        await k8s_config.load_kube_config(
            config_file=str(kubeconfig), context=context, client_configuration=configuration
        )
    except (k8s_config.ConfigException, OSError) as exc:
        raise errors.KubeConfigError(f"cannot use kubeconfig {kubeconfig}: {exc}") from exc
    return k8s_client.ApiClient(configuration)


def url_client(host: str, *, token: str | None = None, insecure: bool = False) -> Any:
    """An ApiClient for the server at `host` (a URL, path prefix allowed) with an optional bearer token."""
    configuration = k8s_client.Configuration()
    configuration.host = host.rstrip("/")
    configuration.verify_ssl = not insecure
    if token:
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
    return k8s_client.ApiClient(configuration)
