"""Textual UI for the cockpit: render state from ``cockpit`` and forward intent."""
