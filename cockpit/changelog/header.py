"""The ``[session]`` header of a change log: what the window is, written once at creation."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cockpit import __version__
from cockpit.changelog.events import SCHEMA_VERSION, UtcDatetime, utcnow
from cockpit.errors import BadInput
from cockpit.runbook.backends import with_backend

CHANGE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_CHANGE_ID = re.compile(CHANGE_ID_PATTERN)


def validate_change_id(change_id: str) -> str:
    """Return ``change_id`` if it is safe as a file name, else raise :class:`BadInput`."""
    if not _CHANGE_ID.fullmatch(change_id):  # fullmatch: "$" alone would let a trailing newline through
        raise BadInput(
            f"bad change id {change_id!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return change_id


class SessionHeader(BaseModel):
    """The ``[session]`` table: what this change window is, written once at creation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    change_id: str
    runbook_id: str
    runbook_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    #: absolute when the session was started by a cockpit that records it (relative in older logs)
    runbook_path: str = ""
    operator: str = Field(min_length=1)
    hosts: list[str] = Field(default_factory=list)
    #: how each host was reached (name, address, port, user from the inventory), so a resume
    #: connects to the same machines; absent in logs written before it existed
    targets: list[dict[str, Any]] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    # what a resume needs to reach the same nodes from any directory (absolute paths); absent
    # in logs written before they existed, and for a run that used OpenSSH's defaults
    ssh_config: str | None = None
    known_hosts: str | None = None
    #: the --hosts spec as typed, and the --inventory file it was resolved against
    host_spec: str | None = None
    inventory: str | None = None
    #: two-person sign-offs count only with a valid signature from a second person's key
    #: (on by default for ``cockpit run``, off for the demo; absent, so off, in older logs)
    require_signatures: bool = False
    #: the allowed_signers file (OpenSSH's format) that maps people to their keys
    allowed_signers: str | None = None
    tool_version: str = __version__
    created_at: UtcDatetime = Field(default_factory=utcnow)
    #: the engine the window's node work goes through (``cockpit run --backend``); absent, so ssh,
    #: in logs written before backends existed
    backend: str | None = None
    #: that engine's settings as given (:class:`cockpit.fleet.backends.registry.BackendOptions`
    #: less its name), so a resume asks the same engine the same way
    backend_options: dict[str, Any] | None = None

    @property
    def backend_name(self) -> str:
        """The window's engine: ``ssh`` when the header names none."""
        return self.backend or "ssh"

    def window_parameters(self) -> dict[str, Any]:
        """The parameters a fold of this window reads: the recorded ones and the chosen backend
        (``when = {backend = ...}``)."""
        return with_backend(self.parameters, self.backend)

    @field_validator("change_id")
    @classmethod
    def _change_id(cls, value: str) -> str:
        if not _CHANGE_ID.match(value):
            raise ValueError("1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value
