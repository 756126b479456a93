"""The node detail's per-GPU table drawn line by line (``richtext.GpuGrid``) paints exactly
what Rich's ``Table`` of the same rows paints, at every width: its own lines at the natural
width and wider, Rich's table where narrower or where a cell is not plain ASCII."""

from __future__ import annotations

import io

import pytest
from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style

from cockpit.view.detail import GPU_COLUMNS
from cockpit.view.richtext import GpuGrid, _gpu_rich_table


def _lines(renderable: RenderableType, width: int) -> list[list[tuple[str, Style]]]:
    console = Console(width=200, file=io.StringIO(), color_system="truecolor", legacy_windows=False)
    lines = console.render_lines(renderable, console.options.update_width(width), pad=True)
    return [[(s.text, s.style or Style.null()) for s in Segment.simplify(line)] for line in lines]


def _h100(i: int) -> tuple[str, ...]:
    return (str(i), "NVIDIA H100 80GB HBM3", f"{1000 + i}/81559", f"{7 * i}%", f"{40 + i}C", f"{300 + i}/700", "0")


ROWS = {
    "eight": tuple(_h100(i) for i in range(8)),
    "short cells": (("0", "A", "N/A", "0%", "30C", "N/A", "0"),),
    "wide name": (("12", "NVIDIA GB200 NVL72 with a long name", "1/189471", "100%", "101C", "1200/1200", "12"),),
    "markup-like": (("0", "[bold]x[/bold]", "1/2", "0%", "1C", "2/3", "[red]"),),
    "not ascii": (("0", "NVIDIA H100 \u00e9\u4e2d", "1/2", "0%", "1C", "2/3", "0"),),
    "too few cells": (("0 only",),),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_grid_paints_what_richs_table_paints_at_every_width(name: str) -> None:
    rows = ROWS[name]
    grid = GpuGrid(rows)
    natural = grid.natural_width
    widths = range(20, 120) if natural is None else range(max(10, natural - 8), natural + 30)
    for width in widths:
        assert _lines(grid, width) == _lines(_gpu_rich_table(rows), width), f"{name} at {width} columns"


def test_the_grid_draws_its_own_lines_only_at_its_natural_width_or_wider() -> None:
    grid = GpuGrid(ROWS["eight"])
    natural = grid.natural_width
    assert natural is not None and natural == sum(grid.widths or ()) + 2 * (len(GPU_COLUMNS) - 1)
    console = Console(width=200, file=io.StringIO())
    assert not any(isinstance(r, type(grid.table)) for r in grid.__rich_console__(console, console.options))
    narrow = console.options.update_width(natural - 1)
    assert [type(r) for r in grid.__rich_console__(console, narrow)] == [type(grid.table)]
    assert GpuGrid(ROWS["not ascii"]).widths is None and GpuGrid(ROWS["too few cells"]).widths is None
