"""Lab pages as code readings: rules the build enforces, a source link on every block.

A lab shows its module's code in short pieces, each included by named markers
(``:start-after: [start:name]``) or ``:pyobject:``, each captioned with its
file, and each followed at once by the note that explains it. The notes name
what they explain by the code's own names, so they never cite a line number;
a block never highlights lines by number either. Both would drift the moment a
docstring above them grew by a line.

This extension does three things:

* ``source-read``: on a lab page, a note that cites "line 12" or "lines 3-7",
  or a package block with ``:emphasize-lines:``, ``:lines:`` or no file caption,
  is a build warning (an error under ``-W``). :func:`page_problems` is the one
  rule set; ``tests/test_lab_pages.py`` calls it too.
* ``doctree-resolved`` (HTML): a package block's caption becomes a link to the
  module's source page (``sphinx.ext.viewcode``), at the function or class the
  piece sits in.
* ``doctree-resolved`` (LaTeX, EPUB): dropdowns marked ``:class-container:
  answer`` (the worked answers of exercises and problems) move to an "Answers"
  section at the end of their chapter, and a pointer stays in their place; on
  paper every dropdown would otherwise print open under its question.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "labs_src" / "infralens"
LAB_DOCS = re.compile(r"^labs/lab-\d\d-")
MAX_WIDTH = 84
# "line 12", "lines 3-7", "lines 3–7" as prose cites them.
LINE_CITE = re.compile(r"\blines? \d+(?:\s*[–-]\s*\d+)?\b", re.I)
FENCE = re.compile(r"^(`{3,}|:{3,})\{([a-z-]+)\}\s*(.*)$")
OPTION = re.compile(r"^:([a-z-]+):\s*(.*)$")
NUMBERED_OPTIONS = ("emphasize-lines", "lines", "lineno-start", "lineno-match")


def _blocks(text: str) -> list[tuple[int, str, str, dict[str, str]]]:
    """(line number, directive, argument, options) of every fenced MyST directive."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].strip())
        if not match:
            i += 1
            continue
        start, (fence, name, argument) = i + 1, match.groups()
        options: dict[str, str] = {}
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            opt = OPTION.match(lines[i].strip())
            if opt and not options.get("\0body"):
                options[opt[1]] = opt[2]
            elif lines[i].strip():
                options["\0body"] = "1"
            i += 1
        options.pop("\0body", None)
        found.append((start, name, argument.strip(), options))
        i += 1
    return found


