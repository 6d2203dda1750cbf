"""Generated parts of pages: per-page provenance lines and the landing page's lab list.

Provenance: under the title of every lab and handbook section, one line says
what the page's numbers were checked against. It is computed, never typed:
the test files are parsed (ast, no torch needed) for the ``infralens`` modules
they import; a page's modules come from :mod:`infralens.labs`; a runtime test
that imports one of them is a check against PyTorch (the version pinned in
pyproject.toml), a test that reads a file from ``tests/data`` is a check
against published measurements, and a test file that names a paper's table
(``Narayanan et al. 2021, Table 1``) is a check against that table.

:func:`provenance` is plain Python so ``tests/test_landing.py`` can check that
it covers every page; :func:`setup` makes it a Sphinx extension (conf.py loads
it) that inserts the line after each page's first title.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infralens.labs import LABS, MODEL_ARITHMETIC_MODULES, READING_PATHS, SECTIONS

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PAPER_TABLE = re.compile(r"([A-Z][a-z]+ et al\.,? \d{4}),? (Table \d+)")


@dataclass(frozen=True)
class Provenance:
    """What one page's numbers are checked against."""

    torch_version: str
    runtime_tests: tuple[str, ...]  # test ids, file::function
    unit_tests: int  # test functions outside tests/runtime that exercise the modules
    paper_tables: tuple[str, ...]  # "Narayanan et al. 2021, Table 1"
    data_files: tuple[str, ...]  # tests/data file names
    files: tuple[tuple[str, str], ...] = ()  # (test file under tests/, what it checks against)


def page_modules() -> dict[str, tuple[str, ...]]:
    """Each lab and section page's modules (document name -> dotted module names)."""
    pages: dict[str, tuple[str, ...]] = {SECTIONS[0]: MODEL_ARITHMETIC_MODULES}
    for item in LABS:
        pages[item.page] = item.modules
        pages[item.section_page] = item.modules
    return pages


