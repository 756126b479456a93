"""pair and review hardened: the installed cockpit (never one in the cwd), tmux sockets
checked as tmux checks its own folder, a reviewer refused at start on a session file
they cannot append to."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cockpit.cli import main
from cockpit.errors import BadInput
from cockpit.session.pair import check_socket, default_socket, installed_cockpit

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "sessions" / "examples" / "demo-gpu-missing.toml"
ROOT = os.geteuid() == 0


def hostile_cwd(where: Path) -> Path:
    """A folder whose cockpit.py and cockpit/ write a marker when imported."""
    marker = where / "hostile-ran"
    code = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(0)\n"
    (where / "cockpit.py").write_text(code)
    (where / "cockpit").mkdir()
    for name in ("__init__.py", "__main__.py"):
        (where / "cockpit" / name).write_text(code)
    return marker


@pytest.mark.binary
def test_the_installed_cockpit_is_started_never_one_in_the_cwd(tmp_path: Path) -> None:
    marker = hostile_cwd(tmp_path)
    # the hazard is real: python -m cockpit in that folder runs the hostile one
    subprocess.run([sys.executable, "-m", "cockpit", "--help"], cwd=tmp_path, capture_output=True, timeout=60)
    assert marker.exists()
    marker.unlink()
    for argv in (installed_cockpit(), [sys.executable, "-P", "-m", "cockpit"]):
        done = subprocess.run([*argv, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "usage: cockpit" in done.stdout, (argv, done.stderr)
        assert not marker.exists(), argv


def test_without_our_console_script_the_interpreter_runs_it_with_dash_p(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "cockpit").write_text("#!/bin/sh\necho someone else's cockpit\n")  # not our entry point
    (fake_bin / "cockpit").chmod(0o755)
    python = str(fake_bin / "python3")
    assert installed_cockpit(python) == [python, "-P", "-m", "cockpit"]
    assert installed_cockpit() == [str(Path(sys.executable).parent / "cockpit")]  # this venv's own


@pytest.fixture
def tmux_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "sockets"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def bound() -> Iterator[Callable[[Path], Path]]:
    """Bind a unix socket at a path (what a tmux server leaves there)."""
    socks: list[socket.socket] = []

    def bind(path: Path) -> Path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        socks.append(sock)
        path.chmod(0o600)
        return path

    yield bind
    for sock in socks:
        sock.close()


def test_default_socket_lives_in_a_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    sock = default_socket("CHG-1")
    assert sock == tmp_path / f"cockpit-pair-{os.getuid()}" / "CHG-1.sock"
    check_socket(sock, private_folder=True)
    assert (sock.parent.stat().st_mode & 0o777) == 0o700
    sock.parent.chmod(0o755)  # tmux refuses its own folder when others have any access: so do we
    with pytest.raises(BadInput, match="lets others replace the socket"):
        check_socket(sock, private_folder=True)


def test_a_socket_in_a_folder_others_can_write_is_refused(tmux_dir: Path) -> None:
    tmux_dir.chmod(0o1777)  # like /tmp itself: anyone could have made the socket first
    with pytest.raises(BadInput, match=r"mode 1777 lets others replace the socket"):
        check_socket(tmux_dir / "pair.sock", private_folder=False)
    tmux_dir.chmod(0o770)
    with pytest.raises(BadInput, match="lets others replace"):
        check_socket(tmux_dir / "pair.sock", private_folder=False)
    tmux_dir.chmod(0o755)  # readable by others is fine for a folder given with --socket
    check_socket(tmux_dir / "pair.sock", private_folder=False)


def test_what_is_not_a_private_socket_of_ours_is_refused(tmux_dir: Path, bound: Callable[[Path], Path]) -> None:
    plain = tmux_dir / "plain.sock"
    plain.write_text("")
    with pytest.raises(BadInput, match="not a socket"):
        check_socket(plain, private_folder=False)
    link = tmux_dir / "link"
    link.symlink_to(tmux_dir)
    with pytest.raises(BadInput, match="not a folder"):
        check_socket(link / "pair.sock", private_folder=False)
    ours = bound(tmux_dir / "ours.sock")
    check_socket(ours, private_folder=False)
    ours.chmod(0o660)  # a group is how a second Unix user is let in
    check_socket(ours, private_folder=False)
    ours.chmod(0o777)
    with pytest.raises(BadInput, match="gives everyone access"):
        check_socket(ours, private_folder=False)


@pytest.mark.skipif(not ROOT, reason="giving a file to another user needs root")
def test_another_users_socket_or_folder_is_refused_by_pair(
    tmux_dir: Path, bound: Callable[[Path], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    nobody = pwd.getpwnam("nobody")
    theirs = bound(tmux_dir / "theirs.sock")
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    args = ["pair", "--demo", "--change-id", "P1", "--sessions", str(tmux_dir), "--no-attach"]
    assert main([*args, "--socket", str(theirs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to join another user's tmux server" in err
    their_folder = tmux_dir / "theirs"
    their_folder.mkdir(mode=0o700)
    os.chown(their_folder, nobody.pw_uid, nobody.pw_gid)
    assert main([*args, "--socket", str(their_folder / "pair.sock")]) == 2
    assert f"owned by uid {nobody.pw_uid}, not you" in capsys.readouterr().err


# --- the reviewer on a session file they cannot append to


@pytest.fixture
def shared_copy() -> Iterator[Path]:
    """The example session and its runbook in a folder of its own (what a test mounts read-only)."""
    folder = Path(tempfile.mkdtemp(prefix="cockpit-review-ro-"))
    try:
        shutil.copy(EXAMPLE, folder / EXAMPLE.name)
        shutil.copytree(EXAMPLE.parent / "checklists", folder / "checklists")
        yield folder / EXAMPLE.name
    finally:
        for path in [folder, *folder.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(folder)
        shutil.rmtree(folder.with_name(folder.name + "-file"), ignore_errors=True)


def review_read_only(session: Path, *, folder_only: bool = False) -> subprocess.CompletedProcess[str]:
    """``cockpit review SESSION --as bob`` on a session made read-only for it: by its mode for an
    ordinary user; for root (whom modes do not bind), by a read-only bind mount in a private
    mount namespace (``unshare -m``), the session file itself writable elsewhere with
    ``folder_only`` (there the folder holds a link to the writable file)."""
    review = shlex.join([*installed_cockpit(), "review", str(session), "--as", "bob"])
    if not ROOT:
        if folder_only:
            session.parent.chmod(0o555)
        else:
            session.chmod(0o444)
        return run_review(["sh", "-c", review])
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("root, and no private mount namespace (unshare -m) to make a read-only folder in")
    folder = shlex.quote(str(session.parent))
    mounts = f"mount --bind -o ro {folder} {folder}"
    if folder_only:  # the file itself is a writable mount of its own; the folder that names it is not
        # (not a link to a file elsewhere: a session file that is a link is refused as planted)
        elsewhere = session.parent.with_name(session.parent.name + "-file")
        elsewhere.mkdir()
        shutil.copy2(session, elsewhere / session.name)
        mounts += f" && mount --bind {shlex.quote(str(elsewhere / session.name))} {shlex.quote(str(session))}"
    return run_review(["unshare", "-m", "sh", "-c", f"{mounts} && exec {review}"])


def run_review(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.binary
def test_a_read_only_session_file_is_refused_at_start_in_one_line(shared_copy: Path) -> None:
    # writable, the reviewer gets as far as wanting a terminal
    writable = run_review([*installed_cockpit(), "review", str(shared_copy), "--as", "bob"])
    assert writable.returncode == 2 and "read-only" not in writable.stderr and "terminal" in writable.stderr
    done = review_read_only(shared_copy)
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in done.stderr
    assert "cannot review" in err[0] and "read-only for you" in err[0] and str(shared_copy) in err[0]


@pytest.mark.binary
def test_a_read_only_session_folder_is_refused_at_start(shared_copy: Path) -> None:
    done = review_read_only(shared_copy, folder_only=True)
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and f"its folder {shared_copy.parent} is read-only for you" in err[0]
