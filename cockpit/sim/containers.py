"""Simulated containers on a node: docker, podman and nerdctl, and the NVIDIA container toolkit.

Each CLI takes GPUs the way the real one does (NVIDIA Container Toolkit docs, "Support
for Container Device Interface"; containerd/nerdctl docs/gpu.md; docker run --gpus):

- docker: ``--gpus all`` (or ``--runtime nvidia``) goes through the toolkit's prestart
  hook (nvidia-container-cli), which needs NVML and a driver whose CUDA meets the image's
  ``NVIDIA_REQUIRE_CUDA``; ``--device nvidia.com/gpu=all`` is a CDI device;
- podman: CDI only, ``--device nvidia.com/gpu=all`` (podman 5's ``--gpus`` maps to it);
- nerdctl (containerd): ``--gpus all`` through nvidia-container-cli, or a CDI device.

A CDI device needs a spec (``nvidia-ctk cdi generate``) that names the installed driver's
libraries: after a driver change a spec not regenerated points at files that are gone. Specs
are files in /etc/cdi (static) and /var/run/cdi (generated; the toolkit's nvidia-cdi-refresh
writes /var/run/cdi/nvidia.yaml): the CDI registry reads both, and where both define the same
device the one in the later directory of DefaultSpecDirs, /var/run/cdi, wins
(cncf-tags/container-device-interface, pkg/cdi: DefaultSpecDirs = /etc/cdi, /var/run/cdi, the
index its priority). A stale spec left in /var/run/cdi therefore shadows a fresh one written
to /etc/cdi.

The image's ENTRYPOINT is honoured (:mod:`cockpit.sim.images`): vLLM's images start
``vllm serve`` with the arguments given, unless ``--entrypoint`` says otherwise. CUDA inside
a GPU container fails with error 802 while fabric manager is down on the host, or with the
image-side fault the node's scenario sets (``compat_fault``); torch then answers as real
torch does (:mod:`cockpit.sim.pytorch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.sim.driver import DriverStack
from cockpit.sim.images import (
    ImageConfig,
    TemplateError,
    image_config,
    image_cuda,
    inspect_json,
    render_format,
    torch_build,
)
from cockpit.sim.packages import TOOLKIT_VERSION
from cockpit.sim.pytorch import CUDA_ERRORS, UNEXPECTED, CudaView, python
from cockpit.sim.services import ServiceManager
from cockpit.sim.shell import Handler, Io, Sleep, stream
from cockpit.sim.smi import SimGpu
from cockpit.sim.vllm_api import ServedModel, answer

#: how docker reports a failed prestart hook of the NVIDIA runtime; the container CLI's own error follows
PRESTART_HOOK_FAILED = (
    "docker: Error response from daemon: failed to create task for container: failed to create shim task: "
    "OCI runtime create failed: runc create failed: unable to start container process: "
    "error during container init: "
    "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
)
VERSIONS = {
    "docker": "Docker version 28.3.3, build 980b856\n",
    "podman": "podman version 5.4.0\n",
    "nerdctl": "nerdctl version 2.1.2\n",
}
#: options of ``run`` that take a value (docker run --help; podman and nerdctl share them)
VALUE_OPTIONS = frozenset(
    {
        "--gpus", "--device", "-e", "--env", "--entrypoint", "--name", "-v", "--volume", "--network",
        "--shm-size", "--ipc", "-p", "--publish", "-w", "--workdir", "--runtime", "-u", "--user",
        "--ulimit", "--pull", "--platform", "--env-file", "--label", "-l", "--mount", "--cap-add",
    }
)  # fmt: skip
#: the short options vllm serve defines besides its --long ones (vllm/engine/arg_utils.py)
VLLM_SHORT = frozenset({"-tp", "-pp", "-dp", "-q", "-O"})
#: simulated seconds from a detached vLLM container's start to its socket bound (the process
#: starting, Python importing) and on to the engine serving (weights loaded, CUDA graphs captured)
VLLM_BIND_S = 5.0
VLLM_READY_S = 45.0
#: how long a vLLM whose CUDA cannot initialise takes to die (the engine core's start fails)
VLLM_DIE_S = 15.0


@dataclass
class Container:
    """A detached container (``run -d``): what it publishes, and its server's phase."""

    id: str
    name: str
    ports: dict[int, int]  # host port -> container port
    remove: bool  # --rm: gone once it exits
    logs: list[str] = field(default_factory=list)
    state: str = "running"  # running, exited
    served: ServedModel | None = None
    listens: int | None = None  # the container port its server listens on
    bound: bool = False
    serving: bool = False
    task: asyncio.Task[None] | None = None

    def endpoint(self, container_port: int) -> PublishedPort:
        return PublishedPort(self, container_port)