def _imported_modules(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "infralens":
                found |= {f"infralens.{alias.name}" for alias in node.names}
            elif node.module.startswith("infralens."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("infralens.")}
    return found


def _test_names(tree: ast.Module) -> list[str]:
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def torch_version() -> str:
    """The torch version the tests extra pins in pyproject.toml."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for requirement in meta["project"]["optional-dependencies"]["tests"]:
        if requirement.startswith("torch=="):
            return str(requirement.removeprefix("torch=="))
    raise ValueError("pyproject.toml must pin torch== in the tests extra")


# A test file importing more modules than this sweeps the whole package (the
# input contract, the CLI attacks); it checks every page alike and names none.
SWEEP_MODULES = 12


def _checking(hits: list[Any], modules: tuple[str, ...]) -> list[Any]:
    """The test files that check a page's modules: named after one, or running torch.

    Many test files import a module in passing (a plan to build a cluster); the
    ones that check it carry its name (``test_fsdp.py``, ``test_fsdp_torch.py``)
    or run it against PyTorch. A page none names falls back to every importer.
    """
    stems = {m.rpartition(".")[2].split("_")[0] for m in modules}
    named = [
        f for f in hits if f[3] and (f[1] or any(stem in f[0].rpartition("/")[2] for stem in stems))
    ]
    return named or [f for f in hits if f[3] and len(f[2]) <= SWEEP_MODULES]


def _against(runtime: bool, data: tuple[str, ...], tables: tuple[str, ...], torch: str) -> str:
    """What one test file checks a page's numbers against, in words."""
    if runtime:
        return f"PyTorch {torch} on gloo"
    if data:
        return "published measurements in " + ", ".join(data)
    if tables:
        return "; ".join(tables)
    return "independent cases and properties"


def provenance() -> dict[str, Provenance]:
    """Every lab and section page's provenance, computed from the test files."""
    files = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if "browser" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        data = tuple(sorted(p.name for p in (TESTS / "data").glob("*.csv") if p.name in text))
        tables = tuple(dict.fromkeys(f"{m[1]}, {m[2]}" for m in PAPER_TABLE.finditer(text)))
        runtime = path.parent.name == "runtime"
        files.append(
            (
                path.relative_to(TESTS).as_posix(),
                runtime,
                _imported_modules(tree),
                _test_names(tree),
                data,
                tables,
            )
        )
    version = torch_version()
    result: dict[str, Provenance] = {}
    for page, modules in page_modules().items():
        wanted = set(modules)
        hits = [f for f in files if f[2] & wanted]
        result[page] = Provenance(
            torch_version=version,
            runtime_tests=tuple(
                f"{f[0].rpartition('/')[2]}::{t}" for f in hits if f[1] for t in f[3]
            ),
            unit_tests=sum(len(f[3]) for f in hits if not f[1]),
            paper_tables=tuple(dict.fromkeys(t for f in hits for t in f[5])),
            data_files=tuple(dict.fromkeys(d for f in hits for d in f[4])),
            files=tuple(
                (f[0], _against(f[1], f[4], f[5], version)) for f in _checking(hits, modules)
            ),
        )
    return result


def module_summary(dotted: str) -> str:
    """The first line of a module's docstring (what its examples compute)."""
    doc = importlib.import_module(dotted).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _title(docname: str) -> str:
    path = ROOT / "handbook" / f"{docname}.md"
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise ValueError(f"{path} has no '# ' title")


def _page_ref(docname: str) -> str:
    return f"{{doc}}`/{docname}`"


def landing_markdown() -> str:
    """The landing page's generated lists: one line per lab, and the three reading paths."""
    # Rubrics, not section headings: a section on the root page would nest every
    # chapter of the PDF under it, since the toctrees follow.
    lines = ["```{rubric} What each lab computes", "```", ""]
    for item in LABS:
        mods = ", ".join(f"{{py:mod}}`{m}`" for m in item.modules)
        lines.append(
            f"- {{ref}}`Lab {item.number:02d} <{item.label}>` "
            f"({{ref}}`section <{item.section}>`), {mods}: {module_summary(item.modules[0])}"
        )
    lines += ["", "```{rubric} Three reading paths", "```", ""]
    intros = {
        "learn it all": "Every section, each followed by its lab.",
        "interview in a week": (
            "Twelve pages, about three hours of reading: the sections on each axis, "
            "placement, memory and step time, then answering aloud and the practice cards."
        ),
        "size and place a real job": (
            "What fits in one GPU, the axes the planner chooses between (ZeRO, "
            "FSDP, tensor, pipeline and context parallelism) and an MoE's expert "
            "layout, how the plan places "
            "ranks, which links its collectives cross, what the step costs, and "
            "what keeps it running."
        ),
    }
    for name, pages in READING_PATHS.items():
        lines += [f"**{name[0].upper()}{name[1:]}.** {intros[name]}", ""]
        lines += [f"{i}. {_page_ref(page)}" for i, page in enumerate(pages, start=1)]
        lines.append("")
    return "\n".join(lines)


def _write_landing(app: Any) -> None:
    text = landing_markdown()
    out = ROOT / "handbook" / "_generated" / "landing.md"
    out.parent.mkdir(exist_ok=True)
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")


# -- Sphinx ----------------------------------------------------------------------


def _provenance_nodes(record: Provenance, docname: str) -> Any:
    from docutils import nodes
    from sphinx import addnodes

    def ref(page: str, text: str) -> Any:
        xref = addnodes.pending_xref(
            "",
            refdomain="std",
            reftype="doc",
            reftarget=f"/reference/{page}",
            refexplicit=True,
            refdoc=docname,
        )
        xref += nodes.inline(text, text)
        return xref

    para = nodes.paragraph(classes=["infralens-provenance"])
    para += nodes.strong("Checked by: ", "Checked by: ")
    targets = {"PyTorch": "verification", "published": "validation"}
    for i, (path, against) in enumerate(record.files):
        if i:
            para += nodes.Text("; ")
        para += nodes.literal(f"tests/{path}", f"tests/{path}")
        para += nodes.Text(" against ")
        target = targets.get(against.split()[0], "bibliography" if "Table" in against else "")
        para += ref(target, against) if target else nodes.Text(against)
    if record.files:
        para += nodes.Text("; ")
    para += nodes.Text("and the doctests shown on the page.")
    return para


def _insert_provenance(app: Any, doctree: Any) -> None:
    from docutils import nodes

    record = app.env.infralens_provenance.get(app.env.docname)
    if record is None:
        return
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        section.insert(section.index(title) + 1, _provenance_nodes(record, app.env.docname))
        return


def next_on_paths(docname: str) -> list[tuple[str, str]]:
    """(path name, next page) for each reading path that goes on after *docname*."""
    found = []
    for name, pages in READING_PATHS.items():
        if docname in pages[:-1]:
            found.append((name, pages[pages.index(docname) + 1]))
    return found


def _insert_next_on_path(app: Any, doctree: Any) -> None:
    """End each page of a reading path with the next page of every path it is on."""
    from docutils import nodes
    from sphinx import addnodes

    docname = app.env.docname
    steps = next_on_paths(docname)
    top = next(iter(doctree.findall(nodes.section)), None)
    if not steps or top is None:
        return
    box = nodes.container(classes=["next-on-path"])
    box += nodes.rubric("Next on this path", "Next on this path")
    items = nodes.bullet_list()
    for name, page in steps:
        para = nodes.paragraph()
        para += nodes.strong(name[0].upper() + name[1:], name[0].upper() + name[1:])
        para += nodes.Text(": ")
        xref = addnodes.pending_xref(
            "", refdomain="std", reftype="doc", reftarget=f"/{page}", refexplicit=False,
            refdoc=docname,
        )  # fmt: skip
        xref += nodes.inline(page, page)
        para += xref
        items += nodes.list_item("", para)
    box += items
    top += box


def _provenance_key(records: dict[str, Provenance]) -> str:
    return hashlib.sha256(repr(sorted(records.items())).encode()).hexdigest()


def _refresh(
    app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Re-read every mapped page when the tests changed what a provenance line says."""
    records = provenance()
    key = _provenance_key(records)
    stale = getattr(env, "infralens_provenance_key", None) != key
    env.infralens_provenance = records
    env.infralens_provenance_key = key
    return sorted(set(records) & set(env.found_docs)) if stale else []


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _write_landing)
    app.connect("env-get-outdated", _refresh)
    app.connect("doctree-read", _insert_provenance)
    app.connect("doctree-read", _insert_next_on_path)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
