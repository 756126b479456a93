"""Runbooks shipped with the cockpit, as TOML data (package data of this package)."""
