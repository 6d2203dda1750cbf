"""Sphinx configuration for the InfraLens handbook (build with ``-c conf``)."""

from __future__ import annotations

import functools
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "handbook"
sys.path.insert(0, str(ROOT / "labs_src"))  # autodoc and figure scripts import infralens
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the local extension infralens_pages

# -- Project ------------------------------------------------------------------
# The version lives in pyproject.toml only; everything else reads it from there.
_meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
project = "InfraLens"
author = "InfraLens contributors"
copyright = f"{author}; prose CC BY 4.0, code MIT"
release = version = _meta["version"]

# -- Extensions ---------------------------------------------------------------
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    # A source page per module, which every lab code block's caption links to.
    "sphinx.ext.viewcode",
    "sphinx_autodoc_typehints",
    "sphinx_design",
    "sphinx_copybutton",
    "sphinxcontrib.bibtex",
    "matplotlib.sphinxext.plot_directive",
    # Figures keyed by script and package content, kept across clean builds.
    "infralens_figcache",
    # Math images for the EPUB only (e-readers rarely run MathJax); see "EPUB" below.
    "sphinx.ext.imgmath",
    # MathJax served from the build itself (_static/mathjax), never from a CDN.
    "infralens_mathjax",
    # Provenance line under each lab and section title; the landing page's lab list.
    "infralens_pages",
    # Lab pages as code readings: the build's rules, source links, answers at chapter end.
    "infralens_labcode",
    # Author-year citations a reader can tell apart (2026a, 2026b), one list style.
    "infralens_cite",
    # On paper: tables that fit the page, card headings numbered once.
    "infralens_book",
    # Docstrings' aligned formula lines as literal blocks, one line each.
    "infralens_docformulas",
    # HTML only: Run on every example (Pyodide from the build), exercise checks, "Plan a job".
    "infralens_runtime",
]
exclude_patterns = ["_figures", "_generated", "**/.ipynb_checkpoints"]
root_doc = "index"
language = "en"
today_fmt = "%Y-%m-%d"

# -- MyST ---------------------------------------------------------------------
myst_enable_extensions = [
    "amsmath",
    "colon_fence",
    "deflist",
    "dollarmath",
    "fieldlist",
    "substitution",
]

myst_heading_anchors = 3
_year = "2026"


@functools.lru_cache(maxsize=2)
def _held_out(precision: str = "bf16") -> Any:
    """The step model's out-of-sample accuracy on the published runs in *precision*: the
    share within ±15 %, the median miss and the worst, each source predicted with the
    shares fitted on the rest."""
    from infralens.planner.calibration import refit
    from infralens.planner.step_accuracy import accuracy
    from infralens.planner.step_validation import check_run, load_runs

    runs = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
    checks = [check_run(r) for r in runs]
    return accuracy(checks, refit, precision=precision, held_out=True)


myst_substitutions = {
    "version": release,
    # Pages that quote the step model's accuracy take it from the data, not by hand.
    "median_miss": f"{100 * _held_out().median_abs:.1f} %",
    "within_15": f"{100 * _held_out().within:.0f} %",
    "fp8_within": f"{100 * _held_out('fp8').within:.0f} %",
    "fp8_median": f"{100 * _held_out('fp8').median_abs:.1f} %",
    "fp8_worst": f"{100 * _held_out('fp8').worst_error:+.0f} %",
    # The "How to cite" page shows this block; the version comes from pyproject.toml.
    "cite_bibtex": (
        "```bibtex\n"
        "@manual{infralens,\n"
        "  author  = {{InfraLens contributors}},\n"
        "  title   = {InfraLens: an executable handbook of distributed training},\n"
        f"  version = {{{release}}},\n"
        f"  year    = {{{_year}}},\n"
        "  note    = {Prose CC BY 4.0, code MIT}\n"
        "}\n"
        "```"
    ),
}

# -- Cross-references: every reference must resolve (-n) -------------------------
nitpicky = True
# Standard-library and typing names that have no target without intersphinx
# (the build runs offline, so intersphinx is not used).
nitpick_ignore = [
    ("py:class", "fractions.Fraction"),
    ("py:class", "Fraction"),
    ("py:class", "collections.abc.Sequence"),
    ("py:class", "collections.abc.Mapping"),
    ("py:class", "collections.abc.Iterator"),
    ("py:class", "collections.abc.Callable"),
    ("py:class", "T"),
    ("py:data", "Ellipsis"),
]

