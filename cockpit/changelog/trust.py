"""The trust root: who may sign a change log and whether signatures are required, as the
site says, never as the log says of itself.

A log's header records the allowed_signers file and ``require_signatures`` its window
started with, but whoever can write the file can write the header too (point it at a
file listing her second key as the reviewer, or turn the requirement off and strip every
signature). So the readers take both from the site: a settings file (``COCKPIT_SITE_TRUST``
names it, else ``$XDG_CONFIG_HOME/cockpit/trust.toml``, else ``/etc/cockpit/trust.toml``)
and ``--allowed-signers``; the header can only add to them (a header that requires
signatures is held to it), never take away. ``cockpit verify`` compares the two and says
where they differ.

The settings file (TOML, every key optional)::

    require_signatures = true          # default: true when allowed_signers is set
    allowed_signers = "/etc/cockpit/allowed_signers"
    anchor_file = "/mnt/audit/cockpit-anchors"   # an append-only sink for chain heads
    anchor_url = "http://127.0.0.1:8080/anchor"  # a webhook the heads are POSTed to
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from cockpit.changelog.anchor import AnchorSinks
from cockpit.changelog.header import SessionHeader
from cockpit.changelog.sshsig import AllowedSigner, read_allowed_signers
from cockpit.errors import BadInput, read_user_file
from cockpit.runbook.loader import LoadedRunbook

SITE_TRUST_ENV = "COCKPIT_SITE_TRUST"
SYSTEM_TRUST_FILE = Path("/etc/cockpit/trust.toml")


class SiteSettings(BaseModel):
    """The site's trust settings file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    require_signatures: bool | None = None
    allowed_signers: str | None = None
    anchor_file: str | None = None
    anchor_url: str | None = None


@dataclass(frozen=True)
class RunbookTrust:
    """A runbook's ``[trust]`` table (:class:`~cockpit.runbook.model.TrustSpec`), its file made absolute."""

    runbook_id: str
    require_signatures: bool
    allowed_signers: str | None  # absolute, relative to the runbook's folder as written

    @classmethod
    def of(cls, loaded: LoadedRunbook) -> RunbookTrust | None:
        spec = loaded.runbook.trust
        if spec is None:
            return None
        path = None
        if spec.allowed_signers:  # relative to the runbook file, as its writer reads it (never resolved)
            path = os.path.abspath(Path(str(loaded.path)).parent / os.path.expanduser(spec.allowed_signers))
        return cls(loaded.runbook.id, spec.requires, path)


@dataclass(frozen=True)
class SiteTrust:
    """What the site says: the settings, where they came from, ``--allowed-signers``, and the
    ``[trust]`` table of the window's runbook (:meth:`with_runbook`): each can only add."""

    settings: SiteSettings
    source: str | None = None  # the settings file read, None when there is none
    runbook: RunbookTrust | None = None

    @property
    def allowed_signers(self) -> str | None:
        """Who may sign: the site's file (or ``--allowed-signers``), else the runbook's."""
        if self.settings.allowed_signers:
            return self.settings.allowed_signers
        return self.runbook.allowed_signers if self.runbook is not None else None

    @property
    def site_requires(self) -> bool:
        """The site itself requires signatures: said so, or (unsaid) it names who may sign."""
        said = self.settings.require_signatures
        return said if said is not None else self.settings.allowed_signers is not None

    @property
    def require_signatures(self) -> bool:
        """Signatures are required: by the site, or by the runbook (which can only add)."""
        return self.site_requires or (self.runbook is not None and self.runbook.require_signatures)

    def who_requires(self) -> str:
        """Who requires signatures, in words (for a refusal): the site, the runbook, or both."""
        named = self.runbook is not None and self.runbook.require_signatures
        book = f"the runbook {self.runbook.runbook_id}'s [trust]" if named and self.runbook else ""
        if self.site_requires:
            return f"the site and {book}" if book else "the site"
        return book

    def signers_source(self) -> str:
        """Whose allowed_signers :attr:`allowed_signers` is, in words."""
        if self.settings.allowed_signers or self.runbook is None:
            return "the site's"
        return f"the runbook {self.runbook.runbook_id}'s"

    def with_signers(self, path: str | None) -> SiteTrust:
        """This trust with ``--allowed-signers`` given on the command line (it wins over the file)."""
        if not path:
            return self
        settings = self.settings.model_copy(update={"allowed_signers": os.path.abspath(path)})
        return SiteTrust(settings, self.source, self.runbook)

    def with_runbook(self, loaded: LoadedRunbook | None) -> SiteTrust:
        """This trust with the window's runbook's ``[trust]`` table merged in."""
        if loaded is None:
            return self
        return SiteTrust(self.settings, self.source, RunbookTrust.of(loaded))

    def anchor_sinks(self) -> AnchorSinks:
        """Where each append's head goes (:mod:`.anchor`): the site's file and webhook, if any."""
        return AnchorSinks(file=self.settings.anchor_file, url=self.settings.anchor_url)

    def require_for(self, header: SessionHeader) -> bool:
        """Whether the log's events must be signed: the site's word, or the header's when it asks more."""
        return self.require_signatures or header.require_signatures

    def signers_path_for(self, header: SessionHeader) -> str | None:
        """The allowed_signers file to check the log against: the site's; the header's only
        when the site names none (``cockpit verify`` then says so)."""
        return self.allowed_signers or header.allowed_signers

    def signers_for(self, header: SessionHeader) -> list[AllowedSigner] | None:
        """The allowed signers the fold checks the log's events against, when signatures are
        required (None when not); none (so no signature counts) when the file is missing.
        The site's own file, there but refused (a look-alike principal, a planted link, a line
        that is not one), is :class:`BadInput`: the site's mistake is said, not folded around."""
        if not self.require_for(header):
            return None
        path = self.signers_path_for(header)
        if not path:
            return []
        if path == self.allowed_signers and os.path.lexists(path):
            return read_allowed_signers(path)
        try:
            return read_allowed_signers(path)
        except BadInput:
            return []  # a missing file must never make any key acceptable


