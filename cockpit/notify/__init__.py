"""Telling people as it happens: webhook sinks, the bodies they take, and delivery.

The cockpit tells the person at its screen; a gate waiting for a second person's
sign-off, a trigger fired at 3 a.m. or a watch's finding days later must reach people
who are not looking. This package knows nothing of the change log or the engine: the
session turns what happened into a :class:`~.bodies.Notice` and records what
:class:`~.delivery.Notifier` reports back (never the secret URL).

- :mod:`.settings`: the ``[[notify.webhook]]`` tables of the settings file, and the
  secrets (URL, token) read from the environment or a file, never from the settings file;
- :mod:`.bodies`: a notice as a generic JSON, Slack-compatible or Teams-compatible body;
- :mod:`.delivery`: background delivery with retries and backoff.
"""