# sphinx-autodoc-typehints 3.6.1 calls an API that Sphinx 9 deprecates for
# Sphinx 10; the call still works with the pinned Sphinx 9.0.4. Silence that one
# deprecation so real warnings stand out.
warnings.filterwarnings(
    "ignore", message=r".*_RstSnippetParser\.set_application.*", module="sphinx_autodoc_typehints"
)

# -- autodoc --------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
autodoc_preserve_defaults = True
typehints_use_signature = False
typehints_use_signature_return = False
always_document_param_types = False

# -- doctest ---------------------------------------------------------------------
# Module docstrings are tested by pytest in their own namespace (nox -s doctest);
# Sphinx tests only the pages' own {doctest} blocks, never autodoc'd docstrings again.
doctest_test_doctest_blocks = ""
doctest_global_setup = "from fractions import Fraction"

# -- Citations -------------------------------------------------------------------
bibtex_bibfiles = [str(SOURCE / "reference" / "references.bib")]
bibtex_default_style = "infralens"
bibtex_reference_style = "author_year"

# -- Figures: matplotlib's plot directive, drawn from the package -----------------
plot_basedir = str(SOURCE / "_figures")
plot_include_source = False
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 144), "pdf"]
plot_rcparams = {"figure.autolayout": True, "svg.hashsalt": "infralens"}
plot_apply_rcparams = True

# -- HTML -----------------------------------------------------------------------
html_theme = "furo"
html_title = f"InfraLens {release}"
html_favicon = str(SOURCE / "_static" / "favicon.svg")
html_static_path = [str(SOURCE / "_static")]
html_css_files = ["infralens.css"]
html_last_updated_fmt = None
html_copy_source = False
html_show_sphinx = False
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# Two math renderers are loaded (MathJax, Sphinx's default, and imgmath), so name
# the HTML one; the EPUB builder reads ``epub_math_renderer`` first (registered in
# setup() below).
html_math_renderer = "mathjax"

# -- EPUB -------------------------------------------------------------------------
# `nox -s epub` builds build/epub/InfraLens.epub and runs epubcheck on it.
epub_basename = "InfraLens"
epub_title = f"InfraLens handbook {release}"
epub_author = author
epub_publisher = author
epub_copyright = copyright
epub_language = language
# epubcheck wants the NCX's uid (epub_uid) to equal the OPF identifier.
epub_identifier = epub_uid = f"infralens-handbook-{release}"
epub_show_urls = "footnote"
epub_description = _meta["description"]
# Math becomes SVG images drawn by LaTeX and dvisvgm (apt-get install dvisvgm),
# files in the book, not data: URLs; every reader that shows EPUB 3 images shows them.
epub_math_renderer = "imgmath"
imgmath_image_format = "svg"
imgmath_embed = False
imgmath_font_size = 12
imgmath_latex_preamble = r"\usepackage{amsmath,amssymb}"
# The plot directive also writes each figure as PDF for LaTeX; PDF is no EPUB
# media type, so the EPUB builder skips those files (the PNGs go in).
suppress_warnings = ["epub.unknown_project_files"]

