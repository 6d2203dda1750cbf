"""The built lab pages read as code readings: code on the page, little API text, short.

Run by `nox -s browser` on the site it builds (``INFRALENS_SITE``); the pages
are parsed with the standard library, no browser needed. The page-source guard
is ``tests/test_lab_pages.py``; this one checks what a reader actually gets.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from infralens.labs import LABS

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("INFRALENS_SITE", ROOT / "build" / "html"))
PACKAGE = ROOT / "labs_src" / "infralens"
MAX_WORDS = 2500
MIN_CODE_LINES = 15
MAX_API_SHARE = 0.25
WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")
PROCESS_WORDS = re.compile(
    r"\b(the|an|this|that|open) issue\b|\bissue #?\d|\btickets?\b|\bstored cop(y|ies)\b", re.I
)


class ArticleText(HTMLParser):
    """Collect an article's prose, its Python code blocks and its API-reference text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []  # (tag, role) of open elements
        self.prose: list[str] = []
        self.api: list[str] = []
        self.code_blocks: list[str] = []
        self._code: list[str] | None = None

    def _roles(self) -> set[str]:
        return {role for _, role in self.stack}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"br", "img", "hr", "meta", "link", "input", "wbr"}:
            return
        classes = (dict(attrs).get("class") or "").split()
        role = ""
        if tag == "article":
            role = "article"
        elif tag in {"script", "style"} or {"headerlink", "linenos"} & set(classes):
            # linenos: the line numbers :lineno-match: puts inside a code block
            role = "skip"
        elif tag == "dl" and "py" in classes:
            role = "api"
        elif tag == "div" and "highlight-python" in classes:
            role = "python"
            self._code = []
        elif tag == "pre":
            role = "pre"
        self.stack.append((tag, role))

    def handle_endtag(self, tag: str) -> None:
        if tag not in {open_tag for open_tag, _ in self.stack}:
            return  # a stray end tag closes nothing
        while self.stack:
            open_tag, role = self.stack.pop()
            if role == "python" and self._code is not None:
                self.code_blocks.append("".join(self._code))
                self._code = None
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        roles = self._roles()
        if "article" not in roles or "skip" in roles:
            return
        if "python" in roles and self._code is not None:
            self._code.append(data)
        if "pre" in roles:
            return
        (self.api if "api" in roles else self.prose).append(data)


def parse(page: Path) -> ArticleText:
    parser = ArticleText()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def module_lines() -> set[str]:
    return {
        line.strip()
        for path in PACKAGE.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }


@pytest.fixture(scope="module")
def package_lines() -> set[str]:
    return module_lines()


@pytest.fixture(params=LABS, ids=lambda item: item.label)
def lab_html(request: pytest.FixtureRequest) -> Path:
    page = SITE / f"{request.param.page}.html"
    if not page.exists():
        pytest.fail(f"no built page {page}; run `nox -s browser`, which builds the site first")
    return page


def test_a_built_lab_shows_its_modules_code_verbatim(
    lab_html: Path, package_lines: set[str]
) -> None:
    article = parse(lab_html)
    shown = [
        line.strip()
        for block in article.code_blocks
        if not block.lstrip().startswith(">>>")
        for line in block.splitlines()
        if line.strip()
    ]
    from_package = [line for line in shown if line in package_lines]
    assert len(from_package) >= MIN_CODE_LINES, f"{lab_html.name}: {len(from_package)} lines"
    assert any(re.match(r"(def|class) ", line) for line in from_package), lab_html.name


def test_a_built_lab_is_mostly_reading_not_reference(lab_html: Path) -> None:
    article = parse(lab_html)
    prose = len(WORD.findall(" ".join(article.prose)))
    api = len(WORD.findall(" ".join(article.api)))
    assert prose + api <= MAX_WORDS, f"{lab_html.name}: {prose + api} words"
    assert api <= MAX_API_SHARE * (prose + api), f"{lab_html.name}: {api} of {prose + api}"


def test_no_built_page_speaks_of_how_the_project_was_made() -> None:
    # The bibliography cites other projects' issue threads by their titles; every
    # other page speaks of the subject and of this project only.
    pages = [
        p
        for p in SITE.rglob("*.html")
        if not p.relative_to(SITE).as_posix().startswith("_")
        and p.relative_to(SITE).as_posix() != "reference/bibliography.html"
    ]
    assert pages
    found = {}
    for page in pages:
        hit = PROCESS_WORDS.search(" ".join(parse(page).prose))
        if hit:
            found[page.relative_to(SITE).as_posix()] = hit.group(0)
    assert not found, found


def test_the_parser_sees_code_api_and_prose() -> None:
    html = (
        "<article><p>Two words</p><div class='highlight-python'><pre>"
        "<span class='linenos'>7</span>def f():\n"
        "<span class='linenos'>8</span>    return 1\n</pre></div>"
        "<dl class='py function'><dt>f()</dt><dd>Doc.</dd></dl>"
        "<p>an issue here</p></article>"
    )
    parser = ArticleText()
    parser.feed(html)
    assert parser.code_blocks == ["def f():\n    return 1\n"]
    assert " ".join(parser.api).split() == ["f()", "Doc."]
    assert PROCESS_WORDS.search(" ".join(parser.prose))
