"""Parsers for pasted or captured GPU tool output: text in, pydantic model out.

One module per format (``query_gpu``, ``smi_xml``, ``smi_table``, ``proc_version``,
``smi_version``); they share :class:`SmiFacts`, :class:`ParseError` and the value
cleaning in :mod:`cockpit.gpu.parsers.values`. Every parser is pure (no I/O) and
never raises for odd values: a field it cannot read is ``None`` and, when that
is surprising, a line in ``warnings``. Only text that is not the format at all
(an error message instead of a table, random bytes) raises :class:`ParseError`.
"""

from __future__ import annotations

from cockpit.gpu.parsers.models import KernelModuleFacts, ParseError, SmiFacts

__all__ = ["KernelModuleFacts", "ParseError", "SmiFacts"]
