"""What the cockpit shows, free of any terminal UI.

The replay model over a saved log (:mod:`.replay`), the panes drawn as plain text
frames (:mod:`.frame`) and the asciicast writer built on them (:mod:`.cast`).
"""
