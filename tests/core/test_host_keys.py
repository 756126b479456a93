"""Host keys as OpenSSH treats them: @revoked, @cert-authority, the global file, hashed
names, [host]:port, and accept-new only for a host no file knows.

Against the simulator's asyncssh servers and a real OpenSSH sshd (tests/sshd_fixture.py);
hashed files are made by the real ``ssh-keygen -H``, host certificates by ``ssh-keygen -s``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import sshd_fixture

from cockpit.fleet.results import CommandResult, ErrorKind
from cockpit.fleet.transport import HostTarget, Transport, TransportOptions
from cockpit.sim import SimClientFiles, SimFleet

pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("isolated_home")]
needs_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) missing")


@pytest.fixture
async def fleet() -> AsyncIterator[SimFleet]:
    async with SimFleet(2, speed=10.0) as f:
        yield f


def known_hosts(folder: Path, text: str) -> Path:
    """A user known_hosts file in ``folder`` holding ``text``."""
    path = folder / "known_hosts"
    path.write_text(text)
    return path


def key_text(key: asyncssh.SSHKey) -> str:
    return key.export_public_key().decode().strip()


def hashed(name: str) -> str:
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def config_with(tmp_path: Path, *, user: Path, global_: Path) -> Path:
    """An ssh_config naming both files, as an operator's would."""
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n    UserKnownHostsFile {user}\n    GlobalKnownHostsFile {global_}\n")
    return config


async def run_on(fleet: SimFleet, files: SimClientFiles, host: str, **options: Any) -> CommandResult:
    opts = TransportOptions(client_keys=[files.identity], connect_attempts=1, **options)
    async with Transport(fleet.targets(), opts) as t:
        return await t.run(host, "true")


