"""The few Kubernetes API calls the GPU Operator backend makes, as plain JSON documents.

Through ``kubernetes_asyncio`` (the maintained asyncio client generated from the API's
OpenAPI description). Responses are read as JSON, the documents ``kubectl get -o json``
prints, so the pure mapping (``kubernetes_states``) reads the same shape as the
fixtures. The kubeconfig is found as kubectl finds it: ``--kubeconfig``, else every
file in ``KUBECONFIG`` (merged), else ``~/.kube/config``; the context is
``--context`` or the file's ``current-context``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from cockpit.fleet.backends.base import BackendError

JsonObject = dict[str, Any]

CLUSTER_POLICY = ("nvidia.com", "v1", "clusterpolicies")
#: per-pool drivers, cluster-scoped (gpu-operator api/nvidia/v1alpha1/nvidiadriver_types.go:521)
NVIDIA_DRIVER = ("nvidia.com", "v1alpha1", "nvidiadrivers")
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def kubeconfig_path(explicit: str | None) -> str:
    """``--kubeconfig``, else ``KUBECONFIG`` (a ``:``-separated list, merged), else ``~/.kube/config``."""
    if explicit:
        return str(Path(explicit).expanduser())
    env = os.environ.get("KUBECONFIG")
    if env:
        return env
    return str(Path("~/.kube/config").expanduser())


class KubeApiError(BackendError):
    """The API server refused or could not be reached; the status and its message, one line."""

    def __init__(self, what: str, status: int, message: str) -> None:
        super().__init__(f"{what}: {status} {message}".strip())
        self.status = status


class KubeApi:
    """One connection to one API server, holding the client until :meth:`close`."""

    def __init__(self, api_client: Any, request_timeout_s: float) -> None:
        from kubernetes_asyncio import client

        self._client = api_client
        self._core = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._timeout = request_timeout_s

    @classmethod
    async def connect(cls, *, kubeconfig: str | None, context: str | None, request_timeout_s: float = 10.0) -> KubeApi:
        try:
            from kubernetes_asyncio import client, config
        except ImportError as e:  # pragma: no cover - a dependency of the package
            raise BackendError(f"the Kubernetes backend needs kubernetes_asyncio: {e}") from e
        path = kubeconfig_path(kubeconfig)
        configuration = client.Configuration()
        try:
            await config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
        except (config.ConfigException, OSError, ValueError, KeyError, TypeError) as e:
            raise BackendError(f"kubeconfig {path}: {' '.join(str(e).split())}") from e
        return cls(client.ApiClient(configuration), request_timeout_s)

    async def close(self) -> None:
        await self._client.close()

    async def _json(self, what: str, call: Any, *args: Any, **kwargs: Any) -> JsonObject:
        status, body = await self._body(what, call, *args, **kwargs)
        doc = json.loads(body)
        if not isinstance(doc, dict):
            raise KubeApiError(what, status, "the answer is not a JSON object")
        return doc

    async def _body(self, what: str, call: Any, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        from aiohttp import ClientError

        try:
            response = await call(*args, _preload_content=False, _request_timeout=self._timeout, **kwargs)
        except (ClientError, OSError, TimeoutError) as e:
            raise KubeApiError(what, 0, f"cannot reach the API server: {e}") from e
        except Exception as e:  # the client's ApiException (a request it could not make)
            raise KubeApiError(what, int(getattr(e, "status", 0) or 0), " ".join(str(e).split())) from e
        async with response:
            body = await response.read()
            if not 200 <= response.status <= 299:
                try:
                    message = str(json.loads(body).get("message", ""))
                except (ValueError, AttributeError):
                    message = body.decode(errors="replace")[:200]
                raise KubeApiError(what, response.status, message)
            return int(response.status), body

    # ---- reads ---------------------------------------------------------------------
    async def list_nodes(self, label_selector: str = "") -> JsonObject:
        return await self._json("list nodes", self._core.list_node, label_selector=label_selector)

    async def get_node(self, name: str) -> JsonObject:
        return await self._json(f"get node {name}", self._core.read_node, name)

    async def list_pods(
        self, *, node: str | None = None, label_selector: str = "", namespace: str | None = None
    ) -> list[JsonObject]:
        field = f"spec.nodeName={node}" if node else ""
        if namespace:
            doc = await self._json(
                "list pods",
                self._core.list_namespaced_pod,
                namespace,
                field_selector=field,
                label_selector=label_selector,
            )
        else:
            doc = await self._json(
                "list pods", self._core.list_pod_for_all_namespaces, field_selector=field, label_selector=label_selector
            )
        items: list[JsonObject] = doc.get("items") or []
        return items

    async def list_events(self, *, kind: str, name: str) -> list[JsonObject]:
        doc = await self._json(
            f"list events of {kind.lower()}/{name}",
            self._core.list_event_for_all_namespaces,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
        )
        items: list[JsonObject] = doc.get("items") or []
        return items

    async def cluster_policy(self, name: str | None) -> JsonObject:
        group, version, plural = CLUSTER_POLICY
        if name:
            return await self._json(
                f"get clusterpolicy {name}", self._custom.get_cluster_custom_object, group, version, plural, name
            )
        doc = await self._json("list clusterpolicies", self._custom.list_cluster_custom_object, group, version, plural)
        items: list[JsonObject] = doc.get("items") or []
        if len(items) != 1:
            raise BackendError(
                f"{len(items)} ClusterPolicies on the cluster; name the one to use (--cluster-policy)"
                if items
                else "no ClusterPolicy on the cluster: is the NVIDIA GPU Operator installed?"
            )
        return items[0]

    async def list_daemonsets(self, namespace: str, label_selector: str = "") -> list[JsonObject]:
        doc = await self._json(
            f"list daemonsets in {namespace}",
            self._apps.list_namespaced_daemon_set,
            namespace,
            label_selector=label_selector,
        )
        items: list[JsonObject] = doc.get("items") or []
        return items

    async def driver_daemonsets(self, namespace: str) -> list[JsonObject]:
        """The driver's DaemonSets, whatever they are named (one, or one per kernel or RHCOS
        version), or one line why there are none."""
        from cockpit.fleet.backends import kubernetes_states as ks

        found = [d for d in await self.list_daemonsets(namespace) if ks.is_driver(d)]
        if not found:
            key, value = ks.DRIVER_COMPONENT
            raise KubeApiError(
                f"find the driver DaemonSets in {namespace}", 404, f"none labelled {key}={value} or app={ks.DRIVER_APP}"
            )
        return found

    async def nvidia_drivers(self) -> dict[str, JsonObject]:
        group, version, plural = NVIDIA_DRIVER
        doc = await self._json("list nvidiadrivers", self._custom.list_cluster_custom_object, group, version, plural)
        return {str(d.get("metadata", {}).get("name", "")): d for d in doc.get("items") or []}

    async def patch_nvidia_driver(self, name: str, spec: Mapping[str, Any]) -> JsonObject:
        return await self._merge_patch_custom(NVIDIA_DRIVER, "nvidiadriver", name, {"spec": dict(spec)})

    async def _merge_patch_custom(
        self, kind: tuple[str, str, str], what: str, name: str, patch: Mapping[str, Any]
    ) -> JsonObject:
        # custom resources take no strategic merge patch: the API server answers 415
        group, version, plural = kind
        return await self._json(
            f"patch {what} {name}",
            self._custom.patch_cluster_custom_object,
            group,
            version,
            plural,
            name,
            dict(patch),
            _content_type=MERGE_PATCH,
        )

    async def daemonset(self, namespace: str, name: str) -> JsonObject:
        return await self._json(
            f"get daemonset {namespace}/{name}", self._apps.read_namespaced_daemon_set, name, namespace
        )

    # ---- writes --------------------------------------------------------------------
    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> JsonObject:
        return await self._json(
            f"patch node {name}", self._core.patch_node, name, dict(patch), _content_type=STRATEGIC_PATCH
        )

    async def patch_cluster_policy(self, name: str, patch: Mapping[str, Any]) -> JsonObject:
        return await self._merge_patch_custom(CLUSTER_POLICY, "clusterpolicy", name, patch)

    async def get_pod(self, namespace: str, name: str) -> JsonObject:
        return await self._json(f"get pod {namespace}/{name}", self._core.read_namespaced_pod, name, namespace)

    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> JsonObject:
        name = pod.get("metadata", {}).get("name", "")
        return await self._json(
            f"create pod {namespace}/{name}", self._core.create_namespaced_pod, namespace, dict(pod)
        )

    async def pod_log(self, namespace: str, name: str) -> str:
        _status, body = await self._body(
            f"read the log of pod {namespace}/{name}", self._core.read_namespaced_pod_log, name, namespace
        )
        return body.decode(errors="replace")

    async def delete_pod(self, namespace: str, name: str) -> JsonObject:
        return await self._json(f"delete pod {namespace}/{name}", self._core.delete_namespaced_pod, name, namespace)

    async def evict_pod(self, namespace: str, name: str) -> JsonObject:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        return await self._json(
            f"evict pod {namespace}/{name}", self._core.create_namespaced_pod_eviction, name, namespace, body
        )

    # ---- watch ---------------------------------------------------------------------
    async def watch_nodes(self, resource_version: str, timeout_s: int) -> AsyncIterator[tuple[str, JsonObject]]:
        """``(type, node)`` for each change after ``resource_version``, until the server ends the watch."""
        from aiohttp import ClientError

        try:
            response = await self._core.list_node(
                watch=True,
                resource_version=resource_version,
                timeout_seconds=timeout_s,
                allow_watch_bookmarks=False,
                _preload_content=False,
                _request_timeout=timeout_s + self._timeout,
            )
        except (ClientError, OSError, TimeoutError) as e:
            raise KubeApiError("watch nodes", 0, f"cannot reach the API server: {e}") from e
        async with response:
            if response.status != 200:
                raise KubeApiError("watch nodes", response.status, (await response.text())[:200])
            async for raw in response.content:
                line = raw.strip()
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise KubeApiError("watch nodes", int(obj.get("code", 0)), str(obj.get("message", "")))
                yield str(event.get("type")), event.get("object") or {}
