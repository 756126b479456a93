"""Command templates and the values that fill them, validated at input.

A runbook command is a template: ``{name}`` is a placeholder, ``{{`` and ``}}`` are
literal braces (the ``str.format`` convention). Filling shell-quotes every value,
so a value always stays one shell word. Values are also checked where they enter
(``--param k=v``, host names from the command line or an inventory), so a value
that could never be legitimate is refused with a clear message instead of being
quoted into a command that then fails in a confusing way.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cockpit.errors import BadInput

if TYPE_CHECKING:
    from cockpit.runbook.model import Parameter, Runbook

#: ``{{``, ``}}``, a placeholder, or a lone brace (an error).
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")

ParamValue = str | int | float | bool

#: One RFC 1123 label: letters, digits and inner hyphens, 1 to 63 characters.
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
#: A host name the transport accepts: RFC 1123 labels joined by dots, or an IP literal.
SAFE_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)

#: Bounds on a parameter's value: counts and seconds far past any window, and a text
#: longer than any package name, image reference or path a command needs.
MAX_INT_PARAM = 1_000_000_000
MAX_TEXT_PARAM = 4096

#: An IPv6 zone (scope id): an interface name (Linux allows at most 15 characters) or index.
_ZONE = re.compile(r"[0-9A-Za-z._-]{1,15}")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def template_problems(template: str) -> list[str]:
    """What is wrong with the braces of ``template`` (empty when it is well formed)."""
    problems = []
    for match in _TOKEN.finditer(template):
        if match.group(0) in "{}":
            problems.append(
                f"lone {match.group(0)!r} at column {match.start() + 1}: a placeholder is {{name}} "
                "(letters, digits, '_'); write {{ or }} for a literal brace"
            )
    return problems


def quoting_problems(template: str) -> list[str]:
    """Placeholders the template puts inside quotes it wrote itself, and unclosed quotes.

    Filling quotes a value for the shell level it stands at; inside ``'...'`` or
    ``"..."`` that quoting is itself quoted, so a value's own quotes would end the
    span (``sh -c 'echo {node}'`` with a node named ``x';reboot;'``). A placeholder
    must stand as its own shell word; pass data to inner code as an argument.
    """
    problems: list[str] = []
    quote: str | None = None
    opened_at = 0
    heredocs: list[tuple[str, bool, int]] = []  # (delimiter, <<- strips tabs, column) awaiting their bodies
    i = 0
    while i < len(template):
        if quote is None and template.startswith("<<", i) and not template.startswith("<<<", i):
            heredoc = _HEREDOC.match(template, i)
            if heredoc is not None:
                delimiter = re.sub(r"[\\'\"]", "", heredoc.group(2))
                heredocs.append((delimiter, bool(heredoc.group(1)), i))
                i = heredoc.end()
                continue
        if quote is None and template[i] == "\n" and heredocs:
            i = _heredoc_bodies(template, i + 1, heredocs, problems)
            heredocs = []
            continue
        token = _TOKEN.match(template, i)
        if token is not None:
            if token.group(1) and quote is not None:
                problems.append(
                    f"placeholder {token.group(0)} at column {i + 1} is inside a {_QUOTE_NAMES[quote]}-quoted span "
                    f"opened at column {opened_at + 1}: filling quotes it for the shell, so it must stand outside "
                    "quotes (pass it to inner code as an argument, e.g. sys.argv)"
                )
            i = token.end()
            continue
        ch = template[i]
        if quote == "'":
            quote = None if ch == "'" else quote
        elif ch == "\\":
            i += 1  # an escaped character, outside quotes or in double quotes
        elif quote == '"':
            quote = None if ch == '"' else quote
        elif ch in "'\"":
            quote, opened_at = ch, i
        i += 1
    if quote is not None:
        problems.append(f"the {_QUOTE_NAMES[quote]} quote opened at column {opened_at + 1} is never closed")
    return problems


_QUOTE_NAMES = {"'": "single", '"': "double"}

#: ``<<WORD`` / ``<<-WORD`` (the word possibly quoted): a here-document, its body on the next lines
_HEREDOC = re.compile(r"<<(-?)[ \t]*((?:[^\s;&|<>()'\"]|'[^']*'|\"[^\"]*\")+)")


def _heredoc_bodies(template: str, start: int, heredocs: list[tuple[str, bool, int]], problems: list[str]) -> int:
    """Skip the bodies of ``heredocs`` (in order) from ``start``; a placeholder in one is a
    problem: a body is not a shell word, filling's quotes do not hold there (``$(...)`` in a
    value runs in an unquoted body). Returns where the command goes on."""
    pos = start
    for delimiter, strip_tabs, column in heredocs:
        while pos < len(template):
            end = template.find("\n", pos)
            end = len(template) if end < 0 else end
            line = template[pos:end]
            pos = end + 1
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                break
            for token in _TOKEN.finditer(line):
                if token.group(1):
                    problems.append(
                        f"placeholder {token.group(0)} is inside the here-document opened at column {column + 1} "
                        f"(<<{delimiter}): filling quotes it for the shell, not for a here-document's body "
                        f"(pass it as an argument, or write the file with printf '%s\\n' {token.group(0)})"
                    )
    return min(pos, len(template))


def placeholder_names(template: str) -> list[str]:
    """The placeholder names of ``template`` in order of first use, without repeats."""
    names: list[str] = []
    for match in _TOKEN.finditer(template):
        name = match.group(1)
        if name and name not in names:
            names.append(name)
    return names


def _render(value: ParamValue) -> str:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    return str(value)


def fill(template: str, values: Mapping[str, ParamValue]) -> str:
    """``template`` with every placeholder replaced by its value, shell-quoted.

    Raises :class:`BadInput` for a placeholder with no value or a lone brace.
    """
    out: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(template):
        out.append(template[pos : match.start()])
        token, name = match.group(0), match.group(1)
        if name is not None:
            if name not in values or values[name] is None:
                raise BadInput(f"no value for placeholder {{{name}}} in command: {template}")
            out.append(shlex.quote(_render(values[name])))
        elif token in ("{{", "}}"):
            out.append(token[0])
        else:
            raise BadInput(f"command template: {template_problems(template)[0]}: {template}")
        pos = match.end()
    out.append(template[pos:])
    return "".join(out)


def control_character(raw: str) -> str | None:
    """The first control character in ``raw`` (newline, NUL, escape, ...), named, or None."""
    for ch in raw:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            return f"U+{ord(ch):04X}"
    return None


def validate_param_value(name: str, param: Parameter, raw: str) -> ParamValue:
    """Turn the text ``raw`` given for parameter ``name`` into a typed value, or raise BadInput."""
    from cockpit.runbook.model import (
        ParamType,  # the model imports nothing from here; keep it that way
    )

    bad = control_character(raw)
    if bad is not None:
        raise BadInput(f"parameter {name}: control character {bad} not allowed in a value")
    kind = param.type
    if kind is ParamType.INT:
        if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
            raise BadInput(f"parameter {name}: expected an integer, got {raw!r}")
        number = int(raw)
        if abs(number) > MAX_INT_PARAM:
            raise BadInput(f"parameter {name}: {raw.strip()[:24]} is out of range (at most {MAX_INT_PARAM:,})")
        return number
    if kind is ParamType.FLOAT:
        try:
            value = float(raw)
        except ValueError:
            raise BadInput(f"parameter {name}: expected a number, got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")) or abs(value) > MAX_INT_PARAM:
            raise BadInput(f"parameter {name}: expected a finite number, got {raw!r}")
        return value
    if kind is ParamType.BOOL:
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise BadInput(f"parameter {name}: expected true or false, got {raw!r}")
    if kind is ParamType.CHOICE:
        choices = param.choices or []
        if raw not in choices:
            raise BadInput(f"parameter {name}: expected one of {', '.join(choices)}, got {raw!r}")
        return raw
    if raw.startswith("-"):
        # quoted, it stays one word, but a program would still read it as an option
        raise BadInput(f"parameter {name}: a value must not start with '-', got {raw!r}")
    if len(raw) > MAX_TEXT_PARAM:
        raise BadInput(f"parameter {name}: longer than {MAX_TEXT_PARAM} characters")
    return raw


#: where a secret parameter's value comes from: ``COCKPIT_SECRET_`` and its name in capitals
SECRET_ENV_PREFIX = "COCKPIT_SECRET_"
#: what is written and shown in a secret's place
SECRET_SHOWN = "***"
#: a secret is masked wherever its text appears: one this short would mask ordinary words
SECRET_MIN_CHARS = 6


def secret_env_name(name: str) -> str:
    return SECRET_ENV_PREFIX + name.upper()


def secret_values(runbook: Runbook, env: Mapping[str, str]) -> dict[str, ParamValue]:
    """The runbook's secret parameters, from ``env`` (``COCKPIT_SECRET_<NAME>``), typed and
    checked; a required one that is missing is BadInput naming the variable, never the value."""
    values: dict[str, ParamValue] = {}
    for name, param in runbook.parameters.items():
        if not param.secret:
            continue
        text = env.get(secret_env_name(name))
        if text is None:
            if param.required:
                raise BadInput(
                    f"parameter {name} is secret and required: set {secret_env_name(name)} in the environment"
                )
            continue
        if len(text) < SECRET_MIN_CHARS:
            raise BadInput(f"{secret_env_name(name)}: a secret of fewer than {SECRET_MIN_CHARS} characters")
        try:
            values[name] = validate_param_value(name, param, text)
        except BadInput:  # its words may quote the value: said without them
            raise BadInput(f"{secret_env_name(name)}: not a valid value for parameter {name}") from None
    return values


def shown_parameters(runbook: Runbook, values: Mapping[str, object]) -> dict[str, object]:
    """``values`` as the change log and every screen may hold them: each secret as ``***``."""
    return {
        k: SECRET_SHOWN if k in runbook.parameters and runbook.parameters[k].secret else v for k, v in values.items()
    }


def resolve_parameters(
    runbook: Runbook, raw: Mapping[str, str], env: Mapping[str, str] | None = None
) -> dict[str, ParamValue]:
    """The runbook's defaults overlaid with ``raw`` (``--param k=v`` texts), all typed and
    checked, and the secret parameters from ``env`` (:func:`secret_values`)."""
    unknown = sorted(set(raw) - set(runbook.parameters))
    if unknown:
        known = ", ".join(sorted(runbook.parameters)) or "none"
        raise BadInput(f"unknown parameter {unknown[0]} (this runbook has: {known})")
    given_secret = sorted(n for n in raw if runbook.parameters[n].secret)
    if given_secret:
        name = given_secret[0]
        raise BadInput(
            f"--param {name}: parameter {name} is secret: give it as {secret_env_name(name)} in the environment, "
            "never on the command line (ps and the shell's history show it)"
        )
    values: dict[str, ParamValue] = dict(runbook.defaults())
    for name, text in raw.items():
        values[name] = validate_param_value(name, runbook.parameters[name], text)
    values.update(secret_values(runbook, env if env is not None else {}))
    missing = [n for n, p in runbook.parameters.items() if p.required and n not in values]
    if missing:
        raise BadInput(f"parameter {missing[0]} is required: give it with --param {missing[0]}=VALUE")
    return values


def parse_param_assignment(text: str) -> tuple[str, str]:
    """Split a ``--param`` argument ``k=v`` (the value may contain '=')."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise BadInput(f"--param expects NAME=VALUE, got {text!r}")
    return name.strip(), value


