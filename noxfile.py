"""Build, test and lint sessions for InfraLens. `nox -l` lists them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "conf"))
import infralens_runtime_files  # noqa: E402 (conf/ holds the build's helpers)

BUILD = ROOT / "build"
SPHINX = ["-c", "conf", "-n", "-W", "--keep-going"]
# Parallel read and write (`nox -s docs` and the browser build); figures come from
# build/figure-cache unless their script or the package changed (conf/infralens_figcache.py).
PARALLEL = ["-j", "auto"]
TEX_PACKAGES = (
    "latexmk texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended tex-gyre"
)

nox.options.sessions = [
    "tests",
    "doctest",
    "lint",
    "docs",
    "pdf",
    "epub",
    "browser",
    "reproducible",
]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


def _runtime(session: nox.Session) -> None:
    """Pyodide's core runtime, pinned and checked, for the pages' Run controls.

    `npm pack` takes the pinned `pyodide` package from the npm registry once into
    build/runtime/; its sha512 must equal the pinned integrity
    (conf/infralens_runtime_files.py). That Pyodide, under Node, then compiles its own
    standard library to bytecode once, so the pages' interpreter starts without compiling
    it. The HTML build copies both, with the package's wheel built from the working tree,
    to _static/.
    """
    if (
        infralens_runtime_files.have_pyodide()
        and infralens_runtime_files.compiled_stdlib().exists()
    ):
        return
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        session.error("npm not found; install Node.js and npm: apt-get install npm")
    if not infralens_runtime_files.have_pyodide():
        session.log(f"fetching pyodide@{infralens_runtime_files.PYODIDE_VERSION} with npm pack")
        infralens_runtime_files.fetch_pyodide(npm)
    session.log("compiling Pyodide's standard library to bytecode, with Pyodide under Node")
    infralens_runtime_files.compile_stdlib(node)
    for made in (
        infralens_runtime_files.write_wheel(infralens_runtime_files.RUNTIME),
        infralens_runtime_files.write_page_files(infralens_runtime_files.RUNTIME),
    ):
        session.log(f"wrote {made.relative_to(ROOT)}")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the HTML handbook into build/html (warnings are errors)."""
    _runtime(session)
    session.install("-e", ".[docs]")
    # The citation labels the build prints (needs the docs' pybtex): no two alike;
    # docstring formulas one line each (needs docutils).
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_citations.py",
        "tests/test_docformulas.py",
    )
    session.run("sphinx-build", "-b", "html", *SPHINX, *PARALLEL, "handbook", str(BUILD / "html"))
    session.log(f"open {BUILD / 'html' / 'index.html'}")


@nox.session
def browser(session: nox.Session) -> None:
    """Build the HTML, serve it on 127.0.0.1 and check every page in headless Chromium."""
    for tool in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not Path(tool).exists():
            session.error(f"{tool} not found; install it: apt-get install chromium chromium-driver")
    _runtime(session)
    session.install("-e", ".[docs,browser]")
    site = BUILD / "html-browser"
    session.run("sphinx-build", "-b", "html", *SPHINX, *PARALLEL, "-q", "handbook", str(site))
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--override-ini",
        "addopts=-ra",
        "tests/browser",
        env={"INFRALENS_SITE": str(site)},
    )
    report = BUILD / "browser-runtime.json"
    if report.exists():  # the pages' Python: click to first output, the planner, bytes added
        session.log(f"{report.relative_to(ROOT)}: {report.read_text(encoding='utf-8')}")


@nox.session
def reproducible(session: nox.Session) -> None:
    """Build the HTML twice from scratch with one SOURCE_DATE_EPOCH; the outputs must match."""
    import filecmp

    _runtime(session)
    session.install("-e", ".[docs]")
    env = {"SOURCE_DATE_EPOCH": "1767225600", "PYTHONHASHSEED": "0"}
    outputs = [BUILD / "repro-a", BUILD / "repro-b"]
    for out in outputs:
        shutil.rmtree(out, ignore_errors=True)
        session.run(
            "sphinx-build", "-b", "html", *SPHINX, "-q", "-E", "handbook", str(out), env=env
        )
    skip = {".doctrees", ".buildinfo"}
    a_files = {p.relative_to(outputs[0]) for p in outputs[0].rglob("*") if p.is_file()}
    b_files = {p.relative_to(outputs[1]) for p in outputs[1].rglob("*") if p.is_file()}
    a_files = {p for p in a_files if not skip & set(p.parts)}
    b_files = {p for p in b_files if not skip & set(p.parts)}
    differ = sorted(str(p) for p in a_files ^ b_files)
    differ += sorted(
        str(p)
        for p in a_files & b_files
        if not filecmp.cmp(outputs[0] / p, outputs[1] / p, shallow=False)
    )
    if differ:
        session.error("builds differ in: " + ", ".join(differ[:20]))
    session.log(f"{len(a_files)} files byte-identical across two clean builds")


