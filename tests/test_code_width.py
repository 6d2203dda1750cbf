"""Every line of a page's doctest fits on screen and on paper: at most 86 characters.

The HTML scrolls a longer line sideways in a narrow window, and the LaTeX build
wraps one longer than its code box (8 pt code, about 98 characters with a line
number) with a continuation arrow; either costs the reader the line they are
reading. The width counts the Markdown indentation, since a block inside a list
item is set that much narrower.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HANDBOOK = Path(__file__).resolve().parents[1] / "handbook"
WIDTH = 86
OPEN = re.compile(r"^\s*(`{3,}|:{3,})\{doctest\}")


def long_lines(text: str) -> list[tuple[int, int]]:
    """(line number, length) of each line inside a doctest fence longer than WIDTH."""
    out, fence = [], None
    for number, line in enumerate(text.split("\n"), 1):
        if fence is None:
            opened = OPEN.match(line)
            fence = opened.group(1) if opened else None
        elif line.strip() == fence:
            fence = None
        elif len(line) > WIDTH:
            out.append((number, len(line)))
    return out


def test_long_lines_finds_a_long_line_only_inside_a_doctest() -> None:
    text = "x" * 90 + "\n```{doctest}\n>>> 1\n" + ">>> " + "1" * 90 + "\n```\n" + "y" * 90
    assert long_lines(text) == [(4, 94)]


@pytest.mark.parametrize(
    "page", sorted(HANDBOOK.rglob("*.md")), ids=lambda p: str(p.relative_to(HANDBOOK))
)
def test_doctest_lines_fit_the_code_box(page: Path) -> None:
    assert long_lines(page.read_text(encoding="utf-8")) == []
