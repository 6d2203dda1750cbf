"""Every lab page is a code reading: it shows the package's code, included by reference.

A lab page includes the functions or classes that carry its idea straight from
the module (``literalinclude`` with ``:pyobject:`` or named start/end markers),
explains each piece under it (``tests/test_lab_code_reading.py``), and leaves
the module's whole API to the reference section. These tests
read the page sources: an included object that disappears or moves out of its
module fails here (and the ``-W`` build fails on it too), and so does a page
that pastes code, pulls a whole module with ``automodule``, grows past the
reading length, or lacks the template's sections and a figure.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from infralens.labs import LABS

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
PACKAGE = ROOT / "labs_src" / "infralens"
STARTERS = ROOT / "labs_src" / "starters"
MAX_WORDS = 2500
MIN_CODE_LINES = 15
FENCE = re.compile(r"^(`{3,}|:{3,})\{([a-z-]+)\}\s*(.*)$")
OPTION = re.compile(r"^:([a-z-]+):\s*(.*)$")
TEMPLATE = (
    "## Concept goal",
    "## Mental model",
    "## Starter file",
    "## Line-by-line explanation",
    "## What to notice",
    "## Common misunderstandings",
    "## Interview explanation",
    "## Exercises",
    "## Run it (optional)",
    "## Further reading",
)
# Directives whose body is prose a reader reads (the rest hold code, math or options).
PROSE_DIRECTIVES = {
    "{note}",
    "{tip}",
    "{warning}",
    "{important}",
    "{admonition}",
    "{dropdown}",
    "{card}",
    "{tab-item}",
    "{tab-set}",
    "{figure}",
    "{eval-rst}",
    "{rubric}",
    "{list-table}",
    "{table}",
}
# Words that describe how the project was made, not what it teaches.
PROCESS_WORDS = re.compile(
    r"\b(the|an|this|that|open) issue\b|\bissue #?\d|\btickets?\b|\bstored cop(y|ies)\b", re.I
)


@dataclass(frozen=True)
class Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: str


def directives(text: str) -> list[Directive]:
    """The fenced MyST directives of a page, with their options and body."""
    lines = text.splitlines()
    found: list[Directive] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].strip())
        if not match:
            i += 1
            continue
        fence, name, argument = match.groups()
        options: dict[str, str] = {}
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            opt = OPTION.match(lines[i].strip())
            if opt and not body:
                options[opt[1]] = opt[2]
            else:
                body.append(lines[i])
            i += 1
        found.append(Directive(name, argument.strip(), options, "\n".join(body)))
        i += 1
    return found


def object_lines(source: str, dotted: str) -> list[str] | None:
    """The source lines of a top-level function or class (``Class.method`` too), or None."""
    tree = ast.parse(source)
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in dotted.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        scope = node.body  # type: ignore[attr-defined]
    assert isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return source.splitlines()[first - 1 : node.end_lineno]


def marker_lines(source: str, start: str, end: str) -> list[str] | None:
    """The lines strictly between the lines holding *start* and *end*, or None."""
    lines = source.splitlines()
    starts = [i for i, line in enumerate(lines) if start in line]
    if len(starts) != 1:
        return None
    rest = [i for i, line in enumerate(lines) if end in line and i > starts[0]]
    return lines[starts[0] + 1 : rest[0]] if rest else None


def included_code(directive: Directive, page: Path) -> tuple[Path, list[str]]:
    """The module file and the lines a package ``literalinclude`` shows."""
    target = (page.parent / directive.argument).resolve()
    source = target.read_text(encoding="utf-8")
    where = f"{page.name}: {directive.argument}"
    if "pyobject" in directive.options:
        shown = object_lines(source, directive.options["pyobject"])
        assert shown is not None, f"{where} has no object {directive.options['pyobject']}"
    else:
        assert "start-after" in directive.options and "end-before" in directive.options, (
            f"{where}: include package code by :pyobject: or by named start/end markers"
        )
        shown = marker_lines(
            source, directive.options["start-after"], directive.options["end-before"]
        )
        assert shown, f"{where}: markers {directive.options} not found once, in order"
    return target, shown


def prose_words(text: str) -> int:
    """Words a reader reads on the page: prose, captions and notes; not code or options."""
    words = 0
    stack: list[tuple[str, bool]] = []  # open fences: (fence, holds code)
    for line in text.splitlines():
        stripped = line.strip()
        opening = re.match(r"^(`{3,}|:{3,})(\{[a-z-]+\}|[a-z]*)", stripped)
        if stack and stripped == stack[-1][0]:
            stack.pop()
            continue
        if opening and (opening[2] or opening[1][0] == "`"):
            kind = opening[2]
            code = kind not in PROSE_DIRECTIVES
            stack.append((opening[1], code or any(c for _, c in stack)))
            continue
        if (stack and stack[-1][1]) or OPTION.match(stripped):
            continue
        words += len(re.findall(r"[A-Za-z0-9][\w'’.-]*", line))
    return words


@pytest.fixture(params=LABS, ids=lambda item: item.label)
def lab_page(request: pytest.FixtureRequest) -> Path:
    return HANDBOOK / f"{request.param.page}.md"


def test_a_lab_page_never_pulls_a_whole_module(lab_page: Path) -> None:
    assert "automodule" not in lab_page.read_text(encoding="utf-8")


def test_a_lab_page_shows_its_modules_code_by_reference(lab_page: Path) -> None:
    text = lab_page.read_text(encoding="utf-8")
    includes = [
        d
        for d in directives(text)
        if d.name == "literalinclude" and "labs_src/infralens/" in d.argument
    ]
    assert includes, f"{lab_page.name} includes no code from labs_src/infralens"
    shown: list[str] = []
    for directive in includes:
        target, lines = included_code(directive, lab_page)
        assert target.parent in (PACKAGE, PACKAGE / "planner"), target
        shown += lines
    code = [line for line in shown if line.strip()]
    assert len(code) >= MIN_CODE_LINES, f"{lab_page.name} shows {len(code)} lines of code"
    assert any(re.match(r"\s*(def|class) ", line) for line in code)


def test_a_lab_page_pastes_no_python(lab_page: Path) -> None:
    for directive in directives(lab_page.read_text(encoding="utf-8")):
        if directive.name == "code-block" and directive.argument in {"python", "py"}:
            assert not re.search(r"^\s*(def|class) ", directive.body, re.M), lab_page.name
    pasted = re.findall(
        r"^```(?:python|py)\n(.*?)^```", lab_page.read_text(encoding="utf-8"), re.M | re.S
    )
    assert not [p for p in pasted if re.search(r"^\s*(def|class) ", p, re.M)], lab_page.name


def test_a_lab_page_follows_the_template_in_order(lab_page: Path) -> None:
    text = lab_page.read_text(encoding="utf-8")
    positions = [text.find(f"\n{heading}\n") for heading in TEMPLATE]
    assert -1 not in positions, [h for h, p in zip(TEMPLATE, positions, strict=True) if p == -1]
    assert positions == sorted(positions), lab_page.name
    mental = text[positions[1] : positions[2]]
    assert len(re.findall(r"^- ", mental, re.M)) == 3, (
        f"{lab_page.name}: mental model needs 3 bullets"
    )


def test_a_lab_page_has_a_figure_drawn_by_the_package(lab_page: Path) -> None:
    scripts = re.findall(r"\.\. plot:: (\S+\.py)", lab_page.read_text(encoding="utf-8"))
    assert scripts, f"{lab_page.name} has no figure"
    for script in scripts:
        body = (HANDBOOK / "_figures" / script).read_text(encoding="utf-8")
        assert "infralens" in body, f"{script} draws nothing the package computed"


def test_a_lab_page_has_its_central_formula_substituted(lab_page: Path) -> None:
    text = lab_page.read_text(encoding="utf-8")
    assert re.search(r"\$\$|```\{math\}|\{math\}`", text), f"{lab_page.name} shows no formula"


def test_a_lab_page_stays_under_the_reading_length(lab_page: Path) -> None:
    assert prose_words(lab_page.read_text(encoding="utf-8")) <= MAX_WORDS


def test_a_lab_page_speaks_of_the_subject_not_of_how_it_was_made(lab_page: Path) -> None:
    prose = re.sub(r"```.*?```", "", lab_page.read_text(encoding="utf-8"), flags=re.S)
    assert not PROCESS_WORDS.search(prose), PROCESS_WORDS.search(prose)


@pytest.mark.parametrize(
    ("starter", "page"),
    [
        ("parallelism_plan.yaml", "lab-07-3d-parallelism"),
        ("topology_notes.md", "lab-08-topology"),
        ("interview_scenarios.md", "lab-09-interview-scenarios"),
        ("topology_design_worksheet.md", "lab-12-cluster-design"),
    ],
)
def test_the_starter_files_exist_and_their_labs_show_them(starter: str, page: str) -> None:
    assert (STARTERS / starter).is_file(), starter
    text = (HANDBOOK / "labs" / f"{page}.md").read_text(encoding="utf-8")
    shown = [
        d for d in directives(text) if d.name == "literalinclude" and d.argument.endswith(starter)
    ]
    assert shown, f"{page} does not show {starter}"
    assert f"starters/{starter}" in text.replace(shown[0].argument, ""), (
        f"{page} has no link to open {starter}"
    )


def test_the_guard_finds_a_missing_object() -> None:
    source = "def kept():\n    return 1\n\nclass Box:\n    def open(self):\n        pass\n"
    assert object_lines(source, "kept") == ["def kept():", "    return 1"]
    assert object_lines(source, "Box.open") == ["    def open(self):", "        pass"]
    assert object_lines(source, "gone") is None
    assert object_lines(source, "Box.shut") is None
    assert marker_lines("a\n# [start:x]\nb\n# [end:x]\n", "[start:x]", "[end:x]") == ["b"]
    assert marker_lines("a\n# [end:x]\n", "[start:x]", "[end:x]") is None


def test_the_word_count_skips_code_and_options() -> None:
    page = (
        "# Title\n\nTwo words.\n\n```{doctest}\n>>> 1 + 1\n2\n```\n\n"
        "```{literalinclude} x.py\n:pyobject: f\n```\n\n:::{note}\nThree more words\n:::\n"
    )
    assert prose_words(page) == 6


def test_the_reference_holds_every_public_module_once() -> None:
    public = sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        for p in [*PACKAGE.glob("*.py"), *PACKAGE.glob("planner/*.py")]
        if not p.stem.startswith("_")
    )
    documented = sorted(
        name
        for page in (HANDBOOK / "reference" / "api").glob("*.md")
        for name in re.findall(r"^\.\. automodule:: (\S+)$", page.read_text(encoding="utf-8"), re.M)
    )
    assert documented == public
