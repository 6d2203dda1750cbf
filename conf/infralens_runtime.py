"""Python in the HTML pages: a Run control on every example, checked exercises, a planner.

For HTML builders other than EPUB this extension

* adds ``_static/infralens-run/run.js`` and ``run.css`` to every page: each ``>>>``
  block gets a "Run" button; the first click starts Pyodide in a Web Worker
  (``worker.js``, ``runner.py``), the block becomes editable, and its output
  appears under it;
* copies Pyodide's core runtime (fetched and checked by ``nox``'s runtime step,
  :mod:`infralens_runtime_files`) to ``_static/pyodide/`` and writes the package
  wheel and ``page-files.zip`` from the working tree, so nothing is fetched from
  another host when a page runs;
* renders the ``{exercise-check}`` directive as an answer box (and as nothing in
  the PDF, the EPUB and the other builders);
* writes each lab's examples as a Jupyter notebook (``_static/notebooks/``) and
  links it from the lab page;
* adds the "Plan a job" page (``plan-a-job.html``), a form over
  ``python -m infralens rank`` and ``memory``.

A build without the fetched runtime (a bare ``sphinx-build``) still works; its Run
controls say how to get one.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path
from typing import Any

import infralens_runtime_files as files
from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.util import logging

ROOT = Path(__file__).resolve().parents[1]
STATIC = Path(__file__).resolve().parent / "runtime_static"
LABS = ROOT / "handbook" / "labs"
logger = logging.getLogger(__name__)


def _interactive(app: Any) -> bool:
    return app.builder.format == "html" and app.builder.name not in ("epub", "singlehtml")


# -- The exercise-check directive ------------------------------------------------------


class exercise_check(nodes.General, nodes.Element):
    """An answer box: the reader's value is compared with ``expect`` in the page."""


