"""Which nodes a change window covers, and how to reach each one.

A host SPEC (``--hosts``) is a comma list of node sets (``gpu[01-16],login1``) and
``@FILE`` references. FILE is an Ansible inventory (INI or YAML) or a plain list, one
host per line; ``@FILE:GROUP`` takes one group (with its child groups). Ansible host
variables ``ansible_host``, ``ansible_port`` and ``ansible_user`` (group vars too)
become the :class:`~cockpit.fleet.transport.HostTarget` fields, and the cockpit's own
``cockpit_node_name`` the node's name in its scheduler (Kubernetes, Slurm) where it
differs from the inventory name. ``group_vars/`` and ``host_vars/`` beside an INI or YAML
inventory are read as Ansible reads them (files ``NAME``, ``NAME.yml``, ``NAME.yaml``,
``NAME.json``, or a directory ``NAME/`` of such files, in sorted order), with Ansible's
precedence (its "Understanding variable precedence": inventory-file group vars, then
``group_vars/all``, then ``group_vars/*``, then inventory-file host vars, then
``host_vars/*``; among groups ``all`` lowest and child groups over their parents).

Every name, address and user is checked where it enters, and a bad one is refused
with the value and where it came from (``hosts.ini line 7``), so nothing hostile
(``gpu01;reboot``, ``-oProxyCommand=x``) ever reaches a command line.
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from cockpit.errors import BadInput
from cockpit.fleet.nodeset import MAX_NODES, NameBudget, expand_nodeset, split_nodeset
from cockpit.fleet.targets import HostTarget
from cockpit.runbook.placeholders import validate_host_name

InventoryFormat = Literal["ini", "yaml", "plain"]

#: legacy spellings of the connection variables, folded into the current names on input
#: so that a host's ``ansible_ssh_user`` still beats a group's ``ansible_user``
_LEGACY_VARS = {
    "ansible_ssh_host": "ansible_host",
    "ansible_ssh_port": "ansible_port",
    "ansible_ssh_user": "ansible_user",
}

_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_GROUP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# one Ansible range: [01:08], [a:f], [1:10:2], [:5]
_ANSIBLE_RANGE = re.compile(r"\[([0-9A-Za-z]*):([0-9A-Za-z]+)(?::([0-9]+))?\]")


@dataclass
class Inventory:
    """Hosts (in file order) and groups (each with every host below it)."""

    source: str
    hosts: dict[str, HostTarget] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)

    def targets(self, group: str | None = None) -> list[HostTarget]:
        """All hosts, or the hosts of ``group`` (child groups included)."""
        if group is None:
            return list(self.hosts.values())
        if group not in self.groups:
            known = ", ".join(sorted(self.groups)) or "none"
            raise BadInput(f"{self.source}: no group {group!r} (groups: {known})")
        return [self.hosts[name] for name in self.groups[group]]


# --- checks ---------------------------------------------------------------------------


def _check_name(name: str, where: str) -> str:
    try:
        return validate_host_name(name)
    except BadInput as exc:
        raise BadInput(f"{where}: {exc}") from None


def _check_user(user: str, where: str) -> str:
    if not _USER.match(user):
        raise BadInput(f"{where}: user {user!r} may hold only letters, digits, '_', '.', '-' (not first)")
    return user


def _check_port(value: object, where: str) -> int:
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise BadInput(f"{where}: port {value!r} is not a number from 1 to 65535")
    return int(text)


#: the inventory variable naming a node in its scheduler (kubectl drain, scontrol update)
NODE_NAME_VAR = "cockpit_node_name"


def _target(name: str, variables: Mapping[str, Any], where: str) -> HostTarget:
    """A checked HostTarget from an inventory name and its merged variables."""
    _check_name(name, where)
    address, port, user = (variables.get(k) for k in ("ansible_host", "ansible_port", "ansible_user"))
    node_name = variables.get(NODE_NAME_VAR)
    for key, value in (
        ("ansible_host", address),
        ("ansible_port", port),
        ("ansible_user", user),
        (NODE_NAME_VAR, node_name),
    ):
        # one word each: a list or mapping (an alias bomb's root) is never made into text
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
            raise BadInput(f"{where}: {key} of {name} must be one value, not a {type(value).__name__}")
    return HostTarget(
        name=name,
        address=_check_name(str(address), f"{where}: ansible_host of {name}") if address is not None else None,
        port=_check_port(port, f"{where}: ansible_port of {name}") if port is not None else None,
        user=_check_user(str(user), f"{where}: ansible_user of {name}") if user is not None else None,
        node_name=_check_name(str(node_name), f"{where}: {NODE_NAME_VAR} of {name}") if node_name is not None else None,
    )


def _normalise(variables: Mapping[str, Any]) -> dict[str, Any]:
    return {_LEGACY_VARS.get(key, key): value for key, value in variables.items()}


# --- Ansible host patterns ------------------------------------------------------------


def _range_values(match: re.Match[str], pattern: str, where: str) -> list[str]:
    lo, hi, step_text = match.group(1) or "0", match.group(2), match.group(3)
    step = int(step_text) if step_text else 1
    if step < 1:
        raise BadInput(f"{where}: host range step in {pattern!r} must be at least 1")
    if lo.isdigit() and hi.isdigit():
        if lo.startswith("0") and len(lo) > 1 and len(hi) != len(lo):
            raise BadInput(f"{where}: host range {match.group(0)} must give both ends the same width")
        width = len(lo) if lo.startswith("0") else 0
        if int(hi) < int(lo):
            raise BadInput(f"{where}: host range {match.group(0)} goes backwards")
        if (int(hi) - int(lo)) // step >= MAX_NODES:
            raise BadInput(f"{where}: host range {match.group(0)} is larger than {MAX_NODES} names")
        return [str(n).zfill(width) for n in range(int(lo), int(hi) + 1, step)]
    if len(lo) == 1 and len(hi) == 1 and lo.isalpha() and hi.isalpha():
        if ord(hi) < ord(lo):
            raise BadInput(f"{where}: host range {match.group(0)} goes backwards")
        return [chr(c) for c in range(ord(lo), ord(hi) + 1, step)]
    raise BadInput(f"{where}: bad host range {match.group(0)} in {pattern!r}")


def expand_ansible_range(pattern: str, where: str = "inventory", budget: NameBudget | None = None) -> list[str]:
    """``gpu[01:08]`` -> gpu01..gpu08 (Ansible's inclusive ranges; letters and steps too;
    several ranges in one name form a product, leftmost outermost). The count is known, and
    held to :data:`MAX_NODES` and ``budget``, before any name is made."""
    choices: list[list[str]] = []
    rest = pattern
    while (match := _ANSIBLE_RANGE.search(rest)) is not None:
        choices += [[rest[: match.start()]], _range_values(match, pattern, where)]
        rest = rest[match.end() :]
    choices.append([rest])
    if any("[" in c[0] or "]" in c[0] for c in choices[::2]):
        raise BadInput(f"{where}: bad host range in {pattern!r} (expected [START:END] or [START:END:STEP])")
    total = math.prod(len(c) for c in choices)
    if total > MAX_NODES:
        raise BadInput(f"{where}: host pattern {pattern[:80]!r} is {total:,} names, larger than {MAX_NODES}")
    if budget is not None:
        budget.take(total, f"{where}: host pattern {pattern[:80]!r}")
    return ["".join(combo) for combo in itertools.product(*choices)]


# --- group_vars/ and host_vars/ ----------------------------------------------------------

_VAR_SUFFIXES = ("", ".yml", ".yaml", ".json")  # what Ansible's host_group_vars plugin reads


@dataclass
class _VarDirs:
    """Variables from ``group_vars/`` and ``host_vars/`` beside an inventory file."""

    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # host -> the file that set its connection


#: the most values one YAML file may hold once its aliases are expanded (each use of an alias
#: counts its whole value again): an inventory is thousands; a "billion laughs" of nested
#: aliases is tiny to load and takes gigabytes the moment anything walks or prints it
YAML_MAX_VALUES = 1_000_000


def load_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load`` of ``text``, held to :data:`YAML_MAX_VALUES` with aliases expanded and
    to the parser's nesting; BadInput (one line) otherwise. Raises yaml.YAMLError for bad YAML."""
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise BadInput(f"{where}: nested too deeply") from None
    count, stack = 0, [data]
    while stack:  # iterative: a self-referencing alias (&a [*a]) is counted, never recursed into
        value = stack.pop()
        count += 1
        if count > YAML_MAX_VALUES:
            raise BadInput(f"{where}: more than {YAML_MAX_VALUES:,} values once its aliases are expanded")
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return data


