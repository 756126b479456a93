"""A small Kubernetes API server on 127.0.0.1: the Kubernetes backend's tests and
``cockpit demo --backend kubernetes`` run against it.

No real kube-apiserver can be installed here (it needs etcd and a release binary
from outside the package registries), so this implements the part of the API the
backend calls, following the API conventions
(https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md)
and being stricter where unsure:

- ``GET`` list and get of nodes, pods, events, daemonsets and the GPU Operator's
  cluster-scoped ``clusterpolicies.nvidia.com`` (``+kubebuilder:resource:scope=Cluster``,
  NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go:2026), with
  ``labelSelector`` (``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``; set-based selectors are
  refused with 400 rather than half-implemented) and ``fieldSelector`` (only the fields
  the real server supports for that resource: ``metadata.name``,
  ``metadata.namespace``, ``spec.nodeName`` for pods, ``involvedObject.*`` for events;
  anything else answers 400 ``field label not supported`` as the real one does);
- ``?watch=true``: newline-delimited ``{"type": ..., "object": ...}`` from the given
  ``resourceVersion`` (or the current objects as ``ADDED`` first when none is given,
  the "get state and start at most recent" semantics), until ``timeoutSeconds``;
- ``PATCH`` with ``application/merge-patch+json`` (RFC 7386) and, for built-in kinds
  only, ``application/strategic-merge-patch+json`` (the same for the maps and scalars
  the backend patches; a patch carrying a list or a ``$patch`` directive is refused,
  since list merge keys are not implemented); custom resources refuse strategic merge
  with 415, as the real server does;
- ``DELETE`` of a pod sets ``deletionTimestamp`` and the simulated kubelet removes it
  on its next pass (graceful termination), and ``POST pods/{name}/eviction`` does the
  same (no PodDisruptionBudgets here);
- ``POST`` of a pod (a one-shot pod the simulated kubelet runs at once,
  :mod:`cockpit.sim.kube.run_pods`) and ``GET .../pods/{name}/log`` (400 while it waits to start);
- the GPU Operator's per-pool ``nvidiadrivers.nvidia.com/v1alpha1``, cluster-scoped too
  (api/nvidia/v1alpha1/nvidiadriver_types.go:521);
- an object's annotations past 256 KiB in all are refused with 422 (:mod:`cockpit.sim.kube.rules`);
- every request needs the kubeconfig's bearer token (401 otherwise).

Every write bumps one cluster-wide ``resourceVersion`` and is kept in a history, so a
test can ask what each node's labels were at every step (``label_history``).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from cockpit.sim.kube.rules import (
    BadRequest,
    check_annotations,
    matches,
    merge_patch,
    parse_bool,
    parse_selector,
)

KubeObject = dict[str, Any]

#: resource plural -> (kind, namespaced, API prefix)
RESOURCES: dict[str, tuple[str, bool, str]] = {
    "nodes": ("Node", False, "/api/v1"),
    "pods": ("Pod", True, "/api/v1"),
    "events": ("Event", True, "/api/v1"),
    "daemonsets": ("DaemonSet", True, "/apis/apps/v1"),
    "clusterpolicies": ("ClusterPolicy", False, "/apis/nvidia.com/v1"),
    # cluster-scoped too (gpu-operator api/nvidia/v1alpha1/nvidiadriver_types.go:521)
    "nvidiadrivers": ("NVIDIADriver", False, "/apis/nvidia.com/v1alpha1"),
}
BUILTIN = {"nodes", "pods", "events", "daemonsets"}
#: the field selectors the real API server accepts per resource (all take metadata.name/namespace)
FIELDS: dict[str, set[str]] = {
    "pods": {"spec.nodeName", "status.phase"},
    "events": {
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "involvedObject.uid",
        "reason",
        "type",
    },
    "nodes": {"spec.unschedulable"},
    "daemonsets": set(),
    "clusterpolicies": set(),
    "nvidiadrivers": set(),
}


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


@dataclass
class WatchEvent:
    rv: int
    resource: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: KubeObject


@dataclass
class KubeStore:
    """The cluster's objects; every write is a watch event in ``history``."""

    objects: dict[tuple[str, str, str], KubeObject] = field(default_factory=dict)
    history: list[WatchEvent] = field(default_factory=list)
    rv: int = 1000
    #: (namespace, pod) -> what its container printed (``GET .../pods/{name}/log``)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _uid: int = 0

    def _notify(self) -> None:
        async def wake() -> None:
            async with self.changed:
                self.changed.notify_all()

        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(wake())

    def _record(self, resource: str, kind: str, obj: KubeObject) -> KubeObject:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append(WatchEvent(self.rv, resource, kind, copy.deepcopy(obj)))
        self._notify()
        return obj

    def create(self, resource: str, obj: KubeObject) -> KubeObject:
        kind, namespaced, prefix = RESOURCES[resource]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "") if namespaced else ""
        if namespaced and not ns:
            meta["namespace"] = ns = "default"
        key = (resource, ns, meta["name"])
        if key in self.objects:
            raise BadRequest(409, "AlreadyExists", f'{resource} "{meta["name"]}" already exists')
        check_annotations(meta)
        self._uid += 1
        meta.setdefault("uid", f"00000000-0000-4000-8000-{self._uid:012d}")
        meta.setdefault("creationTimestamp", now_iso())
        obj.setdefault("apiVersion", prefix.removeprefix("/apis/").removeprefix("/api/"))
        obj.setdefault("kind", kind)
        self.objects[key] = obj
        return self._record(resource, "ADDED", obj)

    def get(self, resource: str, name: str, namespace: str = "") -> KubeObject | None:
        return self.objects.get((resource, namespace if RESOURCES[resource][1] else "", name))

    def list(self, resource: str, namespace: str = "") -> list[KubeObject]:
        return [
            o for (r, ns, _), o in sorted(self.objects.items()) if r == resource and (not namespace or ns == namespace)
        ]

    def replace(self, resource: str, obj: KubeObject) -> KubeObject:
        meta = obj["metadata"]
        check_annotations(meta)
        key = (resource, meta.get("namespace", "") if RESOURCES[resource][1] else "", meta["name"])
        if key not in self.objects:
            raise BadRequest(404, "NotFound", f'{resource} "{meta["name"]}" not found')
        self.objects[key] = obj
        return self._record(resource, "MODIFIED", obj)

    def patch(self, resource: str, name: str, namespace: str, patch: KubeObject, *, strategic: bool) -> KubeObject:
        current = self.get(resource, name, namespace)
        if current is None:
            raise BadRequest(404, "NotFound", f'{resource} "{name}" not found')
        merged = merge_patch(current, patch, strategic=strategic)
        merged["metadata"]["name"], merged["metadata"]["uid"] = name, current["metadata"]["uid"]
        return self.replace(resource, merged)

    def delete(self, resource: str, name: str, namespace: str = "") -> KubeObject:
        key = (resource, namespace if RESOURCES[resource][1] else "", name)
        obj = self.objects.pop(key, None)
        if obj is None:
            raise BadRequest(404, "NotFound", f'{resource} "{name}" not found')
        return self._record(resource, "DELETED", obj)

    def label_history(self, node: str) -> builtins.list[dict[str, str]]:
        """The node's labels after each write to it, oldest first."""
        return [
            dict(e.obj["metadata"].get("labels") or {})
            for e in self.history
            if e.resource == "nodes" and e.obj["metadata"]["name"] == node
        ]