class ExerciseCheck(Directive):
    """``{exercise-check}``: declare an exercise's answer, computed by the package.

    Options: ``:expect:`` a Python expression, evaluated in the page's namespace after
    the page's examples up to the worked answer that follows have run; ``:kind:``
    ``number`` (default) or ``choice``; ``:choices:`` the choices, separated by ``|``;
    ``:tolerance:`` relative, default 0.01; ``:label:`` what the box asks for;
    ``:why:`` the reason, shown with the verdict.
    """

    has_content = False
    option_spec = {  # noqa: RUF012 (docutils reads a class attribute)
        "expect": directives.unchanged_required,
        "kind": lambda v: directives.choice(v, ("number", "choice")),
        "choices": directives.unchanged,
        "tolerance": directives.unchanged,
        "label": directives.unchanged_required,
        "why": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        opts = dict(self.options)
        for key in ("expect", "label", "why"):
            if key not in opts:
                raise self.error(f"exercise-check needs :{key}:")
        kind = opts.get("kind", "number")
        choices = [c.strip() for c in opts.get("choices", "").split("|") if c.strip()]
        if kind == "choice" and len(choices) < 2:
            raise self.error("a choice check needs :choices: a | b [| ...]")
        try:
            compile(opts["expect"], "<expect>", "eval")
        except SyntaxError as err:
            raise self.error(f":expect: is not a Python expression: {err}") from None
        env = self.state.document.settings.env
        node = exercise_check()
        node["ident"] = f"check-{env.docname.replace('/', '-')}-{env.new_serialno('check')}"
        node.update_all_atts({**opts, "kind": kind, "choices": choices})
        node["tolerance"] = float(opts.get("tolerance", "0.01"))
        return [node]


def _visit_check_html(self: Any, node: exercise_check) -> None:
    if self.builder.name == "epub":
        raise nodes.SkipNode
    ident = node["ident"]
    attrs = " ".join(
        f'data-{k}="{html.escape(str(node[k]), quote=True)}"'
        for k in ("kind", "expect", "tolerance", "why")
    )
    if node["kind"] == "choice":
        options = "".join(
            f'<option value="{html.escape(c, quote=True)}">{html.escape(c)}</option>'
            for c in node["choices"]
        )
        field = (
            f'<select id="{ident}" name="answer"><option value="">choose…</option>'
            f"{options}</select>"
        )
    else:
        field = (
            f'<input id="{ident}" name="answer" type="text" inputmode="decimal" '
            'autocomplete="off" size="12">'
        )
    self.body.append(
        f'<div class="infralens-check-box">'
        f'<form class="infralens-check" {attrs}>'
        f'<label for="{ident}">Your answer ({html.escape(node["label"])}):</label>'
        f'{field}<button type="submit">Check</button></form>'
        '<p class="infralens-verdict" role="status" aria-live="polite"></p></div>\n'
    )
    raise nodes.SkipNode


def _skip(self: Any, node: nodes.Node) -> None:
    raise nodes.SkipNode


# -- Lab notebooks ------------------------------------------------------------------------


def _notebook_link(app: Any, doctree: nodes.document, docname: str) -> None:
    if not _interactive(app) or not docname.startswith("labs/lab-"):
        return
    name = docname.split("/")[-1] + ".ipynb"
    href = f"../_static/notebooks/{name}"
    text = (
        '<p class="infralens-notebook">Run any example on this page, edit it, run it again; '
        f'or take them as a notebook: <a href="{href}" download="{name}">{name}</a>.</p>\n'
    )
    sections = [s for s in doctree.findall(nodes.section)]
    if sections:
        title = sections[0].next_node(nodes.title)
        index = sections[0].index(title) + 1 if title is not None else 0
        sections[0].insert(index, nodes.raw("", text, format="html"))


# -- The "Plan a job" page ---------------------------------------------------------------

# Each column of ``python -m infralens rank`` and the section that explains it.
COLUMN_DOCS = {
    "#": "handbook/12-cluster-design#three-candidate-plans",
    "tp": "handbook/05-tensor-parallel#why-tp-stays-inside-the-nvlink-domain",
    "cp": "handbook/10-context-parallel#tokens-per-rank",
    "pp": "handbook/06-pipeline-parallel#layers-to-stages",
    "dp": "handbook/01-data-parallel#what-is-replicated-and-what-is-split",
    "schedule": "handbook/06-pipeline-parallel#two-ways-to-state-the-bubble",
    "recipe": "handbook/17-memory#bytes-per-parameter-by-recipe",
    "ZeRO": "handbook/03-zero#what-a-rank-stores",
    "recompute": "handbook/17-memory#activations-with-and-without-flashattention",
    "step (s)": "handbook/16-step-time#what-each-axis-leaves-exposed",
    "tokens/s/GPU": "handbook/16-step-time#which-flops-against-which-time",
    "MFU": "handbook/16-step-time#which-flops-against-which-time",
    "GB/GPU": "handbook/17-memory#will-it-fit-llama-3-8b-and-70b-on-8-and-64-h100s",
    "bound by": "handbook/16-step-time#what-each-axis-leaves-exposed",
    "memory": "handbook/17-memory#bytes-per-parameter-by-recipe",
}

# Each bar of plan 1's two charts and the section that explains it: the step's terms
# (``estimate(job).breakdown``) and the busiest GPU's memory (``gpu_memory(job)``).
EXPOSED = "handbook/16-step-time#what-each-axis-leaves-exposed"
TERM_DOCS = {
    "compute": "handbook/16-step-time#the-compute-term-and-the-ceiling-it-runs-at",
    "tp": EXPOSED,
    "cp": EXPOSED,
    "ep": "handbook/11-expert-parallel",
    "pp_bubble": "handbook/06-pipeline-parallel#two-ways-to-state-the-bubble",
    "pp_p2p": EXPOSED,
    "dp": EXPOSED,
    "optimizer": EXPOSED,
    "model_states": "handbook/17-memory#bytes-per-parameter-by-recipe",
    "gathered": "handbook/17-memory#fsdp2-s-transient-bytes",
    "activations": "handbook/17-memory#activations-with-and-without-flashattention",
    "logits": "handbook/17-memory#logits-and-the-loss",
    "grad_buffers": "handbook/17-memory#fsdp2-s-transient-bytes",
}

# The custom shape's fields: ``rank --model``'s shape keys, Llama 3 8B's values at first.
SHAPE_FIELDS = (
    ("layers", "Layers", 32),
    ("hidden", "Hidden size", 4096),
    ("heads", "Attention heads", 32),
    ("kv_heads", "KV heads", 8),
    ("ffn_hidden", "FFN hidden size", 14336),
    ("vocab_size", "Vocabulary", 128256),
)


def _plan_page(app: Any) -> Any:
    if not _interactive(app):
        return
    # The command line's own choices: the names `python -m infralens` accepts.
    from infralens.cli import DEFAULT_RECIPE, HBM_BYTES, PRESETS, RECIPES, SYSTEMS

    def hbm_for(system: Any) -> str:
        """The HBM preset of *system*'s GPU, for ``memory --gpu``."""
        gpu = getattr(system, "gpu", None)
        size, name = getattr(gpu, "hbm_bytes", None), str(getattr(gpu, "name", ""))
        same = [key for key, value in HBM_BYTES.items() if value == size]
        first = name.split()[0].lower() if name else ""
        return next((k for k in same if k.startswith(first)), same[0] if same else "")

    def uri(target: str) -> str:
        doc, _, anchor = target.partition("#")
        return app.builder.get_relative_uri("plan-a-job", doc) + (f"#{anchor}" if anchor else "")

    links = {key: uri(doc) for key, doc in {**COLUMN_DOCS, **TERM_DOCS}.items()}

    def select(name: str, label: str, values: list[tuple[str, str]], chosen: str) -> str:
        opts = "".join(
            f'<option value="{html.escape(v)}"{" selected" if v == chosen else ""}>'
            f"{html.escape(t)}</option>"
            for v, t in values
        )
        return (
            f'<label for="plan-{name}">{label}</label>'
            f'<select id="plan-{name}" name="{name}">{opts}</select>'
        )

    def number(name: str, label: str, value: int) -> str:
        return (
            f'<label for="plan-{name}">{label}</label>'
            f'<input id="plan-{name}" name="{name}" type="text" inputmode="numeric" '
            f'value="{value}" autocomplete="off">'
        )

    hbm_map = {key: hbm_for(system) for key, system in SYSTEMS.items()}
    shape = "".join(number(name, label, value) for name, label, value in SHAPE_FIELDS)
    shape += select("gated_mlp", "Gated MLP (SwiGLU)", [("true", "yes"), ("false", "no")],
                    "true")  # fmt: skip
    custom = (
        '<fieldset class="infralens-plan-shape" hidden><legend>Custom shape (RMSNorm, '
        "rotary positions, no biases, untied output)</legend>"
        f"{shape}</fieldset>"
    )
    form = "".join((
        select("model", "Model",
               [(k, k) for k in PRESETS] + [("custom", "custom shape…")], "llama3-70b"),
        custom,
        select("cluster", "GPU system", [(k, f"{k} ({s.name})") for k, s in SYSTEMS.items()],
               "dgx-h100"),
        number("gpus", "GPUs", 64),
        number("seq-len", "Sequence length (tokens)", 4096),
        number("global-batch", "Global batch (sequences)", 512),
        number("micro-batch", "Micro-batch (sequences)", 1),
        select("recipe", "Precision and framework recipe",
               [("", f"{DEFAULT_RECIPE} or fsdp2, the faster")] + [(k, k) for k in RECIPES], ""),
        select("tp-comm-overlap", "TP communication",
               [("", "exposed"), ("on", "under the GEMMs (--tp-comm-overlap)")], ""),
        select("gpu", "GPU memory (for the memory check)", [(k, k) for k in HBM_BYTES],
               hbm_map["dgx-h100"]),
    ))  # fmt: skip
    body = f"""
<section id="plan-a-job">
<h1>Plan a job<a class="headerlink" href="#plan-a-job" title="Link to this heading">¶</a></h1>
<p>Describe a training job and the page ranks its parallel plans with the handbook's
own package, in your browser: the table is what
<code>python -m infralens rank</code> prints for the same inputs; under it, plan 1's
step time by cause and its busiest GPU's memory by component as two bar charts, then
its memory, groups, worksheet and step time as <code>python -m infralens memory</code>
and <code>plan</code> print them. Each column heading, each number and each bar's label
links to the section that explains it. The inputs go into the page's address, so a plan
can be shared as a link. A model is one of the package's presets or a custom shape, which the page
passes to <code>rank --model</code> as <code>layers=…,hidden=…,…</code>.</p>
<form class="infralens-plan" data-links="{html.escape(json.dumps(links), quote=True)}"
 data-hbm="{html.escape(json.dumps(hbm_map), quote=True)}">
{form}
<div class="infralens-plan-actions"><button type="submit">Rank the plans</button></div>
</form>
<p class="infralens-plan-command"><code></code></p>
<div class="infralens-plan-result" role="status" aria-live="polite"></div>
</section>
<script defer src="_static/infralens-run/plan.js"></script>
"""
    yield (
        "plan-a-job",
        {"title": "Plan a job", "body": body},
        "page.html",
    )


# -- Assets -----------------------------------------------------------------------------


def _register(app: Any) -> None:
    if not _interactive(app):
        return
    wheel = files.wheel_name() if files.have_pyodide() else ""
    if not wheel:
        logger.info(
            "infralens_runtime: no Pyodide in %s; `nox -s docs` fetches it, and the "
            "Run controls of this build say so",
            files.pyodide_dir(),
        )
    app.add_css_file("infralens-run/run.css")
    app.add_js_file("infralens-run/run.js", defer="defer", **{"data-wheel": wheel})


def _copy_if_changed(source: Path, target: Path) -> None:
    if (
        target.exists()
        and target.stat().st_size == source.stat().st_size
        and (target.read_bytes() == source.read_bytes())
    ):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def _write_assets(app: Any, exc: BaseException | None) -> None:
    if exc is not None or not _interactive(app):
        return
    static = Path(app.outdir) / "_static"
    run = static / "infralens-run"
    for source in sorted(STATIC.iterdir()):
        if source.is_file():
            _copy_if_changed(source, run / source.name)
    notebooks = static / "notebooks"
    notebooks.mkdir(parents=True, exist_ok=True)
    for page in sorted(LABS.glob("lab-*.md")):
        out = notebooks / (page.stem + ".ipynb")
        text = files.notebook(page)
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            out.write_text(text, encoding="utf-8")
    if not files.have_pyodide():
        return
    compiled = files.compiled_stdlib()
    for name in files.PYODIDE_FILES:
        source = files.pyodide_dir() / name
        if name == "python_stdlib.zip" and compiled.is_file():
            source = compiled  # the same sources, each with its bytecode beside it
        _copy_if_changed(source, static / "pyodide" / name)
    runtime = ROOT / "build" / "runtime"
    made = [
        files.write_wheel(runtime),
        files.write_page_files(runtime),
        files.write_pyyaml(runtime),
    ]
    for path in made:
        if path is not None:
            _copy_if_changed(path, run / path.name)


def setup(app: Any) -> dict[str, Any]:
    app.add_node(
        exercise_check,
        html=(_visit_check_html, None),
        latex=(_skip, None),
        text=(_skip, None),
        man=(_skip, None),
        texinfo=(_skip, None),
    )
    app.add_directive("exercise-check", ExerciseCheck)
    app.connect("builder-inited", _register)
    app.connect("doctree-resolved", _notebook_link)
    app.connect("html-collect-pages", _plan_page)
    app.connect("build-finished", _write_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
