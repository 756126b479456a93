"""Mask secrets in captured output before anything is kept or shown.

Command output lands in the change log, in exports and on a reviewer's screen, so
tokens, passwords and keys are replaced by ``[REDACTED]`` first. Only the secret
itself is masked: the key, the header name, the URL's user and host stay, so the
line still says what happened. Pure text in, text out; applying it twice changes
nothing more.

Every rule but the PEM block stays within one line, so :class:`StreamRedactor` can
mask live output line by line (holding back a key block until it ends) and give the
same text as :func:`redact` on the whole.

Deliberately left alone, because operators need them: driver versions, GPU UUIDs
and bus ids, boot ids, image digests and other hex checksums.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

REDACTED = "[REDACTED]"

# A PEM private key block, or its start when the output was cut short.
_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(.*?)(?:-----END \1-----|\Z)",
    re.DOTALL,
)

# Authorization / Proxy-Authorization headers: keep the scheme, mask the credentials.
_AUTH_HEADER = re.compile(
    r"""(?ix)
    (?P<head>\b(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?)
    (?P<scheme>(?:bearer|basic|digest|token|negotiate|bot|aws4-hmac-sha256)[ \t]+)?
    (?P<cred>[^\s"'][^"'\r\n]*)
    """
)

# "Bearer <token>" anywhere else (curl -H, logs); long enough not to eat a prose word.
_BEARER = re.compile(r"(?i)\b(bearer[ \t]+)([A-Za-z0-9._~+/-]{16,}=*)")

# scheme://user:password@host -> scheme://user:[REDACTED]@host
_URL_CREDS = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s:/@]*):([^\s/@]+)@")

# Tokens recognisable by their own shape, wherever they appear.
_TOKEN_SHAPES = re.compile(
    r"""(?x)
    (?=[Aghxensr])  # cheap first-letter filter: the alternatives below are tried only here
    (?:
      \b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b   # AWS access key id
    | \bgh[pousr]_[A-Za-z0-9]{36,255}\b                             # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{22,255}\b                           # GitHub fine-grained token
    | \bhf_[A-Za-z0-9]{30,}\b                                       # Hugging Face token
    | \bxox[abposr]-[A-Za-z0-9-]{10,}                               # Slack token
    | https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+            # Slack webhook
    | \beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}  # JWT
    | \bnvapi-[A-Za-z0-9_-]{20,}                                    # NVIDIA NGC API key
    | \bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}                        # OpenAI / Anthropic style keys
    | \bAIza[0-9A-Za-z_-]{35}\b                                     # Google API key
    | \bglpat-[A-Za-z0-9_-]{20,}                                   # GitLab personal access token
    | \bnpm_[A-Za-z0-9]{36}\b                                      # npm access token
    | \b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}                        # Stripe secret / restricted key
    | \bxapp-[0-9]-[A-Za-z0-9-]{10,}                                # Slack app-level token
    )
    """
)

# Names whose value is a secret. The name must END with one of these words, so
# ``max_num_batched_tokens``, ``tokenizer`` or ``secretName`` are left alone.
_SECRET_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "privatekey",
    "private_key",
    "private-key",
    # (issue 28) env and config names the words above missed: DB_PASS, MYSQL_PWD, a
    # kubeconfig's client-key-data, an Azure connection string's AccountKey, AWS_SECRET_KEY
    "_pass",
    "_pwd",
    "key-data",
    "key_data",
    "accountkey",
    "sharedaccesskey",
    "secretkey",
    "secret_key",
    "secret-key",
    "credentials",
    "credential",
)
_SECRET_WORD = "(?:" + "|".join(_SECRET_WORDS) + ")"
# The name is taken whole (possessive: no backtracking inside long words, which keeps
# megabytes of output fast), then its end is checked against the words above.
_ENDS_WITH_SECRET_WORD = "(?:" + "|".join(f"(?<={w})" for w in _SECRET_WORDS) + ")"

# key=value, key: value, "key": "value", 'key': 'value', KEY = "value"
_ASSIGNMENT = re.compile(
    rf"""(?ix)
    (?P<key>(?<![\w.-])(?P<q>["']?)[\w.-]++{_ENDS_WITH_SECRET_WORD}(?P=q))
    (?P<sep>[ \t]*[:=][ \t]*)
    (?:
        "(?P<dq>(?:[^"\\\r\n]|\\.)*)"
      | '(?P<sq>[^'\r\n]*)'
      | (?P<masked>\[REDACTED\])
      | (?P<bare>[^\s,;'"}}\])]+)
    )
    """
)

# Cookie / Set-Cookie headers: the whole value is the session
_COOKIE = re.compile(r"(?im)^([ \t>*<-]*(?:set-)?cookie[ \t]*:[ \t]*)(?!\[REDACTED\])(\S[^\r\n]*)")

# Short flags whose next word is a password, by the tool that reads them (each its manual's
# flag): mysql -pPASS (attached; a bare -p prompts), sshpass -p, ipmitool -P, redis-cli -a,
# docker/podman/helm login -p, ldapsearch -w, curl/wget -u USER:PASS, smbclient -U USER%PASS.
# The text between the tool and its flag is bounded (120 characters): linear on long lines.
_TOOL_FLAG = re.compile(
    r"""(?x)
    (?P<pre>(?<![\w./-])(?:
        (?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n|;&]{0,120}?[ \t]-p(?=[^\s-])
      | sshpass\b[^\n|;&]{0,120}?[ \t]-p[ \t]*
      | ipmitool\b[^\n|;&]{0,120}?[ \t]-P[ \t]*
      | redis-cli\b[^\n|;&]{0,120}?[ \t]-a[ \t]+
      | (?:docker|podman|nerdctl|helm|buildah|skopeo|oras)\b[^\n|;&]{0,120}?\blogin\b[^\n|;&]{0,120}?[ \t]-p[ \t]+
      | ldap(?:search|modify|add|delete|passwd|whoami|compare)\b[^\n|;&]{0,120}?[ \t]-w[ \t]+
      | (?:curl|wget)\b[^\n|;&]{0,120}?[ \t](?:-u|--user|--proxy-user|-U)(?:[ \t]+|=)?[^\s:'"]*:
      | smbclient\b[^\n|;&]{0,120}?[ \t]-U[ \t]*[^\s%'"]*%
    ))
    (?P<value>[^\s'"]+)
    """
)

# .netrc: "machine HOST login USER password PASS"
_NETRC = re.compile(r"(?i)(\b(?:machine|default)\b[^\n]{0,120}?\bpassword[ \t]+)(?!\[REDACTED\])(\S+)")

# --password VALUE / --api-key=VALUE on a command line
_FLAG = re.compile(rf"(?i)(?<![\w-])(--?[\w-]*{_SECRET_WORD})(=|[ \t]+)(?!-)([^\s'\"]+)")

# Values that are not secrets, kept so "hf_token=None" still reads as "no token given".
_NOT_SECRET = frozenset({"", "none", "null", "nil", "true", "false", "***", REDACTED.lower(), "<redacted>"})


def _pem(match: re.Match[str]) -> str:
    label = match.group(1)
    sep = "\n" if "\n" in match.group(2) else ""
    return f"-----BEGIN {label}-----{sep}{REDACTED}{sep}-----END {label}-----"


def _auth_header(match: re.Match[str]) -> str:
    if match.group("cred").strip() == REDACTED:
        return match.group(0)
    return f"{match.group('head')}{match.group('scheme') or ''}{REDACTED}"


def _assignment(match: re.Match[str]) -> str:
    if match.group("masked"):
        return match.group(0)
    # exactly one of the three value alternatives matched; keep its quoting
    group, quote = next((g, q) for g, q in (("dq", '"'), ("sq", "'"), ("bare", "")) if match.group(g) is not None)
    value = match.group(group)
    # Slurm prints an unset key as "(null)" (scontrol show config: JobCredentialPrivateKey)
    if value.strip().lower().strip("()") in _NOT_SECRET or REDACTED in value:
        return match.group(0)
    return f"{match.group('key')}{match.group('sep')}{quote}{REDACTED}{quote}"


def _tool_flag(match: re.Match[str]) -> str:
    if match.group("value") == REDACTED:
        return match.group(0)
    return f"{match.group('pre')}{REDACTED}"


def _flag(match: re.Match[str]) -> str:
    if match.group(3).lower() in _NOT_SECRET:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_PEM, _pem),
    (_AUTH_HEADER, _auth_header),
    (_BEARER, rf"\1{REDACTED}"),
    (_URL_CREDS, rf"\1\2:{REDACTED}@"),
    (_TOKEN_SHAPES, REDACTED),
    (_ASSIGNMENT, _assignment),
    (_FLAG, _flag),
    (_COOKIE, rf"\1{REDACTED}"),
    (_TOOL_FLAG, _tool_flag),
    (_NETRC, rf"\1{REDACTED}"),
)


#: what a known secret value (a runbook's secret parameter) is shown as
SHOWN_SECRET = "***"


def redact(text: str, known: Collection[str] = ()) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]``, and each of the
    ``known`` secret values (a runbook's secret parameters) by ``***``."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    for value in sorted(known, key=len, reverse=True):
        text = text.replace(value, SHOWN_SECRET)
    return text


class StreamRedactor:
    """Masks a stream as it arrives: complete lines are released, redacted.

    A partial last line is held until its newline (or :meth:`flush`), and an open
    private key block is held until its END line, so no secret is shown in pieces.
    A line longer than ``max_hold`` characters is released anyway (redacted).
    """

    _BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")

    def __init__(self, max_hold: int = 1 << 20, known: Collection[str] = ()) -> None:
        self._held = ""
        self._max_hold = max_hold
        self._known = tuple(known)

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return the redacted text that can be shown now (maybe empty)."""
        self._held += chunk
        cut = self._held.rfind("\n") + 1
        if cut == 0 and len(self._held) < self._max_hold:
            return ""
        if cut == 0:
            cut = len(self._held)
        ready = self._held[:cut]
        begins = list(self._BEGIN.finditer(ready))
        last_begin = begins[-1] if begins else None
        if (
            last_begin is not None
            and "-----END" not in ready[last_begin.end() :]
            and len(self._held) - last_begin.start() < self._max_hold
        ):
            cut = last_begin.start()  # hold the open key block back until its END line
            ready = self._held[:cut]
        self._held = self._held[cut:]
        return redact(ready, self._known)

    def flush(self) -> str:
        """The rest, redacted (a key block cut short is masked to its end)."""
        rest, self._held = self._held, ""
        return redact(rest, self._known)


class RedactingOutput:
    """Wraps an output callback so it only ever sees redacted, whole lines."""

    def __init__(self, callback: Callable[[str, str], None] | None, known: Collection[str] = ()) -> None:
        self.callback = callback
        self.streams = {"stdout": StreamRedactor(known=known), "stderr": StreamRedactor(known=known)}

    def __call__(self, stream: str, text: str) -> None:
        if self.callback is None:
            return
        shown = self.streams[stream].feed(text)
        if shown:
            self.callback(stream, shown)

    def flush(self) -> None:
        if self.callback is None:
            return
        for stream, redactor in self.streams.items():
            rest = redactor.flush()
            if rest:
                self.callback(stream, rest)