# -- LaTeX / PDF -----------------------------------------------------------------
latex_engine = "pdflatex"
latex_documents = [("index", "infralens.tex", "InfraLens handbook", author, "manual")]
latex_show_urls = "footnote"
# On paper a cross-reference also says where it goes: "... (page 42)".
latex_show_pagerefs = True
latex_elements = {
    # The index at 8 pt and ragged: a method's full dotted class name
    # (infralens.planner.step_validation.TrainingRun) fits its column.
    "printindex": r"\footnotesize\raggedright\printindex",
    "papersize": "a4paper",
    "pointsize": "10pt",
    "releasename": "Version",
    # Highlighted code lines: a band darker than the code background (pale cyan is
    # lighter than it in greyscale) and a rule in the margin (preamble below).
    "sphinxsetup": "verbatimwrapslines=true, verbatimforcewraps=true, "
    "VerbatimHighlightColor={RGB}{200,222,235}",
    # code at 8 pt: a package line (ruff's 100 columns) fits the box with its number
    "fvset": r"\fvset{fontsize=\footnotesize}",
    # Chapter heads with digits ("Chapter 1"), not spelled-out words.
    "fncychap": "",
    "preamble": r"""
\DeclareUnicodeCharacter{03A8}{\ensuremath{\Psi}}
\DeclareUnicodeCharacter{03C8}{\ensuremath{\psi}}
\DeclareUnicodeCharacter{03A3}{\ensuremath{\Sigma}}
\DeclareUnicodeCharacter{03B1}{\ensuremath{\alpha}}
\DeclareUnicodeCharacter{03B2}{\ensuremath{\beta}}
\DeclareUnicodeCharacter{03B4}{\ensuremath{\delta}}
\DeclareUnicodeCharacter{03C4}{\ensuremath{\tau}}
\DeclareUnicodeCharacter{03B3}{\ensuremath{\gamma}}
\DeclareUnicodeCharacter{2202}{\ensuremath{\partial}}
\DeclareUnicodeCharacter{2190}{\ensuremath{\leftarrow}}
\DeclareUnicodeCharacter{2192}{\ensuremath{\rightarrow}}
\DeclareUnicodeCharacter{2070}{\ensuremath{^{0}}}
\DeclareUnicodeCharacter{2075}{\ensuremath{^{5}}}
\DeclareUnicodeCharacter{2077}{\ensuremath{^{7}}}
\DeclareUnicodeCharacter{2078}{\ensuremath{^{8}}}
\DeclareUnicodeCharacter{2079}{\ensuremath{^{9}}}
\DeclareUnicodeCharacter{2082}{\ensuremath{_{2}}}
\DeclareUnicodeCharacter{221A}{\ensuremath{\surd}}
\DeclareUnicodeCharacter{2248}{\ensuremath{\approx}}
\DeclareUnicodeCharacter{2264}{\ensuremath{\leq}}
\DeclareUnicodeCharacter{2265}{\ensuremath{\geq}}
\DeclareUnicodeCharacter{2260}{\ensuremath{\neq}}
\DeclareUnicodeCharacter{2218}{\ensuremath{\circ}}
\DeclareUnicodeCharacter{2212}{\ensuremath{-}}
\DeclareUnicodeCharacter{2308}{\ensuremath{\lceil}}
\DeclareUnicodeCharacter{2309}{\ensuremath{\rceil}}
\DeclareUnicodeCharacter{230A}{\ensuremath{\lfloor}}
\DeclareUnicodeCharacter{230B}{\ensuremath{\rfloor}}
\DeclareUnicodeCharacter{2211}{\ensuremath{\sum}}
\DeclareUnicodeCharacter{1D40}{\ensuremath{^{\mathsf{T}}}}
\DeclareUnicodeCharacter{1D62}{\ensuremath{_{i}}}
\DeclareUnicodeCharacter{1E21}{\ensuremath{\bar{g}}}
\DeclareUnicodeCharacter{207B}{\ensuremath{^{-}}}
% A book's furniture: "Contents", blank versos without heads, figures and
% tables numbered by chapter, and unique link targets when parts restart the
% chapter numbers.
\addto\captionsenglish{\renewcommand{\contentsname}{Contents}}
\usepackage{emptypage}
\AtBeginDocument{\counterwithin{figure}{chapter}\counterwithin{table}{chapter}}
\AtBeginDocument{\def\theHchapter{\arabic{part}.\thechapter}}
% A break opportunity that prints nothing (long names in table cells).
\DeclareUnicodeCharacter{200B}{\hspace{0pt}}
% Long inline literals (test ids, dotted names) may break after _ { } ^ & > ~ \
% as code blocks already do, instead of running into the margin.
% A highlighted code line (emphasize-lines) also carries a rule left of the code.
\let\infralenshlline\sphinxVerbatimHighlightLine
\renewcommand\sphinxVerbatimHighlightLine[1]{%
  \llap{{\color[gray]{0.25}\vrule width 2pt height \ht\strutbox depth \dp\strutbox}%
    \hspace{3pt}}\infralenshlline{#1}}
\let\infralensupquote\sphinxupquote
\DeclareRobustCommand{\sphinxupquote}[1]{{\sphinxbreaksattexescapedchars\infralensupquote{#1}}}
""",
}


