"""Who a simulated node's SSH login is, and what a login that is not root is refused.

A node's :class:`Login` is root by default (as every node was before this module); a
scenario may make it a user with passwordless sudo, with sudo that wants a password, or
without sudo. As that user, the commands that need root fail with the real tools' words
(each cited below) and ``sudo`` behaves as sudo(8) does without a terminal. The node's
shell carries whether a command runs as root in :attr:`cockpit.sim.shell.Io.root`:
``sudo`` sets it for the command it runs, ``sh -c`` passes it on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cockpit.sim.apt_plan import AptOptions
from cockpit.sim.shell import Handler, Io

PASSWORDLESS = "passwordless"
PASSWORD_REQUIRED = "password-required"
ABSENT = "absent"


@dataclass(frozen=True)
class Login:
    """The SSH user of a node: its name, uid, groups, and what ``sudo -n`` does for it."""

    user: str = "root"
    uid: int = 0
    sudo: str = PASSWORDLESS  # passwordless, password-required, absent (not installed)
    groups: tuple[str, ...] = ()  # supplementary groups besides the user's own

    @property
    def root(self) -> bool:
        return self.uid == 0

    def id_line(self, as_root: bool) -> str:
        """``id`` (coreutils): uid, gid and groups of whoever runs it."""
        if as_root:
            return "uid=0(root) gid=0(root) groups=0(root)"
        gids = {"adm": 4, "sudo": 27, "docker": 999}
        extra = "".join(f",{gids.get(g, 1100)}({g})" for g in self.groups)
        return f"uid={self.uid}({self.user}) gid={self.uid}({self.user}) groups={self.uid}({self.user}){extra}"


ROOT = Login()

#: sudo(8) over SSH without a terminal, sudo 1.9: without -n it cannot read a password; with
#: -n it does not try ("If a password is required for the command to run, sudo will display
#: an error message and exit"); both exit 1
SUDO_NEEDS_PASSWORD = "sudo: a password is required\n"
SUDO_NO_TERMINAL = (
    "sudo: a terminal is required to read the password; either use the -S option to read from "
    "standard input or configure an askpass helper\n"
)

#: apt 2.x as a user (apt-pkg/contrib/fileutl.cc GetLock, apt-pkg/deb/debsystem.cc): the
#: frontend lock of dpkg cannot be opened, then the question
APT_NOT_ROOT = (
    "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\n"
    "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?\n"
)
APT_LISTS_NOT_ROOT = (
    "E: Could not open lock file /var/lib/apt/lists/lock - open (13: Permission denied)\n"
    "E: Unable to lock directory /var/lib/apt/lists/\n"
)
#: apt-get -s as a user (apt-private/private-install.cc): it simulates, and says so first
APT_SIMULATION_NOTE = (
    "NOTE: This is only a simulation!\n"
    "      apt-get needs root privileges for real execution.\n"
    "      Keep also in mind that locking is deactivated,\n"
    "      so don't depend on the relevance to the real current situation!\n"
)
#: apt-mark hold/unhold as a user: dpkg --set-selections refuses, apt-mark asks (cmdline/apt-mark.cc)
APT_MARK_NOT_ROOT = (
    "dpkg: error: required read/write access to the dpkg database directory /var/lib/dpkg\n"
    "E: Sub-process dpkg --set-selections returned an error code (2)\n"
    "E: Executing dpkg failed. Are you root?\n"
)
#: dpkg's own check (src/main/main.c, "requested operation requires superuser privilege")
DPKG_NOT_ROOT = "dpkg: error: requested operation requires superuser privilege\n"
#: systemctl as a user over SSH: polkit has no agent to ask, logind refuses
#: (systemd/systemd#36786: "Call to Reboot failed: Interactive authentication required.")
REBOOT_NOT_ROOT = "Call to Reboot failed: Interactive authentication required.\n"
#: docker CLI without the docker group: the daemon's socket is root's (Docker's post-install docs)
DOCKER_NOT_ROOT = (
    "docker: permission denied while trying to connect to the Docker daemon socket at "
    'unix:///var/run/docker.sock: Head "http://%2Fvar%2Frun%2Fdocker.sock/_ping": '
    "dial unix /var/run/docker.sock: connect: permission denied\n"
)

_APT_CHANGES = frozenset(
    {"install", "reinstall", "remove", "purge", "upgrade", "dist-upgrade", "full-upgrade", "autoremove"}
)
_UNIT_VERBS = frozenset({"start", "stop", "restart", "try-restart", "reload", "kill", "reset-failed"})
_UNIT_FILE_VERBS = frozenset({"enable", "disable", "mask", "unmask"})
_POWER_VERBS = frozenset({"reboot", "poweroff", "halt", "kexec", "soft-reboot"})
#: where a user may create files: the temporary directories and home directories (anything else is root's)
USER_WRITABLE = ("/tmp/", "/var/tmp/", "/home/", "/dev/null")
#: directories every node has (the file system hierarchy), besides those commands made
SYSTEM_DIRS = frozenset(
    {"/var", "/var/cache", "/var/lib", "/var/log", "/etc", "/usr", "/opt", "/root", "/home", "/tmp"}
)


def user_may_write(path: str) -> bool:
    return path.startswith(USER_WRITABLE)


def _apt_get(argv: list[str], io: Io) -> int | None:
    opts = AptOptions.parse(argv[1:])
    action = opts.words[0] if opts.words else ""
    if action == "update":
        io.err(APT_LISTS_NOT_ROOT)
        return 100
    if action in _APT_CHANGES and not opts.simulate:
        if opts.download_only:
            # --download-only locks the archives directory instead of dpkg's (apt-get.cc)
            archives = opts.config.get("dir::cache::archives", "/var/cache/apt/archives/").rstrip("/") + "/"
            io.err(
                f"E: Could not open lock file {archives}lock - open (13: Permission denied)\n"
                f"E: Unable to lock directory {archives}\n"
            )
            return 100
        io.err(APT_NOT_ROOT)
        return 100
    if action in _APT_CHANGES:
        io.out(APT_SIMULATION_NOTE)
    return None


def _apt_mark(argv: list[str], io: Io) -> int | None:
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words and not words[0].startswith("show"):
        io.err(APT_MARK_NOT_ROOT)
        return 100
    return None


def _dpkg(argv: list[str], io: Io) -> int | None:
    changing = {"-i", "--install", "-r", "--remove", "-P", "--purge", "--configure", "--unpack", "--set-selections"}
    if changing & set(argv[1:]):
        io.err(DPKG_NOT_ROOT)
        return 2
    return None


def _systemctl(argv: list[str], io: Io) -> int | None:
    words = [a for a in argv[1:] if not a.startswith("-")]
    verb, units = (words[0], words[1:]) if words else ("", [])
    if verb in _POWER_VERBS:
        io.err(REBOOT_NOT_ROOT.replace("Reboot", {"poweroff": "PowerOff", "halt": "Halt"}.get(verb, "Reboot")))
        return 1
    if verb in _UNIT_VERBS and units:
        unit = units[0] if "." in units[0] else units[0] + ".service"
        io.err(
            f"Failed to {verb} {unit}: Interactive authentication required.\n"
            f"See system logs and 'systemctl status {unit}' for details.\n"
        )
        return 1
    if verb in _UNIT_FILE_VERBS or verb == "daemon-reload":
        what = "reload daemon" if verb == "daemon-reload" else f"{verb} unit"
        io.err(f"Failed to {what}: Interactive authentication required.\n")
        return 1
    return None


def _reboot(argv: list[str], io: Io) -> int | None:
    if argv[0] == "shutdown" and not ({"-r", "--reboot"} & set(argv[1:])):
        return None
    io.err(REBOOT_NOT_ROOT)
    return 1


def _docker(login: Login) -> Callable[[list[str], Io], int | None]:
    def refuse(argv: list[str], io: Io) -> int | None:
        if "docker" in login.groups or argv[1:2] in (["--version"], ["version"]):
            return None
        io.err(DOCKER_NOT_ROOT)
        return 125 if argv[1:2] == ["run"] else 1

    return refuse


def refusals(login: Login, is_dir: Callable[[str], bool]) -> dict[str, Callable[[list[str], Io], int | None]]:
    """Command name -> what it says to a caller that is not root (its exit status), or None to run."""

    def mkdir(argv: list[str], io: Io) -> int | None:
        # GNU mkdir names the first directory it could not create
        for path in (a.rstrip("/") for a in argv[1:] if not a.startswith("-")):
            parts = path.split("/")
            prefixes = ("/".join(parts[:i]) for i in range(2, len(parts) + 1))
            missing = next((d for d in prefixes if d not in SYSTEM_DIRS and not is_dir(d)), None)
            if missing is not None and not user_may_write(missing):
                io.err(f"mkdir: cannot create directory '{missing}': Permission denied\n")
                return 1
        return None

    return {
        "apt-get": _apt_get,
        "apt": _apt_get,
        "apt-mark": _apt_mark,
        "dpkg": _dpkg,
        "systemctl": _systemctl,
        "reboot": _reboot,
        "shutdown": _reboot,
        "mkdir": mkdir,
        "docker": _docker(login),
    }


def guarded(handler: Handler, refuse: Callable[[list[str], Io], int | None]) -> Handler:
    """``handler`` for root; for anyone else first what the real command refuses them."""

    async def run(argv: list[str], io: Io) -> int:
        if not io.root:
            status = refuse(argv, io)
            if status is not None:
                return status
        return await handler(argv, io)

    return run


def _sudo_options(argv: list[str]) -> list[str]:
    """sudo's own options: those before the command (or ``--``)."""
    options = []
    for word in argv[1:]:
        if word == "--" or not word.startswith("-"):
            break
        options.append(word)
    return options


def sudo(login: Login, run_as_root: Handler) -> Handler:
    """sudo(8) for ``login``, over SSH without a terminal: root and a passwordless login run the
    command as root; otherwise -n says a password is required, and without -n sudo cannot read one."""

    async def run(argv: list[str], io: Io) -> int:
        if io.root or login.sudo == PASSWORDLESS:
            return await run_as_root(argv, io)
        options = _sudo_options(argv)
        if not any(o in ("-n", "--non-interactive") or (o[1:2] != "-" and "n" in o[1:]) for o in options):
            io.err(SUDO_NO_TERMINAL)
        io.err(SUDO_NEEDS_PASSWORD)
        return 1

    return run
