"""SSH signatures of change-log blocks, in OpenSSH's SSHSIG format (``ssh-keygen -Y sign``).

The format is OpenSSH's PROTOCOL.sshsig: the signer signs ::

    "SSHSIG" || string(namespace) || string(reserved="") || string(hash="sha512") || string(H(message))

and the signature blob is ::

    "SSHSIG" || uint32(1) || string(public key) || string(namespace) || string(reserved)
             || string(hash) || string(SSH signature of the above)

armored as ``-----BEGIN SSH SIGNATURE-----`` with base64 lines of 70 characters, as
``ssh-keygen`` writes it. An RSA key signs with ``rsa-sha2-512`` (PROTOCOL.sshsig: SHA-1
``ssh-rsa`` signatures are not accepted). Keys come from a private key file (asyncssh
reads it) or the ssh-agent; the agent is spoken to directly over its socket
(draft-miller-ssh-agent: REQUEST_IDENTITIES, SIGN_REQUEST), because an append is
synchronous, under the file lock, and asyncssh's agent client needs an event loop.
Verification uses libsodium's Ed25519 (PyNaCl; cryptography's without it) for Ed25519
keys, asyncssh's public-key classes for others.

An ``allowed_signers`` file is OpenSSH's (ssh-keygen(1), ALLOWED SIGNERS), as git uses it:
``principals [options] keytype base64-key [comment]``, principals comma-separated,
options such as ``namespaces="..."``; ``#`` comments and blank lines ignored.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import functools
import hashlib
import os
import re
import socket
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cockpit.changelog.identity import is_system, mixed_scripts, person_key, same_person, spelling_key
from cockpit.errors import BadInput, CockpitError, read_user_file

NAMESPACE = "cockpit-changelog"
MAGIC = b"SSHSIG"
_HASH = "sha512"
_ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END = "-----END SSH SIGNATURE-----"


class SigningError(CockpitError):
    """No key to sign with, or the agent refused: the event was not recorded."""


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _read_string(data: bytes, pos: int) -> tuple[bytes, int]:
    if pos + 4 > len(data):
        raise ValueError("truncated")
    (n,) = struct.unpack_from(">I", data, pos)
    end = pos + 4 + n
    if end > len(data):
        raise ValueError("truncated")
    return data[pos + 4 : end], end


def signed_data(message: bytes, namespace: str = NAMESPACE) -> bytes:
    """What the key actually signs for ``message`` (PROTOCOL.sshsig, "Signed Data")."""
    digest = hashlib.sha512(message).digest()
    return MAGIC + _string(namespace.encode()) + _string(b"") + _string(_HASH.encode()) + _string(digest)


def _blob(public_key: bytes, ssh_signature: bytes, namespace: str) -> bytes:
    return (
        MAGIC
        + struct.pack(">I", 1)
        + _string(public_key)
        + _string(namespace.encode())
        + _string(b"")
        + _string(_HASH.encode())
        + _string(ssh_signature)
    )


def armor(blob: bytes) -> str:
    """The blob as ``ssh-keygen -Y sign`` writes it to ``FILE.sig``."""
    text = base64.b64encode(blob).decode()
    lines = [text[i : i + 70] for i in range(0, len(text), 70)]
    return "\n".join([_ARMOR_BEGIN, *lines, _ARMOR_END]) + "\n"


@dataclass(frozen=True)
class ParsedSig:
    public_key: bytes  # the SSH wire form of the signer's public key
    namespace: str
    hash_alg: str
    ssh_signature: bytes


def parse_blob(blob: bytes) -> ParsedSig:
    """The parts of an SSHSIG blob, or :class:`ValueError` saying what is wrong."""
    if not blob.startswith(MAGIC):
        raise ValueError("not an SSHSIG signature")
    pos = len(MAGIC)
    if len(blob) < pos + 4 or struct.unpack_from(">I", blob, pos)[0] != 1:
        raise ValueError("unsupported SSHSIG version")
    pos += 4
    key, pos = _read_string(blob, pos)
    namespace, pos = _read_string(blob, pos)
    _reserved, pos = _read_string(blob, pos)
    hash_alg, pos = _read_string(blob, pos)
    sig, pos = _read_string(blob, pos)
    if pos != len(blob):
        raise ValueError("trailing bytes after the signature")
    return ParsedSig(key, namespace.decode(errors="replace"), hash_alg.decode(errors="replace"), sig)


def key_type(public_key: bytes) -> str:
    try:
        return _read_string(public_key, 0)[0].decode()
    except (ValueError, UnicodeDecodeError):
        return "?"


@functools.lru_cache(maxsize=256)  # pure; a log names the same few keys 100,000 times
def fingerprint(public_key: bytes) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(public_key).digest()).decode().rstrip("=")


# --------------------------------------------------------------------------- signing


@dataclass(frozen=True)
class Signer:
    """Signs block bytes as ``principal``: returns the SSHSIG blob."""

    principal: str
    public_key: bytes
    _sign: Callable[[bytes], bytes]  # signed data -> SSH signature (string alg || string sig)

    def sign(self, message: bytes) -> bytes:
        return _blob(self.public_key, self._sign(signed_data(message)), NAMESPACE)


def _sig_algorithm(public_key: bytes) -> bytes:
    kind = key_type(public_key).encode()
    return b"rsa-sha2-512" if kind == b"ssh-rsa" else kind


def key_file_too_open(path: str | os.PathLike[str]) -> str | None:
    """Why ssh would refuse the private key file ``path`` as too open, or None: as OpenSSH's
    ``sshkey_perm_ok`` (authfile.c), a file of this user's that group or others may read or
    write ("Permissions 0644 for 'KEY' are too open ... It is required that your private key
    files are NOT accessible by others"). A missing file is for the reader to say."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        return (
            f"permissions {info.st_mode & 0o777:04o} are too open: a private key must not be accessible by "
            f"others, as ssh requires (chmod 600 {os.fspath(path)})"
        )
    return None


def signer_from_key_file(path: str | os.PathLike[str], principal: str, passphrase: str | None = None) -> Signer:
    """A signer with the private key in ``path`` (OpenSSH or PEM; asyncssh reads it)."""
    import asyncssh  # heavy; only a signing process needs it

    refused = key_file_too_open(path)
    if refused:
        raise BadInput(f"--signing-key {path}: {refused}")
    try:
        key = asyncssh.read_private_key(os.fspath(path), passphrase)
    except FileNotFoundError:
        raise BadInput(f"--signing-key {path}: no such file") from None
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError, OSError) as exc:
        raise BadInput(f"--signing-key {path}: cannot read the private key: {exc}") from None
    public = key.public_data
    algorithm = _sig_algorithm(public)
    return Signer(principal, public, lambda data: key.sign(data, algorithm))


