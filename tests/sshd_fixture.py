"""A real OpenSSH ``sshd`` on 127.0.0.1 for integration tests.

``start_sshd(workdir, fixtures)`` writes a throwaway server setup under ``workdir``
(generated host and client keys, ``authorized_keys``, ``sshd_config`` with
``StrictModes no``, ``UsePAM no``, its own ``PidFile``) and starts
``sshd -D -e -f CONFIG -p PORT`` on a free loopback port, as the current user.
Sessions get ``PATH=<workdir>/bin:/usr/bin:/bin`` (``SetEnv``), where stubs stand
in for a GPU node:

- ``nvidia-smi`` prints a real captured table from ``fixtures/``;
- ``cat`` answers ``/proc/sys/kernel/random/boot_id`` and
  ``/proc/driver/nvidia/version`` from files under ``<workdir>/node`` (everything
  else goes to the real ``cat``);
- ``systemctl reboot`` "reboots": writes a new boot id, swaps in the new kernel
  module version, and kills the sshd processes serving the session, so the client
  sees its connection drop exactly as it would on a real node.

The client side gets a ``known_hosts`` line for ``[127.0.0.1]:PORT``, the client
key and an empty ``ssh_config`` (so the developer's own config never leaks in).
Stop it with :meth:`Sshd.stop` (by PID).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from processes import free_port

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
NVIDIA_SMI_FIXTURE = "table/nvidia-smi_H200_580.173.02_utkuozdemir-capture.txt"
MODULE_BEFORE_FIXTURE = "proc_version/open-565.57.01_ubuntu24.04_nixGL-186.txt"
#: what /proc/driver/nvidia/version says after the stub reboot (the upgraded module)
MODULE_AFTER_TEXT = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.173.02  Release Build  "
    "(dvs-builder@U22-I3-AM02-23-1)  Tue Nov 11 10:00:00 UTC 2025\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
)


def find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((c for c in SSHD_CANDIDATES if os.access(c, os.X_OK)), None)


@dataclass
class Sshd:
    """A running sshd and the client files that reach it."""

    proc: subprocess.Popen[bytes]
    port: int
    user: str
    workdir: Path
    client_key: Path
    known_hosts: Path
    ssh_config: Path
    host_key: asyncssh.SSHKey
    log: Path

    @property
    def node_dir(self) -> Path:
        return self.workdir / "node"

    def boot_id(self) -> str:
        return (self.node_dir / "boot_id").read_text().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def cat_stub(node: Path) -> str:
    """A ``cat`` for a node's ``bin/``: the boot id and the kernel module's version from
    ``node/boot_id`` and ``node/version``, everything else from the real ``cat``."""
    return (
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  /proc/sys/kernel/random/boot_id) exec /bin/cat "{node}/boot_id" ;;\n'
        f'  /proc/driver/nvidia/version) exec /bin/cat "{node}/version" ;;\n'
        "esac\n"
        'exec /bin/cat "$@"\n'
    )


def _write_stubs(workdir: Path, fixtures: Path, pidfile: Path) -> Path:
    bin_dir = workdir / "bin"
    node = workdir / "node"
    bin_dir.mkdir()
    node.mkdir()
    shutil.copyfile(fixtures / NVIDIA_SMI_FIXTURE, node / "nvidia-smi.txt")
    shutil.copyfile(fixtures / MODULE_BEFORE_FIXTURE, node / "version")
    (node / "version.after").write_text(MODULE_AFTER_TEXT)
    (node / "boot_id").write_text(f"{uuid.uuid4()}\n")
    stubs = {
        "nvidia-smi": f'#!/bin/sh\nexec /bin/cat "{node}/nvidia-smi.txt"\n',
        "cat": cat_stub(node),
        "systemctl": (
            "#!/bin/sh\n"
            '[ "$1" = reboot ] || { echo "systemctl stub: only reboot" >&2; exit 1; }\n'
            f'/bin/cat /proc/sys/kernel/random/uuid > "{node}/boot_id"\n'
            f'/bin/cp "{node}/version.after" "{node}/version"\n'
            f'listener=$(/bin/cat "{pidfile}")\n'
            "pid=$$\n"
            "victims=\n"
            # walk up to the listener: every sshd on the way serves this connection
            'while [ "$pid" -gt 1 ] && [ "$pid" != "$listener" ]; do\n'
            '  [ "$(/bin/cat /proc/$pid/comm)" = sshd ] && victims="$victims $pid"\n'
            "  pid=$(/bin/sed 's/.*) [A-Z] \\([0-9]*\\).*/\\1/' /proc/$pid/stat)\n"
            "done\n"
            "kill -9 $victims\n"
        ),
    }
    for name, text in stubs.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return bin_dir


def sshd_config_text(
    *,
    port: int,
    host_key: Path,
    pidfile: Path,
    authorized: Path,
    user: str,
    session_env: str,
    extra: Sequence[str] = (),
) -> str:
    """An ``sshd_config`` for a throwaway server on 127.0.0.1:``port`` run as the current user:
    ``user`` alone may log in, by key only, no PAM, no strict modes (the files are a temporary
    folder's); sessions get ``SetEnv session_env``; ``extra`` lines last."""
    return "\n".join(
        [
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {host_key}",
            f"PidFile {pidfile}",
            f"AuthorizedKeysFile {authorized}",
            "StrictModes no",
            "UsePAM no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {user}",
            f"SetEnv {session_env}",
            *extra,
            "",
        ]
    )


def start_sshd(
    workdir: Path,
    fixtures: Path,
    *,
    attempts: int = 3,
    host_ca: Path | None = None,
    prefix: Sequence[str] = (),
    path_extra: Sequence[str] = (),
) -> Sshd:
    """Set up and start sshd under ``workdir``; raises RuntimeError if it cannot.

    ``host_ca``: an OpenSSH private key; the host key is signed into a host certificate for
    principal 127.0.0.1 by the real ``ssh-keygen -s`` and served as sshd's ``HostCertificate``.
    ``prefix``: a command sshd is started under (it must ``exec`` sshd, so the PID stays
    sshd's: a mount namespace's set-up, say); ``path_extra``: folders after the sessions' PATH.
    """
    sshd = find_sshd()
    if sshd is None:
        raise FileNotFoundError("sshd not installed (package openssh-server)")
    workdir.mkdir(parents=True, exist_ok=True)
    user = getpass.getuser()
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key_path = workdir / "host_ed25519"
    client_key_path = workdir / "client_ed25519"
    host_key.write_private_key(host_key_path)
    client_key.write_private_key(client_key_path)
    host_key_path.chmod(0o600)
    client_key_path.chmod(0o600)
    host_cert_lines: list[str] = []
    if host_ca is not None:
        host_key.write_public_key(workdir / "host_ed25519.pub")
        subprocess.run(
            ["ssh-keygen", "-q", "-s", str(host_ca), "-I", "cockpit-test-host", "-h", "-n", "127.0.0.1",
             str(workdir / "host_ed25519.pub")],
            check=True, capture_output=True,
        )  # fmt: skip
        host_cert_lines = [f"HostCertificate {workdir / 'host_ed25519-cert.pub'}"]
    authorized = workdir / "authorized_keys"
    client_key.write_public_key(authorized)
    pidfile = workdir / "sshd.pid"
    bin_dir = _write_stubs(workdir, fixtures, pidfile)
    ssh_config = workdir / "ssh_config"
    ssh_config.write_text("# empty on purpose: the developer's ~/.ssh/config must not apply\n")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    log = workdir / "sshd.log"
    last_error = ""
    for _ in range(attempts):
        port = free_port()
        config = workdir / "sshd_config"
        config.write_text(
            sshd_config_text(
                port=port,
                host_key=host_key_path,
                pidfile=pidfile,
                authorized=authorized,
                user=user,
                session_env="PATH=" + ":".join([str(bin_dir), "/usr/bin", "/bin", *path_extra]),
                extra=[*host_cert_lines, "LogLevel VERBOSE"],
            )
        )
        with log.open("ab") as log_fh:
            proc = subprocess.Popen(
                [*prefix, sshd, "-D", "-e", "-f", str(config), "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=log_fh,
            )
        if _wait_listening(proc, port):
            known_hosts = workdir / "known_hosts"
            known_hosts.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
            return Sshd(proc, port, user, workdir, client_key_path, known_hosts, ssh_config, host_key, log)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        last_error = log.read_text(errors="replace")[-500:]
    raise RuntimeError(f"sshd did not start: {last_error}")


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                # a real sshd greets first: "SSH-2.0-OpenSSH_..."
                sock.settimeout(2.0)
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return True
        except OSError:
            time.sleep(0.05)
    return False