def _var_file(path: Path) -> dict[str, Any]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path))  # JSON is YAML too
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise BadInput(f"{path}{line}: {getattr(exc, 'problem', None) or 'not valid YAML'}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a variables file is a mapping of name: value")
    return _normalise({str(k): v for k, v in data.items()})


def _read_var_dir(directory: Path) -> dict[str, dict[str, Any]]:
    """NAME -> variables, from ``NAME``, ``NAME.yml|.yaml|.json`` and directories ``NAME/``."""
    out: dict[str, dict[str, Any]] = {}
    if not directory.is_dir():
        return out
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            name, files = entry.name, sorted(f for f in entry.rglob("*") if f.is_file())
            files = [f for f in files if f.suffix in _VAR_SUFFIXES and not f.name.startswith(".")]
        elif entry.suffix in _VAR_SUFFIXES:
            name, files = (entry.stem if entry.suffix else entry.name), [entry]
        else:
            continue  # Ansible skips other extensions (editor backups, .md notes)
        for file in files:
            out.setdefault(name, {}).update(_var_file(file))
    return out


def _var_dirs(inventory_path: Path) -> _VarDirs:
    base = inventory_path.parent
    dirs = _VarDirs(groups=_read_var_dir(base / "group_vars"), hosts=_read_var_dir(base / "host_vars"))
    for host in dirs.hosts:
        dirs.where[host] = str(base / "host_vars" / host)
    return dirs