class KubeEmulator:
    """The HTTP face of a :class:`KubeStore` on 127.0.0.1, with a kubeconfig to reach it."""

    def __init__(self, store: KubeStore) -> None:
        self.store = store
        self.token = secrets.token_hex(16)
        self.port = 0
        self.requests: list[tuple[str, str]] = []  # (method, path) as received, for tests
        self._runner: web.AppRunner | None = None
        self._closing = False

    async def start(self) -> None:
        app = web.Application(middlewares=[self._auth])
        for plural, (_, namespaced, prefix) in RESOURCES.items():
            base = f"{prefix}/namespaces/{{namespace}}/{plural}" if namespaced else f"{prefix}/{plural}"
            app.router.add_get(base, self._list)
            app.router.add_get(base + "/{name}", self._get)
            app.router.add_patch(base + "/{name}", self._patch)
            if namespaced:
                app.router.add_get(f"{prefix}/{plural}", self._list)  # across namespaces
        app.router.add_delete("/api/v1/namespaces/{namespace}/pods/{name}", self._delete_pod)
        app.router.add_post("/api/v1/namespaces/{namespace}/pods", self._create_pod)
        app.router.add_get("/api/v1/namespaces/{namespace}/pods/{name}/log", self._pod_log)
        app.router.add_post("/api/v1/namespaces/{namespace}/pods/{name}/eviction", self._evict)
        app.router.add_get("/version", self._version)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        self._closing = True  # open watches end on their next wake-up
        async with self.store.changed:
            self.store.changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()

    def write_kubeconfig(self, path: Path, *, context: str = "emulator", extra_context: str | None = None) -> Path:
        """A kubeconfig as kubectl reads it; ``extra_context`` adds a second one with a wrong token."""
        contexts = [{"name": context, "context": {"cluster": "emulator", "user": "cockpit"}}]
        users = [{"name": "cockpit", "user": {"token": self.token}}]
        if extra_context:
            contexts.append({"name": extra_context, "context": {"cluster": "emulator", "user": "stranger"}})
            users.append({"name": "stranger", "user": {"token": "not-the-token"}})
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "contexts": contexts,
            "users": users,
            "current-context": context,
        }
        path.write_text(json.dumps(doc))  # JSON is YAML
        return path

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return status(401, "Unauthorized", "Unauthorized")
        try:
            response: web.StreamResponse = await handler(request)
        except BadRequest as e:
            return status(e.code, e.reason, e.message)
        return response

    def _resource(self, request: web.Request) -> str:
        for plural in RESOURCES:
            if f"/{plural}" in request.path:
                return plural
        raise BadRequest(404, "NotFound", "the server could not find the requested resource")

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "31", "gitVersion": "v1.31.4-emulator"})

    async def _list(self, request: web.Request) -> web.StreamResponse:
        resource = self._resource(request)
        namespace = request.match_info.get("namespace", "")
        labels = parse_selector(request.query.get("labelSelector", ""), fields=None)
        fields = parse_selector(request.query.get("fieldSelector", ""), fields=FIELDS[resource])
        if parse_bool(request.query.get("watch", "false")):
            return await self._watch(request, resource, namespace, labels, fields)
        items = [o for o in self.store.list(resource, namespace) if matches(o, labels, fields)]
        kind = RESOURCES[resource][0]
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )

    async def _watch(
        self, request: web.Request, resource: str, namespace: str, labels: Any, fields: Any
    ) -> web.StreamResponse:
        timeout = float(request.query.get("timeoutSeconds", "30"))
        since = request.query.get("resourceVersion", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)

        def wanted(e: WatchEvent) -> bool:
            ns = e.obj["metadata"].get("namespace", "")
            return e.resource == resource and (not namespace or ns == namespace) and matches(e.obj, labels, fields)

        async def send(kind: str, obj: KubeObject) -> None:
            await response.write((json.dumps({"type": kind, "object": obj}) + "\n").encode())

        # the client may go away (aiohttp's ClientConnectionResetError is a ConnectionResetError)
        with contextlib.suppress(ConnectionResetError):
            await self._stream(request, response, send, since, resource, namespace, labels, fields, wanted, timeout)
        return response

    async def _stream(
        self,
        request: web.Request,
        response: web.StreamResponse,
        send: Any,
        since: str,
        resource: str,
        namespace: str,
        labels: Any,
        fields: Any,
        wanted: Any,
        timeout: float,
    ) -> None:

        if since in ("", "0"):
            for obj in self.store.list(resource, namespace):
                if matches(obj, labels, fields):
                    await send("ADDED", obj)
            cursor = self.store.rv
        else:
            cursor = int(since)
            if self.store.history and cursor < self.store.history[0].rv - 1:
                await send(
                    "ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
                )
                return
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for e in [e for e in self.store.history if e.rv > cursor]:
                cursor = e.rv
                if wanted(e):
                    await send(e.type, e.obj)
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0 or self._closing or (request.transport is None or request.transport.is_closing()):
                break
            async with self.store.changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.store.changed.wait(), timeout=min(left, 0.2))
        await response.write_eof()

    async def _get(self, request: web.Request) -> web.Response:
        resource = self._resource(request)
        obj = self.store.get(resource, request.match_info["name"], request.match_info.get("namespace", ""))
        if obj is None:
            raise BadRequest(404, "NotFound", f'{resource} "{request.match_info["name"]}" not found')
        return web.json_response(obj)

    async def _patch(self, request: web.Request) -> web.Response:
        resource = self._resource(request)
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/strategic-merge-patch+json":
            if resource not in BUILTIN:
                raise BadRequest(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                )
            strategic = True
        elif ctype == "application/merge-patch+json":
            strategic = False
        else:
            raise BadRequest(415, "UnsupportedMediaType", f"emulator: patch type {ctype or 'none'} is not implemented")
        body = json.loads(await request.read())
        if not isinstance(body, dict):
            raise BadRequest(400, "BadRequest", "a merge patch must be a JSON object")
        obj = self.store.patch(
            resource, request.match_info["name"], request.match_info.get("namespace", ""), body, strategic=strategic
        )
        return web.json_response(obj)

    def _terminate(self, namespace: str, name: str) -> KubeObject:
        pod = self.store.get("pods", name, namespace)
        if pod is None:
            raise BadRequest(404, "NotFound", f'pods "{name}" not found')
        if not pod["metadata"].get("deletionTimestamp"):
            pod = copy.deepcopy(pod)
            pod["metadata"]["deletionTimestamp"] = now_iso()
            pod["metadata"]["deletionGracePeriodSeconds"] = 30
            self.store.replace("pods", pod)
        return pod

    async def _create_pod(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        namespace = request.match_info["namespace"]
        if not isinstance(body, dict) or body.get("kind", "Pod") != "Pod":
            raise BadRequest(400, "BadRequest", "the body must be a Pod")
        meta = body.setdefault("metadata", {})
        if meta.setdefault("namespace", namespace) != namespace:
            raise BadRequest(400, "BadRequest", "the namespace of the provided object does not match the request")
        if not meta.get("name"):
            raise BadRequest(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        containers = (body.get("spec") or {}).get("containers") or []
        if not containers or not all(c.get("name") and c.get("image") for c in containers):
            raise BadRequest(422, "Invalid", "spec.containers: Required value: every container needs a name and image")
        # the server's own fields: whatever the client sent there is not the pod's state
        body["status"] = {"phase": "Pending"}
        for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(key, None)
        return web.json_response(self.store.create("pods", body), status=201)

    async def _pod_log(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        pod = self.store.get("pods", name, namespace)
        if pod is None:
            raise BadRequest(404, "NotFound", f'pods "{name}" not found')
        if pod["status"].get("phase") in (None, "Pending"):
            container = ((pod["spec"].get("containers") or [{}])[0]).get("name", "")
            raise BadRequest(
                400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        return web.Response(text=self.store.logs.get((namespace, name), ""), content_type="text/plain")

    async def _delete_pod(self, request: web.Request) -> web.Response:
        return web.json_response(self._terminate(request.match_info["namespace"], request.match_info["name"]))

    async def _evict(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        if body.get("kind") != "Eviction":
            raise BadRequest(400, "BadRequest", "an eviction's body must be an Eviction")
        self._terminate(request.match_info["namespace"], request.match_info["name"])
        return web.json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201
        )
