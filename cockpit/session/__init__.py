"""Sessions: the engine, the change log and the fleet put to work.

The operator's session (:mod:`.operator`: every intent goes gate check → change-log
entry → command → change-log entry), the reviewer's (:mod:`.review`), the demo's
simulated fleet and autopilot (:mod:`.demo`, :mod:`.autopilot`) and the tmux pairing
helpers (:mod:`.pair`).
"""