# --- group tree ------------------------------------------------------------------------


@dataclass
class _Tree:
    """What an inventory file says, before variables are merged."""

    host_order: dict[str, str] = field(default_factory=dict)  # name -> where it was first seen
    host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    group_hosts: dict[str, list[str]] = field(default_factory=dict)
    group_children: dict[str, list[str]] = field(default_factory=dict)
    group_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: group -> its hosts as a set: asking the list was quadratic (100,000 names: minutes)
    _in_group: dict[str, set[str]] = field(default_factory=dict)

    def group(self, name: str, where: str) -> None:
        if not _GROUP.match(name):
            raise BadInput(f"{where}: bad group name {name!r}")
        self.group_hosts.setdefault(name, [])
        self.group_children.setdefault(name, [])

    def add_host(self, group: str, name: str, variables: Mapping[str, Any], where: str) -> None:
        _check_name(name, where)
        self.host_order.setdefault(name, where)
        self.host_vars.setdefault(name, {}).update(_normalise(variables))
        known = self._in_group.setdefault(group, set())
        if name not in known:
            known.add(name)
            self.group_hosts[group].append(name)

    def members(self, group: str, seen: frozenset[str] = frozenset()) -> Iterator[str]:
        if group in seen:
            raise BadInput(f"group {group!r} is its own child (a loop in the children groups)")
        yield from self.group_hosts.get(group, [])
        for child in self.group_children.get(group, []):
            yield from self.members(child, seen | {group})

    def depth(self, group: str) -> int:
        parents = [g for g, kids in self.group_children.items() if group in kids and g != "all"]
        return 1 + max((self.depth(p) for p in parents), default=0) if group != "all" else 0

    def build(self, source: str, dirs: _VarDirs | None = None) -> Inventory:
        try:
            groups = {g: list(dict.fromkeys(self.members(g))) for g in self.group_hosts}
        except BadInput as exc:
            raise BadInput(f"{source}: {exc}") from None
        groups["all"] = list(self.host_order)
        grouped = {h for g, hosts in groups.items() if g != "all" for h in hosts}
        groups.setdefault("ungrouped", [h for h in self.host_order if h not in grouped])
        # Ansible's precedence, simplified: all, then shallow groups before deep ones, then the host
        ordered_groups = sorted((g for g in groups if g != "all"), key=lambda g: (self.depth(g), g))
        inventory = Inventory(source=source, groups=groups)
        dirs = dirs or _VarDirs()
        of_host: dict[str, list[str]] = {}  # host -> its groups, shallow first (one pass, not hosts x groups)
        for g in ordered_groups:
            for h in groups[g]:
                of_host.setdefault(h, []).append(g)
        for name, where in self.host_order.items():
            mine = of_host.get(name, [])
            merged: dict[str, Any] = dict(self.group_vars.get("all", {}))
            for g in mine:
                merged.update(self.group_vars.get(g, {}))
            merged.update(dirs.groups.get("all", {}))
            for g in mine:
                merged.update(dirs.groups.get(g, {}))
            merged.update(self.host_vars.get(name, {}))
            merged.update(dirs.hosts.get(name, {}))
            inventory.hosts[name] = _target(name, merged, dirs.where.get(name, where))
        return inventory


# --- INI -------------------------------------------------------------------------------