# -- LaTeX: signature abbreviations -----------------------------------------------
# Sphinx marks the bare "*" and "/" of a signature as abbreviations whose
# explanation ("Keyword-only parameters separator (PEP 3102)") LaTeX prints
# inline after every keyword-only signature. HTML keeps them as tooltips.


def _drop_signature_abbreviations(app: object, doctree: object, docname: str) -> None:
    from docutils import nodes

    if getattr(app, "builder", None) is None or app.builder.format != "latex":  # type: ignore[attr-defined]
        return
    for node in list(doctree.findall(nodes.abbreviation)):  # type: ignore[attr-defined]
        node.replace_self(nodes.Text(node.astext()))


# -- Generated page parts: tables computed by the package at build time ------------
# Each entry is a file under handbook/_generated/ that a page includes with
# ```{include}```, and the function that writes its MyST text. They are the
# functions the tests call, so a page and the test suite cannot disagree.
# Written only when the text changes, so a live rebuild does not see a fresh
# file on every pass.


def _nccl_validation() -> str:
    from infralens.validation import check_nccl, load_nccl_rows, markdown_report

    rows = load_nccl_rows(ROOT / "tests" / "data" / "nccl_tests.csv")
    return markdown_report([check_nccl(r) for r in rows])


def _step_validation() -> str:
    from infralens.planner.step_validation import check_run, load_runs, markdown_report

    runs = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
    return markdown_report([check_run(r) for r in runs])


def _step_accuracy() -> str:
    from infralens.planner.calibration import refit
    from infralens.planner.step_accuracy import accuracy_table
    from infralens.planner.step_validation import check_run, load_runs

    runs = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
    return accuracy_table([check_run(r) for r in runs], refit)


def _step_sources() -> str:
    from infralens.planner.calibration import refit
    from infralens.planner.step_accuracy import family_table
    from infralens.planner.step_validation import check_run, load_runs

    runs = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
    return family_table([check_run(r) for r in runs], refit)


def _step_folds() -> str:
    from infralens.planner.calibration import folds_table
    from infralens.planner.step_validation import load_runs

    return folds_table(load_runs(ROOT / "tests" / "data" / "training_runs.csv"))


def _gpu_measurements() -> str:
    from infralens.planner.calibration import measurement_table

    return measurement_table(sorted((ROOT / "tests" / "data" / "gpu").glob("cal-*.json")))


def _step_unpriced() -> str:
    from infralens.planner.step_validation import load_runs, unpriced_report

    path = ROOT / "tests" / "data" / "training_runs.csv"
    return unpriced_report(load_runs(path, unpriced=True))


def _flop_conventions() -> str:
    from infralens.flop_conventions import markdown_table
    from infralens.model import PRESETS

    return markdown_table(PRESETS["llama3-8b"], seq_len=8192)


@functools.lru_cache(maxsize=1)
def _ranks() -> tuple[object, ...]:
    from infralens.planner.published_rank import published_rank
    from infralens.planner.step_validation import load_runs

    runs = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
    return tuple(published_rank(r) for r in runs)


def _published_ranks() -> str:
    from infralens.planner.published_rank import rank_table

    return rank_table(list(_ranks()))  # type: ignore[arg-type]


def _mfu_ceiling() -> str:
    from infralens.planner.published_rank import ceiling_table, mfu_ceiling
    from infralens.planner.step_validation import check_run, load_runs

    runs = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
    checks = [check_run(r) for r in runs]
    return ceiling_table(mfu_ceiling(checks, list(_ranks())))  # type: ignore[arg-type]


def _cheatsheet() -> str:
    from infralens_cheatsheet import cheatsheet_markdown

    return cheatsheet_markdown()


def _lab12_worksheet() -> str:
    from infralens.planner.plan_file import worksheet_page

    return worksheet_page(ROOT / "labs_src" / "starters" / "parallelism_plan.yaml")


