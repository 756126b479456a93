"""What the transport negotiates with a REAL OpenSSH sshd, and that the probe's command line
runs whole under a real login shell (tests/sshd_fixture.py).

The cheap algorithms (curve25519-sha256, AES-GCM) are offered first because they halve a cold
probe's client CPU (benchmarks/bench_probe_vs_clush.py); an ssh_config that names its own must
still win, and host-key checking never loosens.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from cockpit.fleet.probes import MARK, probe_command, split_sections
from cockpit.fleet.results import ErrorKind
from cockpit.fleet.transport import PREFERRED_CIPHERS, PREFERRED_KEX, HostTarget, Transport, TransportOptions

pytestmark = [pytest.mark.sshd, pytest.mark.usefixtures("isolated_home")]


def transport_for(sshd: Any, *, ssh_config: Path | None = None, known_hosts: Path | None = None) -> Transport:
    target = HostTarget(name="gpu01", address="127.0.0.1", port=sshd.port, user=sshd.user)
    options = TransportOptions(
        ssh_config=ssh_config or sshd.ssh_config,
        known_hosts=known_hosts or sshd.known_hosts,
        client_keys=[sshd.client_key],
        connect_timeout_s=5,
    )
    return Transport([target], options)


@pytest.fixture
def kex_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """asyncssh's own debug log of the key exchange it chose (debug level 2 names it)."""
    asyncssh.set_debug_level(2)
    caplog.set_level(logging.DEBUG, logger="asyncssh")
    yield caplog
    asyncssh.set_debug_level(1)


def negotiated_kex(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage().split("Key exchange alg: ", 1)[1]
        for r in caplog.records
        if "Key exchange alg: " in r.getMessage()
    ]


def connection(transport: Transport) -> asyncssh.SSHClientConnection:
    conn = transport._hosts["gpu01"].conn  # the pooled connection the command went over
    assert conn is not None
    return conn


async def test_cheapest_safe_algorithms_are_negotiated_with_openssh(sshd: Any, kex_log: Any) -> None:
    async with transport_for(sshd) as transport:
        result = await transport.run("gpu01", "true")
        assert result.ok, result.error
        conn = connection(transport)
        assert conn.get_extra_info("send_cipher") == conn.get_extra_info("recv_cipher") == PREFERRED_CIPHERS[0]
        assert conn.get_extra_info("send_mac") == PREFERRED_CIPHERS[0]  # AEAD: the cipher is its own MAC
        again = await transport.run("gpu01", "true")  # the pool: no second login
        assert again.ok and connection(transport) is conn
    assert negotiated_kex(kex_log) == [PREFERRED_KEX[0]]
    assert "Accepted publickey" in sshd.log.read_text()


async def test_an_ssh_config_that_names_algorithms_is_obeyed(sshd: Any, tmp_path: Path, kex_log: Any) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  Ciphers aes256-ctr\n  KexAlgorithms ecdh-sha2-nistp256\n")
    async with transport_for(sshd, ssh_config=config) as transport:
        result = await transport.run("gpu01", "true")
        assert result.ok, result.error
        assert connection(transport).get_extra_info("send_cipher") == "aes256-ctr"
    assert negotiated_kex(kex_log) == ["ecdh-sha2-nistp256"]


async def test_host_key_checking_stays_strict(sshd: Any, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    async with transport_for(sshd, known_hosts=known) as transport:
        result = await transport.run("gpu01", "true")
    assert result.error_kind is ErrorKind.HOST_KEY_CHANGED, result.error


@pytest.mark.parametrize("platform", [False, True])
async def test_the_probe_command_runs_whole_under_a_real_login_shell(sshd: Any, platform: bool) -> None:
    command = probe_command(platform=platform)
    async with transport_for(sshd) as transport:
        result = await transport.run("gpu01", command, timeout=60)
    assert result.exit_status == 0, result.error
    assert result.stdout.rstrip().endswith(f"{MARK} end")
    sections = split_sections(result.stdout)
    started = [ln.split()[1] for ln in result.stdout.splitlines() if ln.startswith(MARK + " ") and " rc " not in ln]
    assert list(sections) == [s for s in started if s != "end"]
    unfinished = [name for name, section in sections.items() if section.status is None]
    assert unfinished == [], unfinished  # every section reached its "rc" line: no syntax the real shell refused
    assert sections["boot-id"].text.strip() == sshd.boot_id()