def _ini_value(text: str) -> Any:
    return int(text) if text.isdigit() else text


def _ini_assignments(tokens: Iterable[str], where: str) -> dict[str, Any]:
    variables: dict[str, Any] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise BadInput(f"{where}: expected key=value, got {token!r}")
        variables[key] = _ini_value(value)
    return variables


def parse_ini(text: str, source: str, dirs: _VarDirs | None = None, budget: NameBudget | None = None) -> Inventory:
    """An Ansible INI inventory: ``[group]``, ``[group:children]``, ``[group:vars]``."""
    tree = _Tree()
    tree.group("ungrouped", source)
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        where = f"{source} line {number}"
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        header = re.fullmatch(r"\[([^\]:]+)(?::(children|vars))?\]", line)
        if header:
            section, kind = header.group(1).strip(), header.group(2) or "hosts"
            tree.group(section, where)
            continue
        if line.startswith("["):
            raise BadInput(f"{where}: bad section header {line!r}")
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError as exc:
            raise BadInput(f"{where}: {exc}") from None
        if not tokens:
            continue
        if kind == "vars":
            tree.group_vars.setdefault(section, {}).update(_normalise(_ini_assignments(tokens, where)))
        elif kind == "children":
            tree.group(tokens[0], where)
            if tokens[0] not in tree.group_children[section]:
                tree.group_children[section].append(tokens[0])
        else:
            pattern, port = tokens[0], None
            # "host:2222" is Ansible's INI shorthand for ansible_port (not for IPv6 literals)
            host_port = re.fullmatch(r"([^:\[\]]+|[^:]*\[[^\]]*\][^:]*):([0-9]+)", pattern)
            if host_port:
                pattern, port = host_port.group(1), int(host_port.group(2))
            # names are checked before the variables, so the message names the bad host
            names = [_check_name(name, where) for name in expand_ansible_range(pattern, where, budget)]
            variables = _ini_assignments(tokens[1:], where)
            if port is not None:
                variables.setdefault("ansible_port", port)
            for name in names:
                tree.add_host(section, name, variables, where)
    return tree.build(source, dirs)


# --- YAML ------------------------------------------------------------------------------


def _yaml_group(tree: _Tree, name: str, body: Any, where: str, budget: NameBudget | None) -> None:
    tree.group(str(name), where)
    if body is None:
        return
    if not isinstance(body, dict):
        raise BadInput(f"{where}: group {name!r} must be a mapping (hosts, children, vars)")
    unknown = set(body) - {"hosts", "children", "vars"}
    if unknown:
        raise BadInput(f"{where}: group {name!r} has unknown key {sorted(unknown)[0]!r} (hosts, children, vars)")
    hosts = body.get("hosts") or {}
    if not isinstance(hosts, dict):
        raise BadInput(f"{where}: hosts of group {name!r} must be a mapping of host -> variables")
    for pattern, variables in hosts.items():
        if variables is not None and not isinstance(variables, dict):
            raise BadInput(f"{where}: variables of host {pattern!r} must be a mapping")
        for host in expand_ansible_range(str(pattern), f"{where} group {name}", budget):
            tree.add_host(str(name), host, variables or {}, f"{where} group {name}")
    group_vars = body.get("vars") or {}
    if not isinstance(group_vars, dict):
        raise BadInput(f"{where}: vars of group {name!r} must be a mapping")
    tree.group_vars.setdefault(str(name), {}).update(_normalise(group_vars))
    children = body.get("children") or {}
    if not isinstance(children, dict):
        raise BadInput(f"{where}: children of group {name!r} must be a mapping of group -> body")
    for child, child_body in children.items():
        if str(child) not in tree.group_children[str(name)]:
            tree.group_children[str(name)].append(str(child))
        _yaml_group(tree, child, child_body, where, budget)


def parse_yaml(text: str, source: str, dirs: _VarDirs | None = None, budget: NameBudget | None = None) -> Inventory:
    """An Ansible YAML inventory: ``all: {hosts, children, vars}`` (other top groups too)."""
    try:
        data = load_yaml(text, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise BadInput(f"{source}{line}: {problem}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{source}: a YAML inventory is a mapping of groups (all: hosts/children/vars)")
    tree = _Tree()
    for name, body in data.items():
        _yaml_group(tree, name, body, source, budget)
    return tree.build(source, dirs)


# --- plain list ------------------------------------------------------------------------


def parse_plain(text: str, source: str, budget: NameBudget | None = None) -> Inventory:
    """One host (or node set) per line; ``#`` starts a comment."""
    tree = _Tree()
    tree.group("ungrouped", source)
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source} line {number}"
        try:
            names = expand_nodeset(line, budget)
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        for name in names:
            tree.add_host("ungrouped", name, {}, where)
    return tree.build(source)


