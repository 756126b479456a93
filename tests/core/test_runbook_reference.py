"""The runbook reference is written from the model: every key appears, with its meaning."""

from __future__ import annotations

from pydantic import BaseModel

from cockpit.runbook import model
from cockpit.runbook.reference import default_text, field_comments, reference_markdown, tables, undocumented


class Commented(BaseModel):
    #: said above,
    #: on two lines
    above: int = 1
    after: str = "x"  # said after
    bare: bool = False


def test_comments_above_and_after_a_field_are_its_meaning() -> None:
    said = field_comments(Commented)
    assert said == {"above": "said above, on two lines", "after": "said after", "bare": ""}


def test_every_runbook_key_has_a_meaning() -> None:
    assert undocumented() == []


def test_every_table_and_key_is_in_the_reference() -> None:
    page = reference_markdown()
    found = tables()
    paths = {t.path for t in found}
    assert {"[runbook]", "[[stages]]", "[[stages.steps]]", "[stages.steps.ansible]", "[waves]"} <= paths
    for table in found:
        for name in table.model.model_fields:
            assert f"| `{name}` |" in page, f"{table.path} {name}"
    # an enum's values are listed with what each does
    assert "`reboot`: record boot id, reboot, wait for a new boot id" in page


def test_defaults_are_written_as_toml_would() -> None:
    fields = model.Step.model_fields
    assert default_text(fields["id"]) == "*required*"
    assert default_text(fields["destructive"]) == "`false`"
    assert default_text(fields["kind"]) == '`"command"`'
    assert default_text(model.Runbook.model_fields["backends"]) == '`["ssh"]`'