def settings_path() -> Path | None:
    """The site's settings file: ``$COCKPIT_SITE_TRUST``, else the user's, else the system's."""
    named = os.environ.get(SITE_TRUST_ENV)
    if named:
        return Path(named)
    config = os.environ.get("XDG_CONFIG_HOME") or (str(Path.home() / ".config") if "HOME" in os.environ else "")
    for candidate in ([Path(config) / "cockpit" / "trust.toml"] if config else []) + [SYSTEM_TRUST_FILE]:
        if candidate.is_file():
            return candidate
    return None


def load_site_trust(path: Path | None = None) -> SiteTrust:
    """The site's trust (:func:`settings_path` when ``path`` is None); a bad file is :class:`BadInput`."""
    path = path or settings_path()
    if path is None:
        return SiteTrust(SiteSettings())
    data = read_user_file(path, "the site's trust settings", max_bytes=64 * 1024, trust_root=True)
    try:
        raw = tomllib.loads(data.decode())
        settings = SiteSettings.model_validate(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: not a TOML settings file: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"{path}: {where}: {first['msg']}") from None
    # relative to the settings file, as a person reads it; absolute but never resolved (a link
    # in place of the file must stay a link, for the reads and appends to refuse)
    for name in ("allowed_signers", "anchor_file"):
        value = getattr(settings, name)
        if value:
            settings = settings.model_copy(update={name: os.path.abspath(path.parent / value)})
    return SiteTrust(settings, str(path))


def trust_for(header: SessionHeader, session_path: str | os.PathLike[str], site: SiteTrust | None = None) -> SiteTrust:
    """The trust a log is read under: the site's (``site``, else :func:`load_site_trust`) with
    the ``[trust]`` table of the runbook its header names merged in (found as every reader
    finds it, checked by sha256; a runbook not found adds nothing, and the reader that needs it
    says so)."""
    site = site if site is not None else load_site_trust()
    return site.with_runbook(_runbook_of(header, str(session_path)))


#: runbooks found for logs, by (recorded path, id, sha256, log): each reader asks again for the same log
_FOUND: dict[tuple[str, str, str, str], LoadedRunbook | None] = {}


def _runbook_of(header: SessionHeader, session_path: str) -> LoadedRunbook | None:
    from cockpit.changelog.runbook_of import session_runbook

    key = (header.runbook_path, header.runbook_id, header.runbook_sha256, session_path)
    if key not in _FOUND:
        try:
            _FOUND[key] = session_runbook(header, Path(session_path))
        except BadInput:
            _FOUND[key] = None
        if len(_FOUND) > 64:
            _FOUND.pop(next(iter(_FOUND)))
    return _FOUND[key]


def found_runbook(header: SessionHeader, session_path: str | os.PathLike[str]) -> LoadedRunbook:
    """:func:`.runbook_of.session_runbook` through the runbooks :func:`trust_for` found (verify
    asks for the same log's runbook for its trust and for its fold: parsed and checked once);
    :class:`BadInput` saying why when it cannot be found."""
    loaded = _runbook_of(header, str(session_path))
    if loaded is None:
        from cockpit.changelog.runbook_of import session_runbook

        return session_runbook(header, Path(session_path))  # not found: it says why
    return loaded


def header_differences(header: SessionHeader, site: SiteTrust) -> list[str]:
    """Where the log's header says something about its trust the site (with the window's
    runbook) does not: each a sentence. The header asking for less than the site or the
    runbook (no signatures, another signers file with other keys) is what a rewritten log
    would say."""
    out: list[str] = []
    if site.require_signatures and not header.require_signatures:
        who = site.who_requires()
        verb = "require" if " and " in who else "requires"
        out.append(f"the log's header says signatures are not required; {who} {verb} them")
    recorded, own = header.allowed_signers, site.allowed_signers
    if recorded and own and Path(recorded).resolve() != Path(own).resolve():
        try:
            theirs = {(p, e.public_key) for e in read_allowed_signers(recorded) for p in e.principals}
        except BadInput:
            theirs = None
        mine = {(p, e.public_key) for e in read_allowed_signers(own) for p in e.principals}
        if theirs is None:
            out.append(
                f"the log's header names allowed_signers {recorded}, which cannot be read; "
                f"{site.signers_source()} is {own}"
            )
        elif theirs - mine:
            extra = sorted({p for p, _ in theirs - mine})
            out.append(
                f"the log's header names allowed_signers {recorded}, which lists keys {site.signers_source()} {own} "
                "does not "
                f"(for {', '.join(extra)})"
            )
    return out