def validate_host_name(name: str) -> str:
    """Return ``name`` if it is a safe host name or address, else raise BadInput.

    Accepted: RFC 1123 host names (labels of letters, digits and inner hyphens, at
    most 63 characters each, 253 in all), dotted IPv4 addresses, and IPv6 addresses
    in brackets (``[fe80::1]``).
    """
    if not name:
        raise BadInput("host name is empty")
    bad = control_character(name)
    if bad is not None:
        raise BadInput(f"host name {name!r}: control character {bad} not allowed")
    if name.startswith("-"):
        raise BadInput(f"host name {name!r}: must not start with '-' (it would read as an option)")
    if name.startswith("[") and name.endswith("]"):
        # ipaddress accepts any text after "%" as a scope id (fe80::1%x -oProxyCommand=...):
        # a zone is an interface name or number, nothing else
        address, _, zone = name[1:-1].partition("%")
        if "%" in name and not _ZONE.fullmatch(zone):
            raise BadInput(
                f"host name {name!r}: an IPv6 zone (after '%') is an interface name: letters, digits, '.', '_', '-'"
            )
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise BadInput(f"host name {name!r}: not a valid IPv6 address in brackets") from None
        return name
    if len(name) > 253:
        raise BadInput(f"host name {name[:20]!r}...: longer than 253 characters")
    labels = name.split(".")
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(name)
        except ValueError:
            raise BadInput(f"host name {name!r}: not a valid IPv4 address") from None
        return name
    for label in labels:
        if not _LABEL.match(label):
            if not label:
                reason = "has an empty label (two dots, or a leading or trailing dot)"
            elif len(label) > 63:
                reason = f"label {label[:20]!r}... is longer than 63 characters"
            else:
                reason = f"label {label!r} may hold only letters, digits and inner '-'"
            raise BadInput(f"host name {name!r}: {reason}")
    return name
