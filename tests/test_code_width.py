"""Every line of a doctest fits its code box: a page's at most 86 characters, and a
docstring's as wide as the API reference sets it.

The HTML scrolls a longer line sideways in a narrow window, and the LaTeX build
wraps one longer than its code box (8 pt code, about 98 characters with a line
number) with a continuation arrow; either costs the reader the line they are
reading. The width counts the Markdown indentation, since a block inside a list
item is set that much narrower.

The API reference (``automodule``) sets a module docstring's examples in a box
90 characters wide at furo's 1,100 px layout, each member's one level in (86),
and a class member's two levels in (82); autodoc has removed the docstring's own
indentation by then, so the width counts from the prompt.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
PACKAGE = ROOT / "labs_src" / "infralens"
WIDTH = 86
DOCSTRING_WIDTH = (90, 86, 82)  # module, its members, a class's members
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


def docstrings(tree: ast.Module) -> Iterator[tuple[int, int, str]]:
    """(depth, line, cleaned text) of each docstring autodoc shows: the module's (depth
    0), each function's, class's and documented attribute's (1), and their members' (2)."""
    doc = ast.get_docstring(tree, clean=True)
    if doc:
        yield 0, 1, doc

    def walk(body: list[ast.stmt], depth: int) -> Iterator[tuple[int, int, str]]:
        for i, node in enumerate(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                text = ast.get_docstring(node, clean=True)
                if text:
                    yield depth, node.body[0].lineno, text
                if isinstance(node, ast.ClassDef):
                    yield from walk(node.body, depth + 1)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and i + 1 < len(body):
                after = body[i + 1]
                if (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                        and isinstance(after.value.value, str)):  # fmt: skip
                    yield depth, after.lineno, inspect.cleandoc(after.value.value)

    yield from walk(tree.body, 1)


def long_example_lines(source: str) -> list[tuple[int, int]]:
    """(line in *source*, length) of each example line, prompt, output or traceback,
    wider than its docstring's box (:data:`DOCSTRING_WIDTH`)."""
    parser, out = doctest.DocTestParser(), []
    for depth, line, text in docstrings(ast.parse(source)):
        width = DOCSTRING_WIDTH[min(depth, 2)]
        for example in parser.get_examples(text):
            body = example.source.rstrip("\n").split("\n")
            shown = [("... " if i else ">>> ") + s for i, s in enumerate(body)]
            shown += example.want.rstrip("\n").split("\n") if example.want else []
            first = line + example.lineno
            out += [(first + i, len(s)) for i, s in enumerate(shown) if len(s) > width]
    return out


def test_long_example_lines_measures_each_docstring_at_its_depth() -> None:
    source = (
        '"""Module.\n\n>>> ' + "1" * 86 + '\n"""\n'  # 90 wide: fits the module's box
        "def f():\n"
        '    """F.\n\n    >>> ' + "2" * 83 + '\n    """\n'  # 87: one past a member's
        "class C:\n"
        '    """C."""\n'
        "    def g(self):\n"
        '        """G.\n\n        >>> x\n        ' + "3" * 83 + '\n        """\n'
    )
    assert long_example_lines(source) == [(8, 87), (16, 83)]


@pytest.mark.parametrize(
    "module", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_docstring_examples_fit_the_api_reference(module: Path) -> None:
    assert long_example_lines(module.read_text(encoding="utf-8")) == []
