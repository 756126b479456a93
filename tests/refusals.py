"""How the tests read a refusal (no tests here)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cockpit.errors import BadInput


def one_line_refusal(parse: Callable[[str], object], text: str) -> str:
    """The message of the BadInput ``parse(text)`` raises, checked to be one line (the CLI prints it as one)."""
    with pytest.raises(BadInput) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    return message
