"""The change log: the events of a window and the crash-safe file that keeps them.

:mod:`.events` defines what is recorded (one class per kind) and :mod:`.facts` what each
kind carries; :mod:`.journal` appends each event as one fsync'd TOML block under a lock
(:mod:`.blocks` is the block format, :mod:`.header` the ``[session]`` table) and
:mod:`.reader` reads a log back, tolerating a torn tail.
"""