def prose_without_code(text: str) -> str:
    """The page with fenced code, math and directive options blanked (line count kept)."""
    out = []
    fence: list[tuple[str, bool]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if fence and stripped == fence[-1][0]:
            fence.pop()
            out.append("")
            continue
        opening = re.match(r"^(`{3,}|:{3,}|\$\$)(\{[a-z-]+\}|[a-z]*)", stripped)
        if opening and not (opening[1] == "$$" and stripped.endswith("$$") and len(stripped) > 2):
            kind = opening[2]
            code = opening[1][0] in "`$" and kind not in {
                "{note}",
                "{tip}",
                "{admonition}",
                "{dropdown}",
                "{warning}",
                "{important}",
            }
            fence.append((opening[1], code or any(c for _, c in fence)))
            out.append("")
            continue
        if (fence and fence[-1][1]) or OPTION.match(stripped):
            out.append("")
            continue
        out.append(re.sub(r"`[^`]*`", "``", line))
    return "\n".join(out)


def is_package_include(name: str, argument: str) -> bool:
    return name == "literalinclude" and "labs_src/infralens/" in argument


def page_problems(text: str) -> list[tuple[int, str]]:
    """(line, message) for each rule a lab page breaks; empty when it keeps them all.

    >>> page_problems("Line 12 adds the bias.\\n")
    [(1, "a note cites 'Line 12': name the code instead of its line number")]
    >>> page = "```{literalinclude} ../../labs_src/infralens/ddp.py\\n:pyobject: f\\n```\\n"
    >>> page_problems(page)[0][1]
    "a package block without ':caption: infralens/ddp.py'"
    """
    problems: list[tuple[int, str]] = []
    for number, line in enumerate(prose_without_code(text).splitlines(), start=1):
        for cite in LINE_CITE.finditer(line):
            problems.append(
                (number, f"a note cites {cite[0]!r}: name the code instead of its line number")
            )
    for number, name, argument, options in _blocks(text):
        if not is_package_include(name, argument):
            continue
        module = "infralens/" + argument.split("labs_src/infralens/", 1)[1]
        if options.get("caption", "").strip() != module:
            problems.append((number, f"a package block without ':caption: {module}'"))
        for option in NUMBERED_OPTIONS:
            if option in options:
                problems.append(
                    (number, f"a package block with :{option}: (pieces are named, not numbered)")
                )
    return problems


# -- Sphinx ----------------------------------------------------------------------


def _check_source(app: Any, docname: str, source: list[str]) -> None:
    if not LAB_DOCS.match(docname):
        return
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    for line, message in page_problems(source[0]):
        logger.warning(message, location=(docname, line), type="infralens", subtype="labcode")


@cache
def _objects(path: Path) -> tuple[tuple[int, int, str], ...]:
    """(first line, last line, dotted name) of each function and class, methods too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    spans: list[tuple[int, int, str]] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                name = prefix + node.name
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                spans.append((first, node.end_lineno or node.lineno, name))
                if isinstance(node, ast.ClassDef):
                    walk(node.body, name + ".")

    walk(tree.body, "")
    return tuple(spans)


def _anchor(path: Path, shown: str) -> str:
    """The innermost documented object around the first shown line ('' for module level)."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    piece = [line.strip() for line in shown.splitlines()]
    # Where the whole piece sits (its first line alone may recur elsewhere).
    where = next((i + 1 for i in range(len(lines)) if lines[i : i + len(piece)] == piece), 0)
    # viewcode anchors only the objects autodoc documents: public names. The
    # innermost public object around the piece (a class, for a private method).
    objects = _objects(path)
    public = {name for _, _, name in objects if not any(p.startswith("_") for p in name.split("."))}
    inside = [(lo, hi, name) for lo, hi, name in objects if lo <= where <= hi]
    # A private body behind a public entry point (_estimate behind estimate) anchors there.
    inside = [(lo, hi, name.lstrip("_")) if name.lstrip("_") in public else (lo, hi, name)
              for lo, hi, name in inside]  # fmt: skip
    inside = [t for t in inside if t[2] in public]
    return max(inside)[2] if inside else ""


def _link_captions(app: Any, doctree: Any, docname: str) -> None:
    from docutils import nodes

    if app.builder.format != "html" or app.builder.name.startswith("epub"):
        return
    for wrapper in list(doctree.findall(nodes.container)):
        if not wrapper.get("literal_block"):
            continue
        captions = [c for c in wrapper.children if isinstance(c, nodes.caption)]
        blocks = [c for c in wrapper.children if isinstance(c, nodes.literal_block)]
        if not captions or not blocks:
            continue
        source = Path(blocks[0].get("source", ""))
        if source.parent not in (PACKAGE, PACKAGE / "planner"):
            continue
        if not source.name.endswith(".py"):
            continue
        module = ".".join(source.relative_to(PACKAGE.parent).with_suffix("").parts)
        # viewcode writes a page only for a module autodoc documented an object of
        # (its entry in _viewcode_modules, complete once every page is read).
        if not getattr(app.env, "_viewcode_modules", {}).get(module):
            continue
        target = f"_modules/{module.replace('.', '/')}"
        uri = app.builder.get_relative_uri(docname, target)
        anchor = _anchor(source, blocks[0].astext())
        if anchor:
            uri += f"#{anchor}"
        caption = captions[0]
        text = caption.astext()
        title = f"Open {text} in the source view"
        link = nodes.reference(text, "", internal=True, refuri=uri, reftitle=title)
        link += nodes.literal(text, text)
        caption.children = []
        caption += link


def _is_answer(node: Any) -> bool:
    from docutils import nodes

    return bool(
        isinstance(node, nodes.Element)
        and node.get("design_component") == "dropdown"
        and "answer" in node.get("container_classes", [])
    )


def _listing(names: list[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _context(node: Any, top: Any) -> tuple[str | None, str]:
    """The heading an answer sits under (not the page's own) and its list item's number."""
    from docutils import nodes

    heading: str | None = None
    item = ""
    parent = node.parent
    while parent is not None and parent is not top:
        if not item and isinstance(parent, nodes.list_item):
            listing = parent.parent
            if isinstance(listing, nodes.enumerated_list):
                item = str(listing.get("start", 1) + listing.index(parent))
        if heading is None and isinstance(parent, nodes.section):
            title = parent.next_node(nodes.title)
            heading = title.astext() if title is not None else None
        parent = parent.parent
    return heading, item


def _move_answers(root: Any, docname: str) -> None:
    """Move the answer dropdowns under *root* to an "Answers" section at its end.

    *root* is one page: a document (EPUB), or a ``start_of_file`` node of the
    LaTeX builder's single assembled tree; answers of pages nested in it stay
    with their own page.
    """
    from docutils import nodes
    from sphinx import addnodes

    def own(node: Any) -> bool:
        parent = node.parent
        while parent is not None and parent is not root:
            if isinstance(parent, addnodes.start_of_file):
                return False
            parent = parent.parent
        return True

    answers = [n for n in root.findall(_is_answer) if own(n)]
    if not answers:
        return
    top = next((n for n in root.findall(nodes.section) if own(n)), None)
    ident = f"answers-{docname.replace('/', '-')}"
    section = nodes.section(ids=[ident], names=[ident])
    section += nodes.title("Answers", "Answers")
    heading = None
    previous: Any = None
    for number, node in enumerate(answers, start=1):
        titles = [c for c in node.children if isinstance(c, nodes.rubric)]
        label = titles[0].astext().strip() if titles else f"Answer {number}"
        where, item = _context(node, top)
        if where is not None and where != heading:
            # The question's own heading (a card, "Problems", "Exercises") over its answers.
            heading = where
            section += nodes.rubric(where, where, classes=["infralens-answers-for"])
        shown = f"{item}. {label}" if item else label
        anchor = f"{ident}-{number}"
        parent = node.parent
        follows = (
            previous is not None
            and previous.parent is parent
            and parent.index(node) == parent.index(previous) + 1
        )
        if follows:
            # A run of answers under one question gets one pointer: "Points to hit,
            # Answer and Follow-up answer: see Answers ...".
            names = previous["infralens_labels"] + [label]
            previous["infralens_labels"] = names
            previous.children[0].replace_self(nodes.emphasis("", _listing(names)))
            parent.remove(node)
        else:
            pointer = nodes.paragraph(classes=["infralens-answer-pointer"])
            pointer["infralens_labels"] = [label]
            pointer += nodes.emphasis(label, label)
            pointer += nodes.Text(": see ")
            ref = nodes.reference("", "", internal=True, refid=anchor)
            ref += nodes.Text("Answers")
            pointer += ref
            # On paper, latex_show_pagerefs adds the page after the link.
            pointer += nodes.Text(" at the end of this chapter")
            pointer += nodes.Text(".")
            node.replace_self(pointer)
            previous = pointer
        # A target, not the rubric's own id: LaTeX labels targets, not rubrics.
        section += nodes.target("", "", ids=[anchor])
        section += nodes.rubric(shown, shown)
        for child in node.children:
            if child not in titles:
                section += child.deepcopy()
    (top if top is not None else root).append(section)


def _answers_transform() -> Any:
    from sphinx.transforms.post_transforms import SphinxPostTransform

    class AnswersAtChapterEnd(SphinxPostTransform):
        """On paper and in e-readers, answers follow their chapter, not their question."""

        # Before sphinx-design turns dropdowns into HTML <details> (priority 199).
        default_priority = 150
        builders = ("latex", "epub")

        def run(self, **kwargs: Any) -> None:
            from sphinx import addnodes

            files = list(self.document.findall(addnodes.start_of_file))
            if files:  # LaTeX: one tree for the book, a start_of_file node per page
                for page in files:
                    _move_answers(page, page["docname"])
            else:
                docname = self.env.path2doc(self.document["source"]) or "page"
                _move_answers(self.document, docname)

    return AnswersAtChapterEnd


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _check_source)
    app.connect("doctree-resolved", _link_captions)
    app.add_post_transform(_answers_transform())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