async def test_revoked_key_is_refused_even_with_accept_new(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    host, port = fleet.endpoint("gpu01")
    kh = known_hosts(tmp_path, f"@revoked [{host}]:{port} {key_text(fleet.host_key('gpu01'))}\n")
    before = kh.read_text()
    result = await run_on(fleet, files, "gpu01", known_hosts=kh, accept_new_host_keys=True)
    assert result.error_kind is ErrorKind.HOST_KEY_REVOKED
    assert "REVOKED" in (result.error or "") and fleet.host_key("gpu01").get_fingerprint("sha256") in (
        result.error or ""
    )
    assert "\n" not in (result.error or "")
    assert kh.read_text() == before  # never recorded


async def test_revoked_wins_over_a_trusted_line_for_the_same_key(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    host, port = fleet.endpoint("gpu01")
    line = f"[{host}]:{port} {key_text(fleet.host_key('gpu01'))}"
    user = tmp_path / "known_hosts"
    user.write_text(line + "\n")
    global_ = tmp_path / "ssh_known_hosts"
    global_.write_text(f"@revoked {line}\n")  # the admin revoked it fleet-wide
    config = config_with(tmp_path, user=user, global_=global_)
    result = await run_on(fleet, files, "gpu01", ssh_config=config)
    assert result.error_kind is ErrorKind.HOST_KEY_REVOKED


async def test_global_known_hosts_file_is_honoured(fleet: SimFleet, files: SimClientFiles, tmp_path: Path) -> None:
    host, port = fleet.endpoint("gpu01")
    user = tmp_path / "known_hosts"
    user.write_text("")
    global_ = tmp_path / "ssh_known_hosts"
    global_.write_text(f"[{host}]:{port} {key_text(fleet.host_key('gpu01'))}\n")
    config = config_with(tmp_path, user=user, global_=global_)
    assert (await run_on(fleet, files, "gpu01", ssh_config=config)).ok
    # --known-hosts replaces the user files only: the global file still counts
    assert (await run_on(fleet, files, "gpu01", ssh_config=config, known_hosts=user)).ok
    assert user.read_text() == ""


async def test_a_key_that_differs_from_the_global_file_is_refused_not_accepted_new(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    host, port = fleet.endpoint("gpu02")
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    user = tmp_path / "known_hosts"
    user.write_text("")
    global_ = tmp_path / "ssh_known_hosts"
    global_.write_text(f"[{host}]:{port} {key_text(impostor)}\n")
    config = config_with(tmp_path, user=user, global_=global_)
    result = await run_on(fleet, files, "gpu02", ssh_config=config, accept_new_host_keys=True)
    assert result.error_kind is ErrorKind.HOST_KEY_CHANGED
    error = result.error or ""
    assert str(global_) in error and "man-in-the-middle" in error
    assert impostor.get_fingerprint("sha256") in error and fleet.host_key("gpu02").get_fingerprint("sha256") in error
    assert user.read_text() == ""


async def test_accept_new_records_only_a_host_no_file_knows(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    host, port = fleet.endpoint("gpu01")
    user = tmp_path / "known_hosts"
    # another host's key, and this host on port 22: neither is a key for [host]:port
    other_host, other_port = fleet.endpoint("gpu02")
    user.write_text(
        f"[{other_host}]:{other_port} {key_text(fleet.host_key('gpu02'))}\n"
        f"{host} {key_text(asyncssh.generate_private_key('ssh-ed25519'))}\n"
    )
    global_ = tmp_path / "ssh_known_hosts"
    global_.write_text("")
    config = config_with(tmp_path, user=user, global_=global_)
    result = await run_on(fleet, files, "gpu01", ssh_config=config, accept_new_host_keys=True)
    assert result.ok and result.notice and "recorded" in result.notice
    assert user.read_text().splitlines()[-1].startswith(f"[{host}]:{port} ssh-ed25519 ")


async def test_a_port_22_entry_does_not_vouch_for_another_port(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    # OpenSSH looks up [host]:port only; asyncssh's match() would fall back to "host"
    host, _ = fleet.endpoint("gpu01")
    kh = known_hosts(tmp_path, f"{host} {key_text(fleet.host_key('gpu01'))}\n")
    result = await run_on(fleet, files, "gpu01", known_hosts=kh)
    assert result.error_kind is ErrorKind.HOST_KEY_UNKNOWN


@needs_keygen
async def test_hashed_entries_are_matched(fleet: SimFleet, files: SimClientFiles, tmp_path: Path) -> None:
    host, port = fleet.endpoint("gpu01")
    kh = known_hosts(tmp_path, f"[{host}]:{port} {key_text(fleet.host_key('gpu01'))}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert kh.read_text().startswith("|1|")
    assert (await run_on(fleet, files, "gpu01", known_hosts=kh)).ok
    # a hashed @revoked line (ssh-keygen -H leaves marker lines alone: hashed as sshd(8) says,
    # HMAC-SHA1 of the name keyed by a random salt)
    kh.write_text(f"@revoked {hashed(f'[{host}]:{port}')} {key_text(fleet.host_key('gpu01'))}\n")
    result = await run_on(fleet, files, "gpu01", known_hosts=kh, accept_new_host_keys=True)
    assert result.error_kind is ErrorKind.HOST_KEY_REVOKED


async def test_a_bad_known_hosts_line_is_one_clear_refusal(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    kh = known_hosts(tmp_path, "# ok\n@frobnicate host ssh-ed25519 AAAA\n")
    result = await run_on(fleet, files, "gpu01", known_hosts=kh, accept_new_host_keys=True)
    assert result.error_kind is ErrorKind.BAD_INPUT
    assert f"{kh} line 2" in (result.error or "") and "\n" not in (result.error or "")


# --- against a real OpenSSH sshd


def sshd_transport(server: Any, known_hosts: Path, **options: Any) -> Transport:
    target = HostTarget(name="gpu01", address="127.0.0.1", port=server.port, user=server.user)
    opts = TransportOptions(
        ssh_config=server.ssh_config,
        known_hosts=known_hosts,
        client_keys=[server.client_key],
        connect_attempts=1,
        connect_timeout_s=5,
        **options,
    )
    return Transport([target], opts)


@pytest.mark.sshd
async def test_openssh_revoked_key_is_refused(sshd: Any, tmp_path: Path) -> None:
    kh = known_hosts(tmp_path, f"@revoked [127.0.0.1]:{sshd.port} {key_text(sshd.host_key)}\n")
    async with sshd_transport(sshd, kh, accept_new_host_keys=True) as t:
        result = await t.run("gpu01", "true")
    assert result.error_kind is ErrorKind.HOST_KEY_REVOKED
    assert kh.read_text().count("\n") == 1


@pytest.fixture
def ca_sshd(tmp_path: Path, fixtures_dir: Path) -> Iterator[tuple[Any, asyncssh.SSHKey]]:
    """A real sshd whose host key ssh-keygen -s signed with a throwaway host CA."""
    if sshd_fixture.find_sshd() is None or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd / ssh-keygen not installed")
    ca = asyncssh.generate_private_key("ssh-ed25519")
    ca_path = tmp_path / "host_ca"
    ca.write_private_key(ca_path)
    ca_path.chmod(0o600)
    server = sshd_fixture.start_sshd(tmp_path / "sshd", fixtures_dir, host_ca=ca_path)
    try:
        yield server, ca
    finally:
        server.stop()


@pytest.mark.sshd
async def test_openssh_host_certificate_signed_by_a_listed_ca_is_accepted(
    ca_sshd: tuple[Any, asyncssh.SSHKey], tmp_path: Path
) -> None:
    server, ca = ca_sshd
    kh = known_hosts(tmp_path, f"@cert-authority [127.0.0.1]:* {key_text(ca)}\n")
    async with sshd_transport(server, kh) as t:
        result = await t.run("gpu01", "echo certified")
    assert result.ok and result.stdout == "certified\n"
    assert kh.read_text().count("\n") == 1  # trusted through the CA, nothing recorded


@pytest.mark.sshd
async def test_openssh_host_certificate_by_an_unlisted_or_revoked_ca_is_refused(
    ca_sshd: tuple[Any, asyncssh.SSHKey], tmp_path: Path
) -> None:
    server, ca = ca_sshd
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    kh = known_hosts(tmp_path, f"@cert-authority [127.0.0.1]:* {key_text(stranger)}\n")
    async with sshd_transport(server, kh, accept_new_host_keys=True) as t:
        result = await t.run("gpu01", "true")
    assert result.error_kind in (ErrorKind.HOST_KEY_UNKNOWN, ErrorKind.HOST_KEY_CHANGED)
    assert result.error and "\n" not in result.error
    kh.write_text(f"@cert-authority [127.0.0.1]:* {key_text(ca)}\n@revoked * {key_text(ca)}\n")
    async with sshd_transport(server, kh, accept_new_host_keys=True) as t:
        result = await t.run("gpu01", "true")
    assert result.error_kind is ErrorKind.HOST_KEY_REVOKED


def test_which_files_are_read(fleet: SimFleet, files: SimClientFiles, tmp_path: Path) -> None:
    from asyncssh.config import SSHClientConfig

    from cockpit.fleet.hostkeys import DEFAULT_GLOBAL_FILES, KnownHosts

    def resolved(config: Path) -> Any:
        return SSHClientConfig.load(None, [str(config)], False, False, False, "u", "u", "gpu01", 22)

    empty = tmp_path / "empty_config"
    empty.write_text("")
    chosen = KnownHosts(None).files_for(resolved(empty))
    assert [str(p) for p in chosen.global_] == list(DEFAULT_GLOBAL_FILES)  # OpenSSH's defaults
    assert chosen.user[0].name == "known_hosts"
    # the simulator's throwaway keys are vouched for by its own file only
    sim = KnownHosts(None).files_for(resolved(files.ssh_config))
    assert sim.user == (files.known_hosts,) and sim.global_ == ()
