"""The runbook: the procedure as validated data.

The model (:mod:`.model`), the TOML loader that reports every problem with its line
(:mod:`.loader`), placeholder filling and quoting (:mod:`.placeholders`), the names of
built-in checks and triggers (:mod:`.builtins`) and wave planning (:mod:`.waves`).
"""
