"""Publishing metadata agrees with itself, and every page stands on cited sources."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "handbook"
BIB = HANDBOOK / "reference" / "references.bib"
CONTENT_DIRS = ("handbook", "labs", "interview")


def pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def bib_entries() -> dict[str, str]:
    text = BIB.read_text(encoding="utf-8")
    starts = list(re.finditer(r"^@(\w+)\{([^,]+),", text, flags=re.M))
    ends = [m.start() for m in starts[1:]] + [len(text)]
    return {m[2]: text[m.start() : end] for m, end in zip(starts, ends, strict=True)}


def content_pages() -> list[Path]:
    return sorted(p for d in CONTENT_DIRS for p in (HANDBOOK / d).glob("*.md"))


def test_citation_cff_and_changelog_carry_the_pyproject_version() -> None:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == pyproject_version()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    # An "Unreleased" section may sit above the latest release; the release is the version.
    headings = re.findall(r"^## (\S+)", changelog, flags=re.M)
    released = [h for h in headings if h != "Unreleased"]
    assert headings[: len(headings) - len(released)] in ([], ["Unreleased"]), headings[:2]
    assert released and released[0] == pyproject_version()


def test_bibliography_is_large_enough_and_every_entry_is_traceable() -> None:
    entries = bib_entries()
    assert len(entries) >= 20
    traceable = re.compile(r"\b(doi|eprint|url)\s*=")
    untraceable = [key for key, body in entries.items() if not traceable.search(body)]
    assert not untraceable, f"entries without doi, eprint or url: {untraceable}"


def test_every_cited_key_exists() -> None:
    keys = set(bib_entries())
    cited: set[str] = set()
    for page in HANDBOOK.rglob("*.md"):
        for group in re.findall(r"\{cite:\w+\}`([^`]+)`", page.read_text(encoding="utf-8")):
            cited |= {k.strip() for k in group.split(",")}
    assert cited <= keys, sorted(cited - keys)


@pytest.mark.parametrize("page", content_pages(), ids=lambda p: p.relative_to(HANDBOOK).as_posix())
def test_every_content_page_cites_a_source(page: Path) -> None:
    assert re.search(r"\{cite:\w+\}`", page.read_text(encoding="utf-8")), f"{page} cites nothing"


def glossary_entries() -> list[list[str]]:
    """Each entry's names: consecutive unindented lines are aliases of one entry."""
    text = (HANDBOOK / "reference" / "glossary.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    entries: list[list[str]] = []
    previous_was_term = False
    for line in block.splitlines():
        is_term = bool(line) and not line.startswith((" ", ":"))
        if is_term and previous_was_term:
            entries[-1].append(line)
        elif is_term:
            entries.append([line])
        previous_was_term = is_term
    return entries


def test_every_glossary_term_is_used_somewhere() -> None:
    used: set[str] = set()
    for page in HANDBOOK.rglob("*.md"):
        for ref in re.findall(r"\{term\}`([^`]+)`", page.read_text(encoding="utf-8")):
            used.add(" ".join(ref.split("<")[-1].rstrip(">").split()).lower())
    unused = [names for names in glossary_entries() if not {n.lower() for n in names} & used]
    assert not unused, f"glossary terms no page links with {{term}}: {unused}"


def conf_settings() -> dict[str, object]:
    """conf.py's top-level settings, evaluated without Sphinx (parsed with ast).

    Only assignments whose values use literals and earlier settings are evaluated;
    ``release`` comes from pyproject.toml, as conf.py reads it.
    """
    import ast

    tree = ast.parse((ROOT / "conf" / "conf.py").read_text(encoding="utf-8"))
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    namespace: dict[str, object] = {"_meta": meta, "release": meta["version"]}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        try:
            value = eval(compile(ast.Expression(node.value), "conf.py", "eval"), {}, namespace)
        except Exception:
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                namespace[target.id] = value
    return namespace


def test_epub_metadata_carries_the_title_and_pyproject_version() -> None:
    conf = conf_settings()
    version = pyproject_version()
    assert conf["epub_basename"] == "InfraLens"
    assert conf["epub_title"] == f"InfraLens handbook {version}"
    assert conf["epub_author"] == conf["author"] == "InfraLens contributors"
    assert conf["epub_language"] == conf["language"] == "en"
    # epubcheck (NCX-001) needs the NCX uid to equal the OPF identifier.
    assert conf["epub_identifier"] == conf["epub_uid"]
    assert version in str(conf["epub_identifier"])
    assert re.fullmatch(r"[A-Za-z_][\w.-]*", str(conf["epub_uid"])), "epub_uid must be an XML name"
    # Math: SVG images in the EPUB, MathJax in the HTML.
    assert conf["epub_math_renderer"] == "imgmath"
    assert conf["imgmath_image_format"] == "svg"
    assert conf["html_math_renderer"] == "mathjax"


def test_epub_file_name_agrees_across_nox_ci_and_read_the_docs() -> None:
    name = f"{conf_settings()['epub_basename']}.epub"
    assert f'out / "{name}"' in (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert " epub " in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    rtd = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    commands = "\n".join(rtd["build"]["commands"])
    assert f"_build/epub/{name} $READTHEDOCS_OUTPUT/epub/" in commands
    assert "-b epub -c conf -n -W --keep-going" in commands
