"""The settings file's notification sinks, and their secrets.

The settings file (TOML; ``--settings PATH``, else ``$COCKPIT_SETTINGS``) holds no secret:
a webhook's URL and an optional bearer token come from an environment variable or a file
it names, read when the cockpit starts, and are never written to the change log (what is
recorded of a delivery names the sink, never its URL)::

    [[notify.webhook]]
    name = "ops-slack"
    format = "slack"                 # json | slack | teams
    url_env = "COCKPIT_SLACK_URL"    # or url_file = "/etc/cockpit/slack-url" (mode 0600)
    events = ["trigger-fired", "signoff-waiting", "step-failed", "wave-done", "window-ended", "watch-finding"]
    max_attempts = 6                 # delivery tries, with backoff between them
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cockpit.errors import BadInput, read_user_file
from cockpit.notify.bodies import BodyFormat, NoticeKind

#: The environment variable naming the settings file when ``--settings`` does not.
SETTINGS_ENV = "COCKPIT_SETTINGS"

_SINK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_MAX_SECRET_BYTES = 8192


class WebhookSettings(BaseModel):
    """One ``[[notify.webhook]]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    format: BodyFormat = "json"
    url_env: str | None = None
    url_file: Path | None = None
    token_env: str | None = None  # sent as ``Authorization: Bearer ...`` when given
    token_file: Path | None = None
    events: list[NoticeKind] | None = None  # None: every kind
    timeout_s: Annotated[float, Field(gt=0, le=120)] = 10.0
    max_attempts: Annotated[int, Field(ge=1, le=20)] = 6
    backoff_s: Annotated[float, Field(gt=0, le=600)] = 2.0  # before the second try; doubled after each
    max_backoff_s: Annotated[float, Field(gt=0, le=3600)] = 300.0

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _SINK_NAME.fullmatch(value):
            raise ValueError("a sink's name is letters, digits, '.', '_' or '-' (at most 64)")
        return value

    @field_validator("url_env", "token_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an environment variable's name")
        return value

    def wants(self, kind: NoticeKind) -> bool:
        return self.events is None or kind in self.events


class NotifySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    webhook: list[WebhookSettings] = Field(default_factory=list)


class Settings(BaseModel):
    """The settings file: today its ``[notify]`` table only (other tables are refused, so a
    typo is never silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    notify: NotifySettings = Field(default_factory=NotifySettings)


@dataclass(frozen=True, slots=True)
class Sink:
    """A webhook ready to post to: its settings and its secrets, read once."""

    settings: WebhookSettings
    url: str
    token: str | None = None

    @property
    def name(self) -> str:
        return self.settings.name

    def __repr__(self) -> str:  # never the URL or the token, even in a traceback
        return f"Sink({self.settings.name!r}, {self.settings.format})"


def settings_path(given: Path | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The settings file to read: ``given``, else ``$COCKPIT_SETTINGS``, else none."""
    if given is not None:
        return given
    env = (os.environ if environ is None else environ).get(SETTINGS_ENV)
    return Path(env) if env else None


def load_settings(path: Path) -> Settings:
    """The settings file, or :class:`BadInput` in one line naming what is wrong."""
    raw = read_user_file(path, "a settings file", max_bytes=1024 * 1024)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: not a TOML settings file: {exc}") from None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"{path}: {where}: {first['msg']}") from None
    names = [w.name for w in settings.notify.webhook]
    if len(set(names)) != len(names):
        raise BadInput(f"{path}: two webhooks share a name")
    return settings


def _secret(env: str | None, file: Path | None, what: str, environ: Mapping[str, str]) -> str | None:
    if env is not None and file is not None:
        raise BadInput(f"{what}: give it by environment variable or by file, not both")
    if env is not None:
        value = environ.get(env, "").strip()
        if not value:
            raise BadInput(f"{what}: environment variable {env} is not set")
        return value
    if file is not None:
        value = read_user_file(file.expanduser(), what, max_bytes=_MAX_SECRET_BYTES).decode("utf-8", "replace").strip()
        if not value:
            raise BadInput(f"{what}: {file} is empty")
        return value
    return None


def resolve_sinks(settings: Settings, environ: Mapping[str, str] | None = None) -> list[Sink]:
    """Each webhook with its URL and token read (:class:`BadInput` for one missing or bad)."""
    env = os.environ if environ is None else environ
    sinks = []
    for hook in settings.notify.webhook:
        url = _secret(hook.url_env, hook.url_file, f"webhook {hook.name}: its URL", env)
        if url is None:
            raise BadInput(f"webhook {hook.name}: needs url_env or url_file (the URL is a secret)")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
            raise BadInput(f"webhook {hook.name}: its URL is not an http(s) URL")  # never echo the secret
        token = _secret(hook.token_env, hook.token_file, f"webhook {hook.name}: its token", env)
        sinks.append(Sink(hook, url, token))
    return sinks


def sinks_from(path: Path | None, environ: Mapping[str, str] | None = None) -> list[Sink]:
    """The sinks of the settings file a command was given (none: no file, no sinks)."""
    found = settings_path(path, environ)
    return [] if found is None else resolve_sinks(load_settings(found), environ)