def _lab12_blank_worksheet() -> str:
    """Lab 12's starter worksheet as paper prints it: headings as rubrics, not sections
    (a section would take in the page's text after it)."""
    text = (ROOT / "labs_src" / "starters" / "topology_design_worksheet.md").read_text("utf-8")
    lines = text.splitlines()[1:]  # its title: the page's own heading names it
    rubric = [f"```{{rubric}} {x[3:]}\n```" if x.startswith("## ") else x for x in lines]
    return "\n".join(rubric) + "\n"


GENERATED = {
    "nccl_validation.md": _nccl_validation,
    "step_validation.md": _step_validation,
    "step_accuracy.md": _step_accuracy,
    "step_sources.md": _step_sources,
    "step_folds.md": _step_folds,
    "gpu_measurements.md": _gpu_measurements,
    "mfu_ceiling.md": _mfu_ceiling,
    "step_unpriced.md": _step_unpriced,
    "flop_conventions.md": _flop_conventions,
    "published_ranks.md": _published_ranks,
    "cheatsheet.md": _cheatsheet,
    "lab12_worksheet.md": _lab12_worksheet,
    "lab12_blank_worksheet.md": _lab12_blank_worksheet,
}


def _write_generated(app: object) -> None:
    folder = SOURCE / "_generated"
    folder.mkdir(exist_ok=True)
    for name, make in GENERATED.items():
        text = make()
        out = folder / name
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            out.write_text(text, encoding="utf-8")


# -- autodoc: a module-level table is described, not dumped as one long repr --------


def _drop_long_values(app: object, doctree: object) -> None:
    """Drop a constant's ``= value`` from its signature when the value is long.

    A table of presets printed as one repr line is unreadable, and a path is
    this machine's, not the reader's; the docstring
    says what it holds, and the value stays one ``import`` away.
    """
    from sphinx import addnodes

    for sig in doctree.findall(addnodes.desc_signature):  # type: ignore[attr-defined]
        if sig.parent.get("objtype") not in {"data", "attribute"}:
            continue
        for node in list(sig.findall(addnodes.desc_annotation)):
            text = node.astext().strip()
            if text.startswith("=") and (len(text) > 60 or "Path(" in text):
                node.parent.remove(node)


# -- EPUB: interview answers print expanded under their question -------------------
# sphinx-design turns each dropdown into HTML <details> for every HTML-format
# builder, EPUB included, where many readers cannot open it. Before its transform
# (priority 199) runs, unmark the EPUB's dropdowns: they stay plain containers,
# a rubric ("Answer") followed by the answer, which is how the PDF prints them.


class _ExpandDropdownsForEpub(SphinxPostTransform):
    default_priority = 198
    builders = ("epub",)

    def run(self, **kwargs: object) -> None:
        for node in self.document.findall(nodes.container):
            if node.get("design_component") == "dropdown":
                node["design_component"] = "dropdown-expanded"
                node["classes"] = [*node.get("classes", []), "infralens-answer"]


def _epub_plot_css(app: object) -> None:
    """Put matplotlib's plot_directive.css in the book.

    The plot directive copies its stylesheet at build-finished, after the EPUB
    builder has zipped the book, so every page would link a missing file.
    """
    import shutil

    import matplotlib

    if app.builder.name != "epub":  # type: ignore[attr-defined]
        return
    css = Path(matplotlib.get_data_path()) / "plot_directive" / "plot_directive.css"
    static = Path(app.builder.outdir) / "_static"  # type: ignore[attr-defined]
    static.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(css, static / "plot_directive.css")


def setup(app: object) -> None:
    app.connect("builder-inited", _epub_plot_css)  # type: ignore[attr-defined]
    app.add_config_value("epub_math_renderer", None, "html", types=frozenset({str, type(None)}))  # type: ignore[attr-defined]
    app.add_post_transform(_ExpandDropdownsForEpub)  # type: ignore[attr-defined]
    app.connect("doctree-resolved", _drop_signature_abbreviations)  # type: ignore[attr-defined]
    app.connect("builder-inited", _write_generated)  # type: ignore[attr-defined]
    app.connect("doctree-read", _drop_long_values)  # type: ignore[attr-defined]