def sniff_format(path: Path, text: str) -> InventoryFormat:
    suffix = path.suffix.lower()
    if suffix in (".yml", ".yaml"):
        return "yaml"
    if suffix in (".ini", ".cfg"):
        return "ini"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", ";"))]
    if any(re.fullmatch(r"\[[^\]]+\]", ln) or re.search(r"\s\w+=", ln) for ln in lines):
        return "ini"
    if any(re.match(r"^[\w.-]+:\s*$", ln) or ln.startswith(("all:", "---")) for ln in lines):
        return "yaml"
    return "plain"


def parse_inventory(
    text: str, source: str, fmt: InventoryFormat, dirs: _VarDirs | None = None, budget: NameBudget | None = None
) -> Inventory:
    budget = budget if budget is not None else NameBudget()
    if fmt == "ini":
        return parse_ini(text, source, dirs, budget)
    if fmt == "yaml":
        return parse_yaml(text, source, dirs, budget)
    return parse_plain(text, source, budget)


def load_inventory(
    path: Path | str, *, fmt: InventoryFormat | None = None, budget: NameBudget | None = None
) -> Inventory:
    """Read an inventory file (format from the suffix, else sniffed from the content)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"inventory file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"inventory file {path}: {exc}") from None
    fmt = fmt or sniff_format(path, text)
    # group_vars/ and host_vars/ belong to Ansible inventories; a plain list has no groups
    dirs = _var_dirs(path) if fmt in ("ini", "yaml") else None
    return parse_inventory(text, str(path), fmt, dirs, budget)


# --- host spec -------------------------------------------------------------------------


def _file_ref(item: str, base_dir: Path | None) -> tuple[Path, str | None]:
    """``@FILE`` or ``@FILE:GROUP`` -> (path, group)."""
    ref = item[1:]
    if not ref:
        raise BadInput("--hosts: '@' must be followed by an inventory file")
    base = base_dir or Path.cwd()
    path = Path(ref).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.exists() and ":" in ref:
        file_part, _, group = ref.rpartition(":")
        group_path = Path(file_part).expanduser()
        return (group_path if group_path.is_absolute() else base / group_path), group
    return path, None


def parse_host_spec(
    spec: str,
    *,
    base_dir: Path | str | None = None,
    inventory: Inventory | None = None,
    budget: NameBudget | None = None,
) -> list[HostTarget]:
    """The nodes a host SPEC names, in order, each once.

    ``spec`` is a comma list of node sets and ``@FILE`` / ``@FILE:GROUP``
    references (relative to ``base_dir``, default the working directory). With an
    ``inventory`` (``--inventory FILE``), a name that is one of its groups stands
    for the group's hosts, and a name that is one of its hosts takes its address,
    port and user. Raises :class:`BadInput` naming the bad value and its origin.
    """
    if not spec or not spec.strip():
        raise BadInput("--hosts: no hosts given")
    base = Path(base_dir) if base_dir is not None else None
    out: dict[str, HostTarget] = {}
    # one cap over every set and file the spec names; ``budget``: the one ``inventory`` was
    # loaded with (its names already counted), so --inventory and --hosts share the cap
    counted_inventory = budget is not None
    budget = budget if budget is not None else NameBudget()
    for raw in split_nodeset(spec):
        item = raw.strip()
        if not item:
            raise BadInput(f"--hosts {spec!r}: empty name between commas")
        if item.startswith("@"):
            path, group = _file_ref(item, base)
            targets = load_inventory(path, budget=budget).targets(group)
        elif item.startswith("[") and ":" in item:  # an IPv6 literal, not a node set
            targets = [HostTarget(name=_check_name(item, "--hosts"))]
        else:
            targets = []
            for name in expand_nodeset(item, budget):
                if inventory is not None and name in inventory.groups:
                    targets.extend(inventory.targets(name))
                    if not counted_inventory:
                        budget.take(len(inventory.groups[name]), f"--hosts: group {name!r}")
                elif inventory is not None and name in inventory.hosts:
                    targets.append(inventory.hosts[name])
                else:
                    targets.append(HostTarget(name=_check_name(name, "--hosts")))
        for target in targets:
            out.setdefault(target.name, target)
    return list(out.values())