@dataclass
class PublishedPort:
    """docker-proxy's end of ``-p HOST:CONTAINER``: what a connection to the host port meets."""

    container: Container
    port: int

    def phase(self) -> str:
        c = self.container
        if c.state != "running":
            return "gone"
        if c.listens != self.port or not c.bound:
            return "reset"
        return "serving" if c.serving else "pending"

    def request(self, method: str, path: str, body: str, content_type: str) -> tuple[int, str]:
        assert self.container.served is not None
        return answer(self.container.served, method, path, body, content_type)


#: the CDI spec directories, the one whose specs win a conflict first (DefaultSpecDirs reversed)
CDI_SPEC_DIRS_BY_PRIORITY = ("/var/run/cdi", "/etc/cdi")


def _output_of(argv: list[str]) -> str | None:
    """``--output=PATH`` or ``--output PATH`` (``-o``) of an nvidia-ctk command."""
    for i, a in enumerate(argv):
        if a.startswith("--output="):
            return a.split("=", 1)[1]
        if a in ("--output", "-o") and i + 1 < len(argv):
            return argv[i + 1]
    return None


class ContainerRuntime:
    """The container engines of one node, with the NVIDIA runtime, and the toolkit's own CLIs."""

    def __init__(
        self,
        driver: DriverStack,
        services: ServiceManager,
        gpus: list[SimGpu],
        rng: random.Random,
        sleep: Sleep,
        nvidia_smi: Handler,
    ) -> None:
        self.driver = driver
        self.services = services  # fabric manager down: CUDA initialisation fails in the container
        self.gpus = gpus  # the node's list, trimmed in place when a GPU is lost
        self.rng = rng  # the node's generator: pull digests draw from the same sequence as its boot ids
        self.sleep = sleep
        self.nvidia_smi = nvidia_smi  # the runtime mounts the node's nvidia-smi into a GPU container
        #: which engines the node has (a per-node fact; every simulated node has docker today)
        self.engines: tuple[str, ...] = ("docker",)
        #: the node's files (path -> text), where CDI specs live; the node shares its own
        self.files: dict[str, str] = {}
        #: a CUDA error every GPU container sees while the host is fine (set by a scenario)
        self.compat_fault: int | None = None
        #: detached containers by name, running or exited (not --rm)
        self.containers: dict[str, Container] = {}
        self.started = 0  # detached containers started so far (their ids and default names)

    def handlers(self) -> dict[str, Handler]:
        """The commands this node has: its engines and the toolkit's CLIs."""
        engines: dict[str, Callable[[list[str], Io], object]] = {
            "docker": self.docker,
            "podman": self.podman,
            "nerdctl": self.nerdctl,
        }
        table: dict[str, Handler] = {name: engines[name] for name in self.engines}  # type: ignore[misc]  # each is an async handler
        table["nvidia-ctk"] = self.nvidia_ctk
        table["nvidia-container-cli"] = self.nvidia_container_cli
        return table

    # -- what CUDA looks like ----------------------------------------------------------

    def host_cuda_error(self) -> int | None:
        """The error CUDA calls return on the host: 802 while fabric manager is down (NVSwitch systems)."""
        return 802 if self.services.fabric_manager == "failed" else None

    def container_cuda_error(self) -> int | None:
        return self.host_cuda_error() or self.compat_fault

    # -- the toolkit ---------------------------------------------------------------------

    async def nvidia_ctk(self, argv: list[str], io: Io) -> int:
        if "--version" in argv or "-v" in argv:
            io.out(
                f"NVIDIA Container Toolkit CLI version {TOOLKIT_VERSION.split('-')[0]}\n"
                "commit: 3ab3c3a4c7c4ef7f1ae0b15a0e6c1e6e2e4b7c3f\n"
            )
            return 0
        if argv[1:3] == ["cdi", "generate"]:
            if self.driver.userspace is None:
                io.err(
                    'level=error msg="failed to generate CDI spec: '
                    'failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND"\n'
                )
                return 1
            # the spec's devices come from NVML (nvidia-ctk's nvml discovery): with the driver not
            # loaded, or before the reboot while the libraries are newer than the module, it fails
            nvml = self._container_nvml_failure()
            if nvml is not None:
                reason = "Driver/library version mismatch" if "mismatch" in nvml else "Driver Not Loaded"
                io.err(f'level=error msg="failed to generate CDI spec: failed to initialize NVML: {reason}"\n')
                return 1
            self.write_cdi_spec(_output_of(argv) or "/etc/cdi/nvidia.yaml")
            io.err('level=info msg="Generated CDI spec with version 0.8.0"\n')
            return 0
        if argv[1:3] == ["cdi", "list"]:
            if self.cdi_spec_version is None:
                io.err('level=info msg="Found 0 CDI devices"\n')
                return 0
            io.err(f'level=info msg="Found {len(self.gpus) + 1} CDI devices"\n')
            io.out("".join(f"nvidia.com/gpu={g.index}\n" for g in self.gpus) + "nvidia.com/gpu=all\n")
            return 0
        return 0

    def write_cdi_spec(self, path: str) -> None:
        """What ``nvidia-ctk cdi generate --output=PATH`` writes: the devices and the installed
        driver's libraries by their versioned names (abridged: two of the libraries)."""
        assert self.driver.userspace is not None
        version = self.driver.userspace.version
        libs = [f"/usr/lib/x86_64-linux-gnu/{lib}.so.{version}" for lib in ("libcuda", "libnvidia-ml")]
        mounts = "".join(
            f"  - containerPath: {lib}\n    hostPath: {lib}\n    options:\n    - ro\n    - nosuid\n    - nodev\n"
            "    - bind\n"
            for lib in libs
        )
        devices = "".join(
            f'- containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia{g.index}\n  name: "{g.index}"\n'
            for g in self.gpus
        )
        self.files[path] = (
            f"---\ncdiVersion: 0.5.0\ncontainerEdits:\n  mounts:\n{mounts}devices:\n{devices}"
            "- containerEdits:\n    deviceNodes:\n"
            + "".join(f"    - path: /dev/nvidia{g.index}\n" for g in self.gpus)
            + "  name: all\nkind: nvidia.com/gpu\n"
        )

    @property
    def cdi_spec_version(self) -> str | None:
        """The driver version of the spec the CDI registry resolves nvidia.com/gpu from: /var/run/cdi's
        over /etc/cdi's (None: no spec)."""
        for directory in CDI_SPEC_DIRS_BY_PRIORITY:
            for path in sorted(p for p in self.files if p.rsplit("/", 1)[0] == directory):
                found = re.search(r"libnvidia-ml\.so\.([0-9][0-9.]*)", self.files[path])
                if path.endswith((".yaml", ".json")) and found:
                    return found.group(1)
        return None

    async def nvidia_container_cli(self, argv: list[str], io: Io) -> int:
        if "--version" in argv or "-V" in argv:
            io.out(f"cli-version: {TOOLKIT_VERSION.split('-')[0]}\nlib-version: {TOOLKIT_VERSION.split('-')[0]}\n")
            return 0
        failure = self._container_nvml_failure()
        if failure:
            io.err(failure + "\n")
            return 1
        if "info" in argv and self.driver.module is not None:
            io.out(f"NVRM version:   {self.driver.module.version}\nCUDA version:   {self.driver.module.cuda}\n")
        return 0

    def _container_nvml_failure(self) -> str | None:
        if self.driver.module is None:
            return "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown"
        if self.driver.userspace is None or self.driver.module.version != self.driver.userspace.version:
            return "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown"
        return None

    # -- the engines' CLIs ------------------------------------------------------------------

    async def docker(self, argv: list[str], io: Io) -> int:
        return await self._cli("docker", argv, io)

    async def podman(self, argv: list[str], io: Io) -> int:
        return await self._cli("podman", argv, io)

    async def nerdctl(self, argv: list[str], io: Io) -> int:
        return await self._cli("nerdctl", argv, io)

    async def _cli(self, engine: str, argv: list[str], io: Io) -> int:
        args = argv[1:]
        if not args:
            io.err(f"Usage:  {engine} [OPTIONS] COMMAND\n")
            return 1
        sub, rest = args[0], args[1:]
        if sub in ("--version", "version"):
            io.out(VERSIONS[engine])
            return 0
        if sub == "pull":
            return await self._pull(rest, io)
        if sub == "image" and rest[:1] == ["inspect"]:
            return self._inspect(engine, rest[1:], io)
        if sub == "inspect":
            return self._inspect(engine, rest, io)
        if sub == "info" and engine == "docker":
            io.out(" Runtimes: io.containerd.runc.v2 nvidia runc\n Default Runtime: runc\n")
            return 0
        if sub == "run":
            return await self._run(engine, rest, io)
        if sub in ("rm", "stop", "kill", "logs"):
            return await self._manage(engine, sub, rest, io)
        if sub in ("ps", "images"):
            io.out(
                "CONTAINER ID   IMAGE   COMMAND   CREATED   STATUS   PORTS   NAMES\n"
                if sub == "ps"
                else "REPOSITORY   TAG   IMAGE ID   CREATED   SIZE\n"
            )
            return 0
        io.err(f"{engine}: '{sub}' is not a {engine} command.\nSee '{engine} --help'\n")
        return 1

    async def _pull(self, rest: list[str], io: Io) -> int:
        image = next((a for a in rest if not a.startswith("-")), "")
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"
        await stream(
            io,
            [
                f"{tag}: Pulling from {image.rsplit(':', 1)[0]}",
                f"Digest: sha256:{self.rng.getrandbits(256):064x}",
                f"Status: Image is up to date for {image}",
            ],
            0.3,
            self.sleep,
        )
        return 0

    def _inspect(self, engine: str, rest: list[str], io: Io) -> int:
        fmt: str | None = None
        names: list[str] = []
        i = 0
        while i < len(rest):
            a = rest[i]
            if a in ("-f", "--format"):
                fmt = rest[i + 1] if i + 1 < len(rest) else ""
                i += 2
                continue
            if a.startswith("--format="):
                fmt = a.split("=", 1)[1]
            elif a == "--type":
                i += 1
            elif not a.startswith("-"):
                names.append(a)
            i += 1
        if not names:
            io.err(f'"{engine} inspect" requires at least 1 argument.\n')
            return 1
        documents = [inspect_json(image_config(name)) for name in names]
        if fmt is None:
            io.out(json.dumps(documents, indent=4) + "\n")
            return 0
        try:
            io.out("".join(render_format(fmt, doc) + "\n" for doc in documents))
        except TemplateError as exc:
            io.err(f"{exc}\n")
            return 1
        return 0

    # -- run ------------------------------------------------------------------------------

    async def _run(self, engine: str, rest: list[str], io: Io) -> int:
        prefix = "Error: " if engine == "podman" else f"{engine}: "
        entrypoint: list[str] | None = None
        gpus: str | None = None  # "legacy" (the prestart hook) or "cdi"
        cdi: list[str] = []
        detach = remove = False
        name: str | None = None
        ports: dict[int, int] = {}
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            opt, value = rest[i], None
            if "=" in opt and opt.startswith("--"):
                opt, value = opt.split("=", 1)
                i += 1
            elif opt in VALUE_OPTIONS:
                value = rest[i + 1] if i + 1 < len(rest) else ""
                i += 2
            else:
                i += 1
            if opt in ("-d", "--detach"):
                detach = True
            elif opt == "--rm":
                remove = True
            elif opt == "--name":
                name = value
            elif opt in ("-p", "--publish") and value:
                published = _publish(value)
                if published is None:
                    io.err(f'{prefix}invalid argument "{value}" for "-p, --publish" flag\n')
                    return 125
                ports[published[0]] = published[1]
            elif opt == "--entrypoint":
                entrypoint = [value] if value else []  # docker: --entrypoint "" clears it
            elif opt == "--gpus":
                gpus = "cdi" if engine == "podman" else "legacy"
                if engine == "podman":
                    cdi.append("nvidia.com/gpu=all")
            elif opt == "--runtime" and value == "nvidia" and engine != "podman":
                gpus = "legacy"
            elif opt == "--device" and value and value.startswith("nvidia.com/gpu="):
                gpus = "cdi"
                cdi.append(value)
        if i >= len(rest):
            io.err(f'{prefix}"{engine} run" requires at least 1 argument.\n')
            return 125
        config = image_config(rest[i])
        args = rest[i + 1 :]
        if name is not None and name in self.containers:
            other = self.containers[name].id
            io.err(
                f'{prefix}Error response from daemon: Conflict. The container name "/{name}" is already in use by '
                f'container "{other}". You have to remove (or rename) that container to be able to reuse that name.\n'
            )
            return 125
        await self.sleep(0.4)
        if gpus == "legacy":
            refused = self._prestart_hook(engine, config)
            if refused:
                io.err(refused)
                return 125
        elif gpus == "cdi":
            refused = self._cdi_injection(engine, cdi)
            if refused:
                io.err(refused)
                return 125 if engine != "podman" else 126
        # --entrypoint replaces the image's ENTRYPOINT and clears its CMD (docker run reference)
        if entrypoint is not None:
            command = [*entrypoint, *args]
        else:
            command = [*config.entrypoint, *(args or config.cmd)]
        if not detach:
            return await self._exec(engine, config, command, gpus is not None, io)
        for port in ports:
            if self.published(port) is not None:
                io.err(
                    f"{prefix}Error response from daemon: driver failed programming external connectivity on "
                    f"endpoint {name or 'container'}: Bind for 127.0.0.1:{port} failed: port is already allocated.\n"
                )
                return 125
        container = Container(
            # its own sequence: the node's generator also draws its boot ids, which must not move
            id=f"{random.Random(f'container:{self.started}').getrandbits(256):064x}",
            name=name or f"sim_{self.started}",
            ports=ports,
            remove=remove,
        )
        self.started += 1
        self.containers[container.name] = container
        container.task = asyncio.ensure_future(self._detached(engine, config, command, gpus is not None, container))
        io.out(container.id + "\n")
        return 0

    async def _detached(
        self, engine: str, config: ImageConfig, command: list[str], gpus: bool, container: Container
    ) -> None:
        """A ``run -d`` container's life: its command runs, its output kept for ``logs``; --rm removes it."""
        sink = Io(stdin="", out=container.logs.append, err=container.logs.append)
        try:
            await self._exec(engine, config, command, gpus, sink, container)
        finally:
            container.state = "exited"
            if container.remove and self.containers.get(container.name) is container:
                del self.containers[container.name]

    def published(self, port: int) -> PublishedPort | None:
        """What a connection to ``port`` on the node's loopback reaches: a running container's
        published port (docker-proxy), or nothing."""
        for c in self.containers.values():
            if c.state == "running" and port in c.ports:
                return c.endpoint(c.ports[port])
        return None

    def stop_all(self) -> None:
        """The node went down: every container ends (a --rm one is removed, as at the next daemon start)."""
        for c in list(self.containers.values()):
            if c.task is not None:
                c.task.cancel()
            c.state = "exited"
            if c.remove:
                self.containers.pop(c.name, None)

    async def _manage(self, engine: str, sub: str, rest: list[str], io: Io) -> int:
        """``rm [-f]``, ``stop``, ``kill``, ``logs`` of a detached container, by name or id."""
        force = any(a in ("-f", "--force") for a in rest)
        names = [a for a in rest if not a.startswith("-")]
        if not names:
            io.err(f'"{engine} {sub}" requires at least 1 argument.\n')
            return 1
        status = 0
        for ref in names:
            c = next((c for c in self.containers.values() if ref in (c.name, c.id) or c.id.startswith(ref)), None)
            if c is None:
                io.err(f"Error response from daemon: No such container: {ref}\n")
                status = 1
                continue
            if sub == "logs":
                io.out("".join(c.logs))
                continue
            if sub == "rm" and c.state == "running" and not force:
                io.err(
                    f'Error response from daemon: cannot remove container "/{c.name}": container is running: '
                    "stop the container before removing or force remove\n"
                )
                status = 1
                continue
            if c.state == "running" and c.task is not None:
                if sub == "stop":
                    await self.sleep(1.0)  # SIGTERM: uvicorn shuts down
                c.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await c.task
            c.state = "exited"
            if sub == "rm" or c.remove:
                self.containers.pop(c.name, None)
            io.out(ref + "\n")
        return status

    def _prestart_hook(self, engine: str, config: ImageConfig) -> str | None:
        prefix = PRESTART_HOOK_FAILED if engine == "docker" else "FATA[0000] " + PRESTART_HOOK_FAILED.split(": ", 2)[2]
        failure = self._container_nvml_failure()
        if failure:
            return prefix + failure + "\n"
        assert self.driver.module is not None
        need = image_cuda(config.name)
        have = tuple(int(x) for x in self.driver.module.cuda.split("."))
        if have < need:
            return (
                prefix + f"nvidia-container-cli: requirement error: unsatisfied condition: cuda>={need[0]}.{need[1]}, "
                "please update your driver to a newer version, or use an earlier cuda container: unknown\n"
            )
        return None

    def _cdi_injection(self, engine: str, devices: list[str]) -> str | None:
        # CDI does not evaluate NVIDIA_REQUIRE_CUDA; it mounts the files its spec names
        prefix = "Error: " if engine == "podman" else f"{engine}: Error response from daemon: "
        if self.cdi_spec_version is None:
            return f"{prefix}setting up CDI devices: unresolvable CDI devices {', '.join(devices)}\n"
        installed = self.driver.userspace.version if self.driver.userspace else None
        if installed != self.cdi_spec_version:
            return (
                f"{prefix}OCI runtime error: crun: cannot stat `/usr/lib/x86_64-linux-gnu/libnvidia-ml.so."
                f"{self.cdi_spec_version}`: No such file or directory\n"
            )
        if self.driver.module is None or self.driver.module.version != installed:
            return None  # the files exist; CUDA inside fails later, as NVML does (mismatch)
        return None

    async def _exec(
        self,
        engine: str,
        config: ImageConfig,
        command: list[str],
        gpus: bool,
        io: Io,
        container: Container | None = None,
    ) -> int:
        if not command:
            return 0
        name = command[0].rsplit("/", 1)[-1]
        if name == "vllm":
            return await self._vllm(command, gpus, io, container)
        if name in ("python", "python3"):
            torch_version, torch_cuda = torch_build(config.name)
            view = CudaView(
                gpus=len(self.gpus) if gpus else 0,
                error=self.container_cuda_error() if gpus else None,
                torch_version=torch_version,
                torch_cuda=torch_cuda,
            )
            return python(command, view, io)
        if name == "nvidia-smi" and gpus:
            return await self.nvidia_smi(command, io)
        if name in ("bash", "sh") and len(command) == 1:
            return 0  # a shell with no terminal reads an empty stdin and exits
        if name == "true":
            return 0
        io.err(
            f"{engine}: Error response from daemon: failed to create task for container: failed to create shim task: "
            "OCI runtime create failed: runc create failed: unable to start container process: error during container "
            f'init: exec: "{command[0]}": executable file not found in $PATH: unknown\n'
        )
        return 127

    async def _vllm(self, command: list[str], gpus: bool, io: Io, container: Container | None = None) -> int:
        """``vllm serve [model_tag] [options]``: argparse refuses what it does not know (exit 2).

        Detached (``container``), the server binds its port, builds the engine and then
        serves vLLM's OpenAI API (:mod:`cockpit.sim.vllm_api`) until it is stopped; with CUDA
        broken in the container the engine's start fails and the process exits 1."""
        if command[1:2] != ["serve"]:
            io.err("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n")
            return 2
        model: str | None = None
        unknown: list[str] = []
        values: dict[str, str] = {}
        words = command[2:]
        i = 0
        while i < len(words):
            word = words[i]
            if word.startswith("--"):
                takes_value = "=" not in word and i + 1 < len(words) and not words[i + 1].startswith("-")
                if "=" in word:
                    values[word.split("=", 1)[0]] = word.split("=", 1)[1]
                elif takes_value:
                    values[word] = words[i + 1]
                i += 2 if takes_value else 1
                continue
            if word in VLLM_SHORT:
                i += 2
                continue
            if word.startswith("-") or model is not None:
                unknown.append(word)
            else:
                model = word
            i += 1
        if unknown:
            io.err(
                "usage: vllm serve [model_tag] [options]\n"
                f"vllm serve: error: unrecognized arguments: {' '.join(unknown)}\n"
            )
            return 2
        io.out(
            "INFO [api_server.py] vLLM API server version 0.11.0\n"
            f"INFO [utils.py] non-default args: {{'model_tag': {model!r}}}\n"
        )
        if not gpus:
            io.err("RuntimeError: Failed to infer device type\n")
            return 1
        try:
            port = int(values.get("--port", "8000"))
            max_len = int(values.get("--max-model-len", "2048"))
        except ValueError:
            io.err("vllm serve: error: argument --port/--max-model-len: invalid int value\n")
            return 2
        if container is not None:
            await self.sleep(VLLM_BIND_S)
            container.listens, container.bound = port, True  # the API server's socket, before the engine
        error = self.container_cuda_error()
        if error is not None:
            if container is not None:
                await self.sleep(VLLM_DIE_S)
            io.err("RuntimeError: " + UNEXPECTED.format(code=error, text=CUDA_ERRORS[error]) + "\n")
            return 1
        if container is not None:
            await self.sleep(VLLM_READY_S)
            if self.container_cuda_error() is not None:  # broke while loading (fabric manager died)
                io.err("RuntimeError: " + UNEXPECTED.format(code=802, text=CUDA_ERRORS[802]) + "\n")
                return 1
            name = values.get("--served-model-name", model or "")
            container.served = ServedModel(
                root=model or "", name=name, max_model_len=max_len, created=int(time.time()), rng=random.Random(name)
            )
            container.serving = True
        io.out(f"INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)\n")
        await self.sleep(10**7)  # a server serves until it is stopped (or the step's timeout ends it)
        return 0


def _publish(spec: str) -> tuple[int, int] | None:
    """``-p [IP:]HOST:CONTAINER[/tcp]`` as (host port, container port); None where it is not one."""
    parts = spec.split("/", 1)[0].split(":")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[-2:]):
        return None
    return int(parts[-2]), int(parts[-1])
