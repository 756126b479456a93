"""The engine: pure rules of a change window.

Events in, state and verdicts out, with no I/O and no clock reads: the state model
(:mod:`.state`), the fold of events into it (:mod:`.fold`), exit gates and waves
(:mod:`.gates`), the actions a person can take (:mod:`.actions`) and the rules that
judge them (:mod:`.rules`), the next safe action (:mod:`.planner`), and the built-in
checks and rollback-trigger evaluators (:mod:`.checks`, :mod:`.triggers`).
"""
