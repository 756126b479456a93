"""The SSH transport against the fleet simulator's real asyncssh servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh
import pytest

from cockpit.fleet.results import ErrorKind
from cockpit.fleet.transport import HostTarget, Transport, TransportOptions
from cockpit.sim import SimClientFiles, SimFleet

# the developer's own ~/.ssh and agent never leak into these tests
pytestmark = [pytest.mark.ssh, pytest.mark.usefixtures("isolated_home")]


@pytest.fixture
async def fleet() -> AsyncIterator[SimFleet]:
    async with SimFleet(3, speed=10.0) as f:
        yield f


def bare_targets(fleet: SimFleet) -> list[HostTarget]:
    return fleet.targets()


async def test_runs_commands_and_reports_exit_status_and_streams(fleet: SimFleet, files: SimClientFiles) -> None:
    async with Transport(bare_targets(fleet), TransportOptions(ssh_config=files.ssh_config)) as t:
        ok = await t.run("gpu01", "uname -r; echo oops >&2; false")
        assert ok.exit_status == 1 and ok.error_kind is None
        assert ok.stdout == "6.8.0-60-generic\n" and ok.stderr == "oops\n"
        missing = await t.run("gpu02", "frobnicate --now")
        assert missing.exit_status == 127 and "frobnicate: not found" in missing.stderr
        chunks: list[tuple[str, str]] = []
        piped = await t.run("gpu01", "cat", stdin="hello\nworld\n", on_output=lambda s, c: chunks.append((s, c)))
        assert piped.stdout == "hello\nworld\n" and piped.ok
        assert "".join(c for s, c in chunks if s == "stdout") == "hello\nworld\n"
        assert t.connected("gpu01") and t.connected("gpu02") and not t.connected("gpu03")


async def test_ssh_config_resolves_hosts_by_inventory_name_only(fleet: SimFleet, files: SimClientFiles) -> None:
    # no address, port or user: HostName/Port/User/IdentityFile/UserKnownHostsFile come from ssh_config
    targets = [HostTarget(name=n) for n in fleet.all_names]
    async with Transport(targets, TransportOptions(ssh_config=files.ssh_config)) as t:
        results = await t.run_many(["gpu01", "gpu02", "gpu03", "control"], "hostname")
    assert {h: r.stdout.strip() for h, r in results.items()} == {
        "gpu01": "gpu01",
        "gpu02": "gpu02",
        "gpu03": "gpu03",
        "control": "control",
    }


async def test_concurrent_commands_share_one_connection_per_host(fleet: SimFleet, files: SimClientFiles) -> None:
    async with Transport(bare_targets(fleet), TransportOptions(ssh_config=files.ssh_config)) as t:
        results = await asyncio.gather(*(t.run("gpu01", f"echo {i}") for i in range(8)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
        assert len(fleet._hosts["gpu01"].conns) == 1
        await t.drop("gpu01")
        assert not t.connected("gpu01")
        again = await t.run("gpu01", "true")
        assert again.ok and t.connected("gpu01")


async def test_timeout_stops_the_remote_command(fleet: SimFleet, files: SimClientFiles) -> None:
    async with Transport(bare_targets(fleet), TransportOptions(ssh_config=files.ssh_config)) as t:
        # the simulated sleep runs on the fleet's clock: 6 s at speed 10 is 0.6 s
        result = await t.run("gpu01", "sleep 6 && echo late > /tmp/marker", timeout=0.2)
        assert result.error_kind == ErrorKind.TIMEOUT and result.exit_status is None
        assert "timed out after 0.2 s" in (result.error or "")
        await asyncio.sleep(0.8)
        check = await t.run("gpu01", "cat /tmp/marker")
        assert check.exit_status == 1, "the remote command kept running after the timeout"
        assert "No such file" in check.stderr


async def test_cancellation_stops_the_remote_command_and_propagates(fleet: SimFleet, files: SimClientFiles) -> None:
    async with Transport(bare_targets(fleet), TransportOptions(ssh_config=files.ssh_config)) as t:
        task = asyncio.ensure_future(t.run("gpu02", "sleep 6 && echo late > /tmp/marker"))  # 0.6 s at speed 10
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.8)
        assert (await t.run("gpu02", "cat /tmp/marker")).exit_status == 1


async def test_unknown_host_key_is_refused_with_its_fingerprint(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    opts = TransportOptions(known_hosts=empty, client_keys=[files.identity])
    async with Transport(bare_targets(fleet), opts) as t:
        result = await t.run("gpu01", "true")
    fingerprint = fleet.host_key("gpu01").get_fingerprint("sha256")
    assert result.error_kind == ErrorKind.HOST_KEY_UNKNOWN
    assert fingerprint in (result.error or "") and "--accept-new-host-keys" in (result.error or "")
    assert "\n" not in (result.error or "")
    assert empty.read_text() == ""


async def test_accept_new_records_the_key_and_says_so(fleet: SimFleet, files: SimClientFiles, tmp_path: Path) -> None:
    kh = tmp_path / "kh" / "known_hosts"
    opts = TransportOptions(known_hosts=kh, client_keys=[files.identity], accept_new_host_keys=True)
    async with Transport(bare_targets(fleet), opts) as t:
        first = await t.run("gpu01", "true")
        second = await t.run("gpu01", "true")
    assert first.ok and first.notice and "recorded" in first.notice
    assert fleet.host_key("gpu01").get_fingerprint("sha256") in first.notice
    assert second.notice is None
    host, port = fleet.endpoint("gpu01")
    assert kh.read_text().startswith(f"[{host}]:{port} ssh-ed25519 ")
    # now strict checking accepts it
    async with Transport(bare_targets(fleet), TransportOptions(known_hosts=kh, client_keys=[files.identity])) as t:
        assert (await t.run("gpu01", "true")).ok


async def test_changed_host_key_is_always_refused(fleet: SimFleet, files: SimClientFiles, tmp_path: Path) -> None:
    host, port = fleet.endpoint("gpu02")
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{host}]:{port} {impostor.export_public_key().decode().strip()}\n")
    opts = TransportOptions(known_hosts=kh, client_keys=[files.identity], accept_new_host_keys=True)
    async with Transport(bare_targets(fleet), opts) as t:
        result = await t.run("gpu02", "true")
    assert result.error_kind == ErrorKind.HOST_KEY_CHANGED
    assert impostor.get_fingerprint("sha256") in (result.error or "")
    assert fleet.host_key("gpu02").get_fingerprint("sha256") in (result.error or "")
    assert kh.read_text().count("\n") == 1  # nothing appended


async def test_user_known_hosts_none_does_not_switch_checking_off(
    fleet: SimFleet, files: SimClientFiles, tmp_path: Path
) -> None:
    config = tmp_path / "ssh_config_none"
    config.write_text(
        files.ssh_config.read_text().replace(f"UserKnownHostsFile {files.known_hosts}", "UserKnownHostsFile none")
    )
    async with Transport([HostTarget(name="gpu01")], TransportOptions(ssh_config=config)) as t:
        result = await t.run("gpu01", "true")
    assert result.error_kind == ErrorKind.HOST_KEY_UNKNOWN


async def test_wrong_client_key_is_an_auth_failure(fleet: SimFleet, files: SimClientFiles, tmp_path: Path) -> None:
    stranger = tmp_path / "id_stranger"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    opts = TransportOptions(known_hosts=files.known_hosts, client_keys=[stranger])
    async with Transport(bare_targets(fleet), opts) as t:
        result = await t.run("gpu01", "true")
    assert result.error_kind == ErrorKind.AUTH_FAILED


async def test_refused_port_is_connect_failed_after_capped_retries(files: SimClientFiles) -> None:
    target = HostTarget(name="ghost", address="127.0.0.1", port=1, user="operator")
    opts = TransportOptions(
        known_hosts=files.known_hosts, client_keys=[files.identity], connect_attempts=3, backoff_initial_s=0.05
    )
    async with Transport([target], opts) as t:
        result = await t.run("ghost", "true")
        unknown = await t.run("nobody", "true")
    assert result.error_kind == ErrorKind.CONNECT_FAILED and result.duration_s >= 0.15  # 0.05 + 0.1 of backoff
    assert unknown.error_kind == ErrorKind.BAD_INPUT


async def test_flaky_link_drop_mid_command_is_connection_lost(tmp_path: Path) -> None:
    async with SimFleet(2, "flaky-link", speed=10.0, seed=3) as fleet:
        files = fleet.write_client_files(tmp_path / "sim")
        async with Transport(fleet.targets(), TransportOptions(ssh_config=files.ssh_config)) as t:
            kinds = []
            for _ in range(30):
                r = await t.run("gpu02", "nvidia-smi --query-gpu=index,uuid --format=csv,noheader")
                kinds.append(r.error_kind)
                if r.error_kind is not None:
                    lost = r
                    break
            assert ErrorKind.CONNECTION_LOST in kinds, kinds
            assert lost.exit_status is None and "connection lost" in (lost.error or "")
            # the next command reconnects by itself
            after = await t.run("gpu02", "echo back")
            assert after.stdout == "back\n" or after.error_kind == ErrorKind.CONNECTION_LOST
            steady = await t.run("gpu01", "echo steady")
            assert steady.ok


CONFIG = """\
# global defaults first
ServerAliveInterval 5
Host gpu0? !gpu09
    User ops
    Port 2201
