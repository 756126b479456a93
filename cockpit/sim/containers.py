"""Simulated containers on a node: docker run/inspect and the NVIDIA container toolkit.

A GPU container needs NVML (no mismatch, driver loaded) and a driver whose CUDA
ceiling meets the image's CUDA version, or it fails with the container CLI's real
requirement error; with fabric manager down CUDA initialisation fails (error 802).
"""

from __future__ import annotations

import json
import random
import re

from cockpit.sim.driver import DriverStack
from cockpit.sim.packages import TOOLKIT_VERSION
from cockpit.sim.services import ServiceManager
from cockpit.sim.shell import Handler, Io, Sleep, stream
from cockpit.sim.smi import SimGpu

#: how docker reports a failed prestart hook of the NVIDIA runtime; the container CLI's own error follows
PRESTART_HOOK_FAILED = (
    "docker: Error response from daemon: failed to create task for container: failed to create shim task: "
    "OCI runtime create failed: runc create failed: unable to start container process: "
    "error during container init: "
    "error running prestart hook #0: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
)


def image_id(image: str) -> str:
    """A stable image digest, the same for the same image on every node."""
    return f"sha256:{random.Random(image).getrandbits(256):064x}"


def image_cuda(image: str) -> tuple[int, int]:
    """The CUDA version a container image needs, from its tag (cu130, cuda12.8...)."""
    m = re.search(r"cuda[-_]?(\d+)\.(\d+)", image)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.search(r"cu(\d{2})(\d)\b", image)
    if m:
        return int(m.group(1)), int(m.group(2))
    return 13, 0  # the serving image of this change (a cu130 build) unless its tag says otherwise