@nox.session
def pdf(session: nox.Session) -> None:
    """Build the PDF handbook into build/latex/infralens.pdf through latexmk."""
    if shutil.which("latexmk") is None or shutil.which("pdflatex") is None:
        session.error(f"latexmk or pdflatex not found; install TeX: apt-get install {TEX_PACKAGES}")
    if shutil.which("pdftotext") is None:  # tests/test_pdf_output.py reads the PDF back
        session.error("pdftotext not found; install it: apt-get install poppler-utils")
    session.install("-e", ".[docs]")
    # No figure text under 7 pt at the size the page prints it (no TeX needed).
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_figure_print.py",
        env={"INFRALENS_REQUIRE_FIGURES": "1"},
    )
    session.run("sphinx-build", "-M", "latexpdf", "handbook", str(BUILD), *SPHINX)
    # Every table row in the PDF's text, no box past its column, no raw LaTeX.
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_pdf_output.py",
        env={"INFRALENS_REQUIRE_PDF": "1"},
    )
    session.log(f"PDF: {BUILD / 'latex' / 'infralens.pdf'}")


EPUB_PACKAGES = "epubcheck dvisvgm"
EPUBCHECK_JAR = Path("/usr/share/java/epubcheck.jar")


@nox.session
def epub(session: nox.Session) -> None:
    """Build build/epub/InfraLens.epub (math as SVG through LaTeX) and check it with epubcheck."""
    install = f"apt-get install {EPUB_PACKAGES} {TEX_PACKAGES}"
    for tool in ("java", "dvisvgm", "latex"):
        if shutil.which(tool) is None:
            session.error(f"{tool} not found; install it: {install}")
    if not EPUBCHECK_JAR.exists():
        session.error(f"{EPUBCHECK_JAR} not found; install it: {install}")
    session.install("-e", ".[docs]")
    out = BUILD / "epub"
    session.run("sphinx-build", "-b", "epub", *SPHINX, "handbook", str(out))
    book = out / "InfraLens.epub"  # conf.py: epub_basename
    # Debian's /usr/bin/epubcheck is the jar itself (run through binfmt), so call java.
    session.run("java", "-jar", str(EPUBCHECK_JAR), "--failonwarnings", str(book), external=True)
    session.log(f"EPUB: {book}")


@nox.session
def doctest(session: nox.Session) -> None:
    """Run the package's docstring examples (pytest) and the pages' {doctest} blocks (Sphinx)."""
    session.install("-e", ".[docs]")
    session.run("pytest", "-q", "--doctest-modules", "labs_src/infralens", "-p", "no:cacheprovider")
    session.run("sphinx-build", "-b", "doctest", *SPHINX, "handbook", str(BUILD / "doctest"))


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, property, paper-table and runtime-agreement tests (torch on CPU, gloo)."""
    session.install("-e", ".[tests]")
    session.run("pytest", *(session.posargs or ["tests"]), env={"INFRALENS_REQUIRE_TORCH": "1"})


@nox.session
def fuzz(session: nox.Session) -> None:
    """The input contract (tests/test_contract.py) and the planner's relations
    (tests/test_relations.py) with a bigger budget, shrinking any failure to its
    smallest job; prints the contract cases run. `nox -s tests` runs the relations
    at a small budget."""
    session.install("-e", ".[tests]")
    examples = session.posargs[0] if session.posargs else "250"
    report = BUILD / "fuzz-cases.txt"
    report.parent.mkdir(exist_ok=True)
    report.unlink(missing_ok=True)
    env = {"INFRALENS_FUZZ_EXAMPLES": examples, "INFRALENS_FUZZ_REPORT": str(report)}
    files = ("tests/test_contract.py", "tests/test_relations.py")
    session.run("pytest", "-q", "-p", "no:cacheprovider", *files, env=env)
    counts = [int(line.split()[1]) for line in report.read_text().splitlines()]
    session.log(f"{sum(counts)} cases over {len(counts)} callables ({examples} examples each)")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, and mypy --strict on the package."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "--strict", "labs_src/infralens")


@nox.session(name="docs-live")
def docs_live(session: nox.Session) -> None:
    """Serve the HTML handbook on 127.0.0.1 and rebuild on every edit."""
    _runtime(session)
    session.install("-e", ".[docs,live]")
    session.run(
        "sphinx-autobuild",
        *SPHINX,
        "--host",
        "127.0.0.1",
        "--watch",
        "labs_src",
        "handbook",
        str(BUILD / "html-live"),
    )