Host gpu09
    HostName 10.0.0.9
Host=bastion
    HostName 192.0.2.1
Host *
    IdentityFile ~/.ssh/id_fleet
    UserKnownHostsFile ~/.ssh/known_fleet
    ProxyJump bastion
"""


@pytest.mark.parametrize("host", ["gpu01", "gpu09", "bastion", "login1"])
def test_config_index_gives_each_host_what_a_full_parse_gives(host: str, tmp_path: Path) -> None:
    from asyncssh.config import SSHClientConfig

    from cockpit.fleet.sshconfig import SshConfigIndex

    path = tmp_path / "ssh_config"
    path.write_text(CONFIG)
    index = SshConfigIndex([str(path)])
    assert index.simple
    reduced = index.paths_for(host)
    assert reduced != [str(path)]

    def options(paths: list[str]) -> dict[str, object]:
        cfg = SSHClientConfig.load(None, paths, False, False, False, "me", (), host, ())
        keys = ("Hostname", "Port", "User", "IdentityFile", "UserKnownHostsFile", "ProxyJump", "ServerAliveInterval")
        return {k: cfg.get(k) for k in keys}

    assert options(reduced) == options([str(path)])
    index.cleanup()
    assert not Path(reduced[0]).exists()


def test_config_index_parses_whole_files_with_match_or_include(tmp_path: Path) -> None:
    from cockpit.fleet.sshconfig import SshConfigIndex

    path = tmp_path / "ssh_config"
    path.write_text("Host a\n  Port 1\nMatch host b\n  Port 2\n")
    index = SshConfigIndex([str(path)])
    assert not index.simple and index.paths_for("b") == [str(path)]


async def test_stdin_sent_slowly_reaches_the_command_whole(fleet: SimFleet, files: SimClientFiles) -> None:
    # a real node's `cat` reads until EOF; the simulator must not run it on the part of
    # stdin that happened to arrive within its short wait for clients that never send EOF
    async with asyncssh.connect("gpu01", config=[str(files.ssh_config)]) as conn:
        process = await conn.create_process("cat")
        process.stdin.write("first\n")
        await asyncio.sleep(0.3)
        process.stdin.write("second\n")
        process.stdin.write_eof()
        result = await process.wait(timeout=10)
    assert result.stdout == "first\nsecond\n" and result.exit_status == 0