class ContainerRuntime:
    """Docker with the NVIDIA runtime, and the toolkit's own CLIs."""

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

    async def nvidia_ctk(self, argv: list[str], io: Io) -> int:
        if "--version" in argv or "-v" in argv:
            io.out(
                f"NVIDIA Container Toolkit CLI version {TOOLKIT_VERSION.split('-')[0]}\n"
                "commit: 3ab3c3a4c7c4ef7f1ae0b15a0e6c1e6e2e4b7c3f\n"
            )
            return 0
        return 0

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

    async def docker(self, argv: list[str], io: Io) -> int:
        args = argv[1:]
        if not args:
            io.err("Usage:  docker [OPTIONS] COMMAND\n")
            return 1
        sub, rest = args[0], args[1:]
        if sub in ("--version", "version"):
            io.out("Docker version 28.3.3, build 980b856\n")
            return 0
        if sub == "pull":
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
        if sub == "image" and rest[:1] == ["inspect"]:
            return self._docker_inspect(rest[1:], io)
        if sub == "inspect":
            return self._docker_inspect(rest, io)
        if sub == "info":
            io.out(" Runtimes: io.containerd.runc.v2 nvidia runc\n Default Runtime: runc\n")
            return 0
        if sub == "run":
            return await self._docker_run(rest, io)
        if sub in ("ps", "images"):
            io.out(
                "CONTAINER ID   IMAGE   COMMAND   CREATED   STATUS   PORTS   NAMES\n"
                if sub == "ps"
                else "REPOSITORY   TAG   IMAGE ID   CREATED   SIZE\n"
            )
            return 0
        io.err(f"docker: '{sub}' is not a docker command.\nSee 'docker --help'\n")
        return 1

    def _docker_inspect(self, rest: list[str], io: Io) -> int:
        fmt = None
        names = []
        i = 0
        while i < len(rest):
            a = rest[i]
            if a in ("-f", "--format"):
                fmt = rest[i + 1]
                i += 2
                continue
            if a.startswith("--format="):
                fmt = a.split("=", 1)[1]
            elif a.startswith("--type"):
                pass
            elif not a.startswith("-"):
                names.append(a)
            i += 1
        if not names:
            io.err('"docker inspect" requires at least 1 argument.\n')
            return 1
        for image in names:
            cuda = image_cuda(image)
            env = [
                "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin",
                f"CUDA_VERSION={cuda[0]}.{cuda[1]}.1",
                f"NVIDIA_REQUIRE_CUDA=cuda>={cuda[0]}.{cuda[1]}",
                "NVIDIA_VISIBLE_DEVICES=all",
            ]
            if fmt is not None:
                if "Env" in fmt:
                    io.out("[" + " ".join(env) + "]\n")
                elif "Id" in fmt:
                    io.out(image_id(image) + "\n")
                else:
                    io.out("\n")
            else:
                io.out(
                    json.dumps(
                        [
                            {
                                "Id": image_id(image),
                                "RepoTags": [image],
                                "Config": {"Env": env, "Labels": {"com.nvidia.cuda.version": f"{cuda[0]}.{cuda[1]}.1"}},
                            }
                        ],
                        indent=4,
                    )
                    + "\n"
                )
        return 0

    async def _docker_run(self, rest: list[str], io: Io) -> int:
        with_values = {
            "--gpus",
            "-e",
            "--env",
            "--entrypoint",
            "--name",
            "-v",
            "--volume",
            "--network",
            "--shm-size",
            "--ipc",
            "-p",
            "--publish",
            "-w",
            "--workdir",
            "--runtime",
            "-u",
            "--user",
            "--ulimit",
            "--pull",
            "--platform",
        }
        gpus = False
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            opt = rest[i]
            if (
                opt == "--gpus"
                or opt.startswith("--gpus=")
                or opt in ("--runtime=nvidia",)
                or (opt == "--runtime" and rest[i + 1 : i + 2] == ["nvidia"])
            ):
                gpus = True
            i += 2 if opt in with_values else 1
        if i >= len(rest):
            io.err('docker: "docker run" requires at least 1 argument.\n')
            return 125
        image, cmd = rest[i], rest[i + 1 :]
        await self.sleep(0.4)
        if gpus:
            failure = self._container_nvml_failure()
            prefix = PRESTART_HOOK_FAILED
            if failure:
                io.err(prefix + failure + "\n")
                return 125
            assert self.driver.module is not None
            need = image_cuda(image)
            have = tuple(int(x) for x in self.driver.module.cuda.split("."))
            if have < need:
                io.err(
                    prefix
                    + f"nvidia-container-cli: requirement error: unsatisfied condition: cuda>={need[0]}.{need[1]}, "
                    "please update your driver to a newer version, or use an earlier cuda container: unknown\n"
                )
                return 125
        text = " ".join(cmd)
        if "nvidia-smi" in text:
            if not gpus:
                io.err('exec: "nvidia-smi": executable file not found in $PATH: unknown\n')
                return 127
            sub = cmd[cmd.index("nvidia-smi") :] if "nvidia-smi" in cmd else ["nvidia-smi"]
            return await self.nvidia_smi(sub, io)
        if "python" in text or "torch" in text:
            cuda = image_cuda(image)
            usable = gpus and self.services.fabric_manager != "failed"
            if gpus and not usable and "cuda" in text.replace("torch.version.cuda", ""):
                io.err(
                    'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
                    "RuntimeError: Unexpected error from cudaGetDeviceCount(). "
                    "Did you run some cuda functions before calling NumCudaDevices() "
                    "that might have already set an error? Error 802: system not yet initialized\n"
                )
                return 1
            values = {
                "torch.__version__": f"2.9.0+cu{cuda[0]}{cuda[1]}"
                if cuda >= (13, 0)
                else f"2.8.0+cu{cuda[0]}{cuda[1]}",
                "torch.version.cuda": f"{cuda[0]}.{cuda[1]}",
                "torch.cuda.is_available()": str(bool(gpus)),
                "torch.cuda.device_count()": str(len(self.gpus) if gpus else 0),
            }
            m = re.search(r"print\((.*)\)", text)
            if m:
                parts = [p.strip() for p in m.group(1).split(",") if p.strip()]
                io.out(" ".join(values.get(p, "None") for p in parts) + "\n")
            return 0
        return 0
