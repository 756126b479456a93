"""The change log: the events of a window and the crash-safe file that keeps them.

:mod:`.events` defines what is recorded; :mod:`.journal` appends each event as one
fsync'd TOML block under a lock and reads a log back, tolerating a torn tail.
"""