# ssh-agent protocol numbers (draft-miller-ssh-agent, section 6.1)
_REQUEST_IDENTITIES, _IDENTITIES_ANSWER, _SIGN_REQUEST, _SIGN_RESPONSE = 11, 12, 13, 14
_RSA_SHA2_512 = 4


def _agent_call(sock_path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(sock_path)
        sock.sendall(_string(request))
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                raise SigningError("the ssh-agent closed the connection")
            head += chunk
        (n,) = struct.unpack(">I", head)
        body = b""
        while len(body) < n:
            chunk = sock.recv(n - len(body))
            if not chunk:
                raise SigningError("the ssh-agent closed the connection")
            body += chunk
        return body


def agent_keys(sock_path: str) -> list[bytes]:
    """The public keys the agent at ``sock_path`` holds, in its order."""
    reply = _agent_call(sock_path, bytes([_REQUEST_IDENTITIES]))
    if not reply or reply[0] != _IDENTITIES_ANSWER:
        raise SigningError("the ssh-agent did not list its keys")
    (count,) = struct.unpack_from(">I", reply, 1)
    pos, keys = 5, []
    for _ in range(count):
        key, pos = _read_string(reply, pos)
        _comment, pos = _read_string(reply, pos)
        keys.append(key)
    return keys


def signer_from_agent(principal: str, sock_path: str | None = None, public_key: bytes | None = None) -> Signer:
    """A signer with a key the ssh-agent holds (the first, or the one matching ``public_key``)."""
    path = sock_path or os.environ.get("SSH_AUTH_SOCK")
    if not path:
        raise BadInput("no --signing-key given and no ssh-agent (SSH_AUTH_SOCK is not set)")
    try:
        keys = agent_keys(path)
    except OSError as exc:
        raise BadInput(f"cannot reach the ssh-agent at {path}: {exc.strerror or exc}") from None
    chosen = next((k for k in keys if public_key is None or k == public_key), None)
    if chosen is None:
        raise BadInput("the ssh-agent holds no key" if public_key is None else "the ssh-agent does not hold that key")
    flags = _RSA_SHA2_512 if key_type(chosen) == "ssh-rsa" else 0

    def sign(data: bytes) -> bytes:
        try:
            request = bytes([_SIGN_REQUEST]) + _string(chosen) + _string(data) + struct.pack(">I", flags)
            reply = _agent_call(path, request)
        except OSError as exc:
            raise SigningError(f"the ssh-agent could not sign: {exc.strerror or exc}") from None
        if not reply or reply[0] != _SIGN_RESPONSE:
            raise SigningError("the ssh-agent refused to sign (a confirm-only key declined?)")
        return _read_string(reply, 1)[0]

    return Signer(principal, chosen, sign)


# --------------------------------------------------------------------------- verifying


@dataclass(frozen=True)
class AllowedSigner:
    """One line of an allowed_signers file, as ``ssh-keygen -Y verify`` reads it (sshsig.c)."""

    principals: tuple[str, ...]  # patterns (``*``, ``?``, ``!`` negation), as OpenSSH matches them
    public_key: bytes
    namespaces: tuple[str, ...] | None  # patterns; None: any namespace
    cert_authority: bool = False  # the key signs certificates: a plain key's signature never matches it
    valid_after: datetime | None = None
    valid_before: datetime | None = None
    #: an option OpenSSH refuses (the line then matches nothing), else None
    bad_option: str | None = None

    def refusal(self, now: datetime) -> str | None:
        """Why this line does not admit a plain key's signature in our namespace at ``now``, or None."""
        if self.bad_option is not None:
            return f"its allowed_signers line has {self.bad_option}"
        if self.cert_authority:
            return "allowed_signers lists it as a certificate authority (cert-authority), not a signer"
        if self.namespaces is not None and _match_list(NAMESPACE, self.namespaces) != 1:
            return f"allowed_signers does not allow it namespace {NAMESPACE!r} (namespaces={','.join(self.namespaces)})"
        if self.valid_after is not None and self.valid_after > now:
            return f"key is not yet valid (valid-after {self.valid_after.isoformat()})"
        if self.valid_before is not None and self.valid_before < now:
            return f"key has expired (valid-before {self.valid_before.isoformat()})"
        return None

    def admits(self, principal: str) -> bool:
        """``principal`` matches this line's principals (OpenSSH's pattern list); a plain name
        is compared as people are (:func:`~cockpit.changelog.identity.same_person`)."""
        if not any(c in p for p in self.principals for c in "*?!"):
            return any(same_person(p, principal) for p in self.principals)
        return _match_list(principal, self.principals) == 1


def _match_list(value: str, patterns: tuple[str, ...]) -> int:
    """OpenSSH's match_pattern_list: 1 when a pattern matches, -1 when a negated one
    (``!pattern``) does (it wins), 0 when none."""
    got = 0
    for pattern in patterns:
        negated = pattern.startswith("!")
        if fnmatch.fnmatchcase(value, _glob(pattern[1:] if negated else pattern)):
            if negated:
                return -1
            got = 1
    return got


def _glob(pattern: str) -> str:
    """An OpenSSH pattern (only ``*`` and ``?`` are special) as an fnmatch one."""
    return "".join(c if c in "*?" else f"[{c}]" if c in "[]" else c for c in pattern)


_KEY_TYPES = ("ssh-", "ecdsa-", "sk-")
_TIME = re.compile(r"(\d{8})(\d{4}(\d{2})?)?(Z?)", re.IGNORECASE)


def _absolute_time(text: str) -> datetime | None:
    """OpenSSH's parse_absolute_time: YYYYMMDD[HHMM[SS]], local time unless it ends in Z."""
    match = _TIME.fullmatch(text)
    if match is None:
        return None
    digits = match.group(1) + (match.group(2) or "0000") + ("" if match.group(3) else "00")
    try:
        moment = datetime.strptime(digits, "%Y%m%d%H%M%S")  # noqa: DTZ007  # local time unless Z, made aware below
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if match.group(4) else moment.astimezone()


def _tokens(line: str) -> list[str]:
    """The line's fields, split at whitespace outside double quotes (quotes kept)."""
    out, cur, quoted = [], "", False
    for c in line:
        if c == '"':
            quoted = not quoted
        if c.isspace() and not quoted:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += c
    if cur:
        out.append(cur)
    return out


def _options(text: str) -> dict[str, object]:
    """The comma-separated options of a line (``name`` or ``name="value"``), as AllowedSigner fields."""
    fields: dict[str, object] = {}
    parts, cur, quoted = [], "", False
    for c in text:
        if c == '"':
            quoted = not quoted
        if c == "," and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    for part in parts:
        name, eq, value = part.partition("=")
        name, value = name.lower(), value.strip('"')
        if name == "cert-authority" and not eq:
            fields["cert_authority"] = True
        elif name == "namespaces" and eq:
            fields["namespaces"] = tuple(n.strip() for n in value.split(","))
        elif name in ("valid-after", "valid-before") and eq:
            moment = _absolute_time(value)
            if moment is None:
                fields["bad_option"] = f"an unreadable time {name}={value!r}"
            else:
                fields[name.replace("-", "_")] = moment
        else:
            fields["bad_option"] = f"an option OpenSSH does not know ({part!r})"
    return fields


def _principal_problem(principal: str, seen: dict[str, tuple[str, str, int]], number: int) -> str | None:
    """Why a principal of an allowed_signers line may pass for someone else, or None: its
    letters mix scripts (``аlice`` with a Cyrillic ``а``), or it reads as a name an earlier
    line spells otherwise (UTS #39 skeleton: ``a1ice``, ``аӏісе`` after ``alice``). ``seen``
    maps each person key met so far to (its spelling key, the principal, its line)."""
    name = principal.removeprefix("!")
    mixed = mixed_scripts(name)
    if mixed:
        return f"principal {principal!r} mixes {mixed} letters: a name like that can pass for someone else's"
    key, spelling = person_key(name), spelling_key(name)
    if not key or any(c in name for c in "*?"):
        return None  # a pattern matches names; it is not one
    earlier = seen.setdefault(key, (spelling, name, number))
    if earlier[0] != spelling:
        return (
            f"principal {principal!r} looks like {earlier[1]!r} on line {earlier[2]} but is spelled "
            "with other letters: a look-alike name can pass for another person"
        )
    return None


def parse_allowed_signers(text: str, where: str) -> list[AllowedSigner]:
    """The entries of an allowed_signers file; a line that is not one is :class:`BadInput`,
    and so is a principal that can pass for another (:func:`_principal_problem`)."""
    out = []
    seen: dict[str, tuple[str, str, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = _tokens(line)
        principals = tuple(p for p in fields[0].strip('"').split(",") if p)
        rest = fields[1:]
        options: dict[str, object] = {}
        if rest and not rest[0].startswith(_KEY_TYPES):
            options = _options(rest[0])
            rest = rest[1:]
        if len(rest) < 2 or not principals:
            raise BadInput(f"{where}:{number}: expected 'principals [options] keytype base64-key'")
        for principal in principals:
            problem = _principal_problem(principal, seen, number)
            if problem is not None:
                raise BadInput(f"{where}:{number}: {problem}")
        try:
            key = base64.b64decode(rest[1], validate=True)
        except binascii.Error:
            raise BadInput(f"{where}:{number}: the key is not base64") from None
        if key_type(key) != rest[0]:
            raise BadInput(f"{where}:{number}: the key is not a {rest[0]} key")
        out.append(AllowedSigner(principals, key, **{"namespaces": None, **options}))  # type: ignore[arg-type]
    return out


def read_allowed_signers(path: str | os.PathLike[str]) -> list[AllowedSigner]:
    data = read_user_file(Path(path), "an allowed_signers file", max_bytes=4 * 1024 * 1024, trust_root=True)
    try:
        return parse_allowed_signers(data.decode(), str(path))
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not text") from None


_KEY_CACHE: dict[bytes, object] = {}
_ED25519 = b"ssh-ed25519"


#: bytes of the scratch buffer an Ed25519 check hands libsodium: an SSHSIG's signed data is
#: about 100 bytes (the SHA-512 of the message, not the message)
_SCRATCH = 1024


class _Ed25519:
    """An ``ssh-ed25519`` key checking signatures itself (RFC 8032; OpenSSH's ssh-ed25519 is
    RFC 8709): with libsodium (PyNaCl) where installed, 1.7 times faster per signature than
    cryptography's, which is the fallback. Both refuse what OpenSSH refuses; libsodium is
    stricter still about non-canonical encodings, which neither OpenSSH nor cockpit writes.
    libsodium's ``crypto_sign_open`` is called through PyNaCl's cffi library with a scratch
    buffer made once (the ``nacl.bindings`` wrapper makes two buffers per call)."""

    def __init__(self, raw: bytes) -> None:
        if len(raw) != 32:
            raise ValueError("an Ed25519 public key is 32 bytes")
        try:
            # the cffi library under nacl.bindings, called directly (the binding's wrapper makes
            # two buffers per call); the binding itself serves a message past the scratch buffer
            from nacl._sodium import ffi, lib  # type: ignore[import-not-found]  # untyped
            from nacl.bindings import crypto_sign_open

            self._binding: Any = crypto_sign_open
            self._nacl: Any = lib.crypto_sign_open
            # scratch for the message libsodium copies out once the signature holds (never read)
            self._out: Any = ffi.new("unsigned char[]", _SCRATCH)
            self._out_len: Any = ffi.new("unsigned long long *")
            self._raw = raw
        except ImportError:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

            self._nacl = None
            self._key = Ed25519PublicKey.from_public_bytes(raw)

    def check(self, signature: bytes, data: bytes) -> bool:
        if self._nacl is not None:
            if len(signature) != 64 or len(data) > _SCRATCH - 64:
                return self._nacl_checked(signature, data)
            signed = signature + data
            # crypto_sign_open: the check crypto_sign_verify_detached makes (the same libsodium
            # function); 0 when the signature holds
            return bool(self._nacl(self._out, self._out_len, signed, len(signed), self._raw) == 0)
        from cryptography.exceptions import InvalidSignature

        try:
            self._key.verify(signature, data)
        except InvalidSignature:
            return False
        return True

    def _nacl_checked(self, signature: bytes, data: bytes) -> bool:
        """A message longer than the scratch buffer: through the binding, which sizes its own."""
        from nacl.exceptions import BadSignatureError

        try:
            self._binding(signature + data, self._raw)
        except BadSignatureError:
            return False
        return True


def _ed25519_value(blob: bytes, size: int) -> bytes | None:
    """The ``size`` bytes an ``ssh-ed25519`` wire blob carries (string "ssh-ed25519" || string
    value, nothing after: a public key's 32 bytes, a signature's 64), else None."""
    try:
        kind, pos = _read_string(blob, 0)
        value, pos = _read_string(blob, pos)
    except ValueError:
        return None
    if kind != _ED25519 or len(value) != size or pos != len(blob):
        return None
    return value


def _ed25519_key(public_key: bytes) -> _Ed25519 | None:
    """An ``ssh-ed25519`` wire key, ready to check signatures, else None."""
    raw = _ed25519_value(public_key, 32)
    if raw is None:
        return None
    try:
        return _Ed25519(raw)
    except ValueError:
        return None


def _key_for(public_key: bytes) -> object | None:
    """``public_key`` ready to check signatures (cached: a log names the same few keys), else None."""
    key = _KEY_CACHE.get(public_key)
    if key is None:
        key = _ed25519_key(public_key) if public_key.startswith(b"\0\0\0\x0bssh-ed25519") else None
        if key is None:
            from asyncssh import KeyImportError  # heavy; only verification of other key types needs it
            from asyncssh.public_key import decode_ssh_public_key

            try:
                key = decode_ssh_public_key(public_key)
            except KeyImportError:
                return None
        _KEY_CACHE[public_key] = key
    return key


def _check_signature(public_key: bytes, data: bytes, ssh_signature: bytes) -> bool:
    """Whether ``ssh_signature`` (string alg || string sig) is ``public_key``'s over ``data``.

    An Ed25519 key (what ssh-keygen makes by default, and what a change log's signatures
    nearly always are) is checked directly (:class:`_Ed25519`): asyncssh's general path cost
    twice as much per signature, which is most of ``cockpit verify`` on a big log. Other
    key types go through asyncssh's classes.
    """
    key = _key_for(public_key)
    if key is None:
        return False
    if isinstance(key, _Ed25519):
        sig = _ed25519_value(ssh_signature, 64)
        return sig is not None and key.check(sig, data)
    try:
        return bool(key.verify(data, ssh_signature))  # type: ignore[attr-defined]  # an SSHKey from the cache
    except (ValueError, TypeError):
        return False


#: what an Ed25519 key signs for a message, less the message's SHA-512 (the 64 bytes that end it)
_SIGNED_SHA512 = MAGIC + _string(NAMESPACE.encode()) + _string(b"") + _string(b"sha512") + struct.pack(">I", 64)


def _ed25519_prefix(public_key: bytes) -> bytes:
    """The SSHSIG blob ``ssh-keygen -Y sign -n cockpit-changelog`` writes with ``public_key``
    (ssh-ed25519, sha512), less its last 64 bytes: the raw signature."""
    return _blob(public_key, _string(_ED25519) + _string(bytes(64)), NAMESPACE)[:-64]


#: an SSHSIG blob of an ssh-ed25519 key over sha512 in the namespace (what :func:`_ed25519_prefix`
#: and a signature make), in bytes and in base64's letters
_FAST_BLOB = 187
_FAST_TEXT = 252

#: a checked signature: (seq, the principal whose allowed key validly signed it or None, words)
Verdict = tuple[int, str | None, str]


class Checker:
    """:func:`check` for many signatures against the same allowed signers and operator
    (``cockpit verify`` checks 70,000): a blob in the exact form ssh-keygen writes with an
    Ed25519 key (all but its last 64 bytes the same for every signature by that key) is
    checked without being parsed, and the verdict on a key and an actor, which does not
    depend on the signature, is worked out once. Any other blob takes the general path, so
    what is accepted and what is said are :func:`check`'s."""

    def __init__(
        self, allowed: list[AllowedSigner] | None, operator: str | None = None, now: datetime | None = None
    ) -> None:
        self.allowed, self.operator = allowed, operator
        self.now = now or datetime.now(UTC)  # what ssh-keygen -Y verify checks valid-before/after at
        #: blob less its signature -> (the key, its wire form), for the blobs of the fast form seen
        self._fast: dict[bytes, tuple[_Ed25519, bytes]] = {}
        self._verdicts: dict[tuple[bytes, str], tuple[str | None, str]] = {}
        #: the base64 of a fast-form blob less its signature's letters -> what ``_fast`` holds
        self._fast_text: dict[bytes, tuple[_Ed25519, bytes]] = {}

    def check(self, message: bytes | memoryview, blob: bytes, actor: str) -> tuple[str | None, str]:
        public_key, why = self.key_of(message, blob)
        return (None, why) if public_key is None else self.verdict(public_key, actor)

    def key_of(self, message: bytes | memoryview, blob: bytes) -> tuple[bytes | None, str]:
        """The key (its wire form) whose valid signature of ``message`` ``blob`` is, or None and
        why not: what the signature alone says, before anyone's trust in the key (:meth:`verdict`)."""
        fast = self._fast.get(blob[:-64]) if len(blob) > 64 else None
        if fast is None:
            return self._general_key(message, blob)
        key, public_key = fast
        if not key.check(blob[-64:], _SIGNED_SHA512 + hashlib.sha512(message).digest()):
            return None, f"signature does not match the bytes (key {fingerprint(public_key)})"
        return public_key, ""

    def key_of_text(self, message: bytes | memoryview, text: bytes) -> tuple[bytes | None, str]:
        """:meth:`key_of` for the blob whose base64 is ``text`` (as a signature table holds
        it). A blob of the fast form is 187 bytes, 252 letters, and the first 164 (123 bytes,
        whole groups of three) are the same in every signature by a key: once seen, only the
        signature's last 88 letters are decoded (a group's letters decode alone, so the
        whole decodes to the same bytes, or fails the same way)."""
        entry = self._fast_text.get(text[:-88]) if len(text) == _FAST_TEXT else None
        if entry is not None:
            try:  # what base64.b64decode(validate=True) calls, less its wrapper
                signature = binascii.a2b_base64(text[-88:], strict_mode=True)
            except binascii.Error:
                return None, "signature is not base64"
            if len(signature) == 64:
                key, public_key = entry
                if not key.check(signature, _SIGNED_SHA512 + hashlib.sha512(message).digest()):
                    return None, f"signature does not match the bytes (key {fingerprint(public_key)})"
                return public_key, ""
        try:
            blob = base64.b64decode(text, validate=True)
        except binascii.Error:
            return None, "signature is not base64"
        found = self.key_of(message, blob)
        fast = self._fast.get(blob[:-64]) if len(text) == _FAST_TEXT and len(blob) == _FAST_BLOB else None
        if fast is not None:
            self._fast_text[text[:-88]] = fast
        return found

    def check_many(self, jobs: Iterable[tuple[int, int, int, str, str]], data: memoryview) -> list[Verdict]:
        """:meth:`check` of each job (seq, where its signed bytes start and end in ``data``,
        the base64 blob, the actor), as (seq, principal, words): one loop, for a worker's share."""
        out: list[Verdict] = []
        fast_get, sha512, b64decode = self._fast.get, hashlib.sha512, base64.b64decode
        for seq, start, end, sshsig, actor in jobs:
            try:
                blob = b64decode(sshsig, validate=True)
            except binascii.Error:
                out.append((seq, None, "signature is not base64"))
                continue
            fast = fast_get(blob[:-64]) if len(blob) > 64 else None
            if fast is None:
                out.append((seq, *self.check(data[start:end], blob, actor)))
            elif fast[0].check(blob[-64:], _SIGNED_SHA512 + sha512(data[start:end]).digest()):
                out.append((seq, *self.verdict(fast[1], actor)))
            else:
                out.append((seq, None, f"signature does not match the bytes (key {fingerprint(fast[1])})"))
        return out

    def _general_key(self, message: bytes | memoryview, blob: bytes) -> tuple[bytes | None, str]:
        try:
            parsed = parse_blob(blob)
        except ValueError as exc:
            return None, f"signature unreadable: {exc}"
        if parsed.namespace != NAMESPACE:
            return None, f"signature for namespace {parsed.namespace!r}, not {NAMESPACE!r}"
        if parsed.hash_alg not in ("sha512", "sha256"):
            return None, f"signature hash {parsed.hash_alg!r} is not sha256 or sha512"
        digest = (hashlib.sha512 if parsed.hash_alg == "sha512" else hashlib.sha256)(message).digest()
        data = MAGIC + _string(NAMESPACE.encode()) + _string(b"") + _string(parsed.hash_alg.encode()) + _string(digest)
        sig_alg = _read_string(parsed.ssh_signature, 0)[0] if len(parsed.ssh_signature) >= 4 else b""
        if sig_alg == b"ssh-rsa":
            return None, "an ssh-rsa (SHA-1) signature: not accepted"
        if not _check_signature(parsed.public_key, data, parsed.ssh_signature):
            return None, f"signature does not match the bytes (key {fingerprint(parsed.public_key)})"
        key = _KEY_CACHE.get(parsed.public_key)
        if isinstance(key, _Ed25519) and blob[:-64] == _ed25519_prefix(parsed.public_key):
            self._fast[blob[:-64]] = (key, parsed.public_key)  # the next ones by this key skip the parse
        return parsed.public_key, ""

    def verdict(self, public_key: bytes, actor: str) -> tuple[str | None, str]:
        """The principal a valid signature by ``public_key`` on an event by ``actor`` counts
        for (None when it counts for nobody), and the words: :func:`_whose`, once per key and actor."""
        known = self._verdicts.get((public_key, actor))
        if known is None:
            known = self._verdicts[public_key, actor] = _whose(public_key, actor, self.allowed, self.operator, self.now)
        return known


def _whose(
    public_key: bytes, actor: str, allowed: list[AllowedSigner] | None, operator: str | None, now: datetime
) -> tuple[str | None, str]:
    """The verdict on a valid signature by ``public_key`` on an event by ``actor``, as
    ``ssh-keygen -Y verify`` gives it at ``now`` (its options held: cert-authority,
    namespaces, valid-after, valid-before)."""
    if allowed is None:
        return actor, f"signature valid (key {fingerprint(public_key)}, signers not checked)"
    listed = [e for e in allowed if e.public_key == public_key]
    entries = [e for e in listed if e.refusal(now) is None]
    if not entries:
        if listed:
            return None, f"signed by key {fingerprint(public_key)}: {listed[0].refusal(now)}"
        return None, f"signed by key {fingerprint(public_key)}, which allowed_signers does not list"
    if operator is not None:
        own = next((e for e in entries if e.admits(operator)), None)
        if own is not None and is_system(actor):
            # the cockpit's own event, signed by the operator's process acting for her
            return operator, f"signature valid (the cockpit for {operator}, key {fingerprint(public_key)})"
        if own is not None and not same_person(actor, operator):
            # a key listed for the operator too is the operator's, whatever else it is listed as
            return operator, f"signed with a key allowed_signers lists for the operator ({operator})"
    for entry in entries:
        if entry.admits(actor):
            return actor, f"signature valid ({actor}, key {fingerprint(public_key)})"
    names = ", ".join(p for e in entries for p in e.principals)
    return None, f"signed by {names}'s key, not {actor}'s"


def check(
    message: bytes | memoryview,
    blob: bytes,
    actor: str,
    allowed: list[AllowedSigner] | None,
    operator: str | None = None,
) -> tuple[str | None, str]:
    """Whether ``blob`` is a valid signature of ``message`` by ``actor``'s key.

    Returns (the principal it is valid for, or None; what was found, in words). With
    ``allowed`` None the signature is checked against the key it carries only, and the
    principal is the actor as claimed. A key allowed_signers lists for ``operator`` is
    reported as the operator's even when another principal shares it (so the fold never
    counts it as a second person's). Many signatures: :class:`Checker`.
    """
    return Checker(allowed, operator).check(message, blob, actor)


def choose_signer(key_file: str | os.PathLike[str] | None, principal: str, *, required: bool) -> Signer | None:
    """``--signing-key FILE``, else the ssh-agent's first key (SSH_AUTH_SOCK), else none;
    :class:`BadInput` when ``required`` and there is no key."""
    if key_file is not None:
        return signer_from_key_file(key_file, principal)
    if os.environ.get("SSH_AUTH_SOCK"):
        return signer_from_agent(principal)
    if required:
        raise BadInput(
            "this session requires signatures: give --signing-key FILE or run an ssh-agent (SSH_AUTH_SOCK) "
            "holding your key"
        )
    return None
