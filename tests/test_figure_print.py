"""Every figure's text prints at 7 pt or more in the PDF.

A figure script draws at its own size in inches; the PDF shrinks the figure
to the text width when it is wider (``\\sphinxincludegraphics``), or to the
``:width:`` or ``:scale:`` its page gives, so an 8 pt label in a figure 1.4
times the text width prints at under 6 pt. These tests run each script of
``handbook/_figures`` the way the plot directive does (matplotlib's Agg
backend, the build's ``plot_rcparams``), record the size of every text the
renderer draws, and scale it to the width the figure takes on the page: the
text width of the A4 page that ``conf/conf.py`` sets up, times the page's
width option. They need matplotlib (the docs' environment), not TeX; the
``pdf`` session runs them.
"""

from __future__ import annotations

import math
import os
import re
import runpy
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

if os.environ.get("INFRALENS_REQUIRE_FIGURES"):
    import matplotlib
else:
    matplotlib = pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
FIGURES = HANDBOOK / "_figures"
# The smallest text a printed page may carry, in points.
MIN_PT = 7.0
# Printer's points (TeX's pt) per PostScript point (matplotlib's and PDF's).
TEX_PT_PER_BP = 72.27 / 72
# conf.py's latex_elements: A4 paper ("papersize"), and sphinx.sty's default
# horizontal margin of 1 in each side (its "hmargin" option, which conf.py
# leaves alone; a "sphinxsetup" that sets it is read below).
A4_WIDTH_MM = 210.0
A4_HEIGHT_MM = 297.0


@cache
def _conf() -> dict[str, object]:
    """conf/conf.py's settings (it imports its helpers from conf/)."""
    sys.path.insert(0, str(ROOT / "conf"))
    try:
        return runpy.run_path(str(ROOT / "conf" / "conf.py"))
    finally:
        sys.path.remove(str(ROOT / "conf"))


def _conf_latex() -> dict[str, str]:
    return dict(_conf()["latex_elements"])  # type: ignore[call-overload]


def _length_bp(text: str) -> float:
    """A TeX length in PostScript points ("1in", "2cm", "25mm", "72pt")."""
    number = re.fullmatch(r"\s*([0-9.]+)\s*(in|cm|mm|pt|bp)\s*", text)
    if number is None:
        raise ValueError(f"cannot read the length {text!r}")
    value, unit = float(number[1]), number[2]
    per = {"in": 72.0, "cm": 72 / 2.54, "mm": 72 / 25.4, "pt": 1 / TEX_PT_PER_BP, "bp": 1.0}
    return value * per[unit]


@cache
def page_box_bp() -> tuple[float, float]:
    """The text block's width and height in PostScript points.

    sphinx.sty hands the margins to geometry and rounds the text block down
    to whole TeX points (``\\@settopoint``), as done here.
    """
    latex = _conf_latex()
    assert latex.get("papersize") == "a4paper", "the page size here assumes A4"
    setup = dict(
        part.split("=", 1)
        for part in (p.strip() for p in latex.get("sphinxsetup", "").split(","))
        if "=" in part
    )
    hmargin = _length_bp(setup.get("hmargin", "1in"))
    vmargin = _length_bp(setup.get("vmargin", "1in"))
    width = A4_WIDTH_MM * 72 / 25.4 - 2 * hmargin
    height = A4_HEIGHT_MM * 72 / 25.4 - 2 * vmargin
    return (
        math.floor(width * TEX_PT_PER_BP) / TEX_PT_PER_BP,
        math.floor(height * TEX_PT_PER_BP) / TEX_PT_PER_BP,
    )


@dataclass(frozen=True)
class Use:
    """One ``.. plot::`` directive: the script, the page and its size options."""

    script: str
    page: str
    width: str | None
    scale: str | None


def plot_uses() -> list[Use]:
    """Every plot directive in the handbook's pages, with its width and scale."""
    uses = []
    for page in sorted(HANDBOOK.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            found = re.match(r"(\s*)\.\. plot:: (\S+)", line)
            if found is None:
                continue
            options: dict[str, str] = {}
            for following in lines[i + 1 :]:
                option = re.match(r"\s+:([a-z-]+):\s*(.*)", following)
                if option is None:
                    break
                options[option[1]] = option[2].strip()
            rel = page.relative_to(HANDBOOK).as_posix()
            uses.append(Use(found[2], rel, options.get("width"), options.get("scale")))
    return uses


@dataclass(frozen=True)
class Drawn:
    """One figure a script draws: its size in inches and every text's size in points."""

    number: int
    width_in: float
    height_in: float
    texts: tuple[tuple[float, str], ...]


@cache
def draw(script: str) -> tuple[Drawn, ...]:
    """Run a figure script as the plot directive does and record its texts."""
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import RendererAgg

    rcparams = _conf()["plot_rcparams"]
    plt.close("all")
    seen: list[tuple[float, str]] = []
    original = RendererAgg.draw_text

    def record(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):  # type: ignore[no-untyped-def]
        if s.strip():
            seen.append((float(prop.get_size_in_points()), s))
        return original(self, gc, x, y, s, prop, angle, ismath, mtext)

    cwd = os.getcwd()
    sys.path[:0] = [str(FIGURES), str(ROOT / "labs_src")]
    try:
        with matplotlib.rc_context(rcparams):  # type: ignore[arg-type]
            os.chdir(FIGURES)
            runpy.run_path(str(FIGURES / script), run_name="__main__")
            drawn = []
            RendererAgg.draw_text = record  # type: ignore[method-assign]
            try:
                for number in plt.get_fignums():
                    fig = plt.figure(number)
                    seen.clear()
                    fig.canvas.draw()
                    w, h = fig.get_size_inches()
                    drawn.append(Drawn(number, float(w), float(h), tuple(seen)))
            finally:
                RendererAgg.draw_text = original  # type: ignore[method-assign]
    finally:
        os.chdir(cwd)
        del sys.path[:2]
        plt.close("all")
    return tuple(drawn)


def printed_scale(use: Use, figure: Drawn) -> float:
    """How much the PDF scales the figure: its printed width over its drawn width."""
    line_bp, max_height_bp = page_box_bp()
    w_bp, h_bp = figure.width_in * 72, figure.height_in * 72
    if use.width is not None:
        percent = re.fullmatch(r"([0-9.]+)\s*%", use.width)
        target = line_bp * float(percent[1]) / 100 if percent else _length_bp(use.width)
        scale = target / w_bp
        return min(scale, max_height_bp / h_bp)
    scale = float(use.scale) / 100 if use.scale is not None else 1.0
    # \sphinxincludegraphics shrinks what is wider than the line or taller than the page.
    return min(scale, line_bp / w_bp, max_height_bp / h_bp)


def smallest(use: Use) -> Iterator[tuple[float, str, Drawn]]:
    for figure in draw(use.script):
        scale = printed_scale(use, figure)
        for size, text in figure.texts:
            yield size * scale, text, figure


USES = plot_uses()


def test_every_figure_script_is_checked() -> None:
    """Each script that draws (imports matplotlib) is on a page, so a test above sees it."""
    scripts = {
        p.name
        for p in FIGURES.glob("*.py")
        if not p.name.startswith("_") and "matplotlib" in p.read_text(encoding="utf-8")
    }
    assert scripts
    assert scripts <= {use.script for use in USES}


@pytest.mark.parametrize("use", USES, ids=[f"{u.page}:{u.script}" for u in USES])
def test_figure_text_prints_at_7pt(use: Use) -> None:
    small = sorted(
        {(round(pt, 2), text) for pt, text, _ in smallest(use) if pt < MIN_PT},
    )
    assert draw(use.script), f"{use.script} draws no figure"
    assert not small, (
        f"{use.script} on {use.page}: text under {MIN_PT} pt when printed: "
        + "; ".join(f"{pt} pt {text!r}" for pt, text in small[:8])
    )
