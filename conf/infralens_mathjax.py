"""Serve MathJax from the build itself: no CDN, no request to another host.

The MathJax 3 files come from the pip package ``sphinx-mathjax-offline`` (pinned
in the docs extra). Its own Sphinx extension does the same copy but declares no
parallel safety, which `-j auto -W` turns into an error, so this one copies the
package's files for HTML builders only and says it is parallel safe.
"""

from __future__ import annotations

from importlib.metadata import distribution
from pathlib import Path
from typing import Any

from sphinx.util.fileutil import copy_asset

MATHJAX_SCRIPT = "mathjax/tex-chtml.js"  # relative to _static/


def _mathjax_dir() -> Path:
    dist = distribution("sphinx-mathjax-offline")
    for file in dist.files or ():
        if file.name == "tex-chtml.js" and file.parent.name == "mathjax":
            return Path(str(dist.locate_file(file))).parent
    raise RuntimeError("sphinx-mathjax-offline has no mathjax/tex-chtml.js; reinstall .[docs]")


def _copy_mathjax(app: Any, exc: BaseException | None) -> None:
    if exc is not None or app.builder.format != "html" or app.builder.name == "epub":
        return
    copy_asset(str(_mathjax_dir()), str(Path(app.outdir) / "_static" / "mathjax"))


def setup(app: Any) -> dict[str, Any]:
    _mathjax_dir()  # fail early, with the fix, if the package is missing
    app.config.mathjax_path = MATHJAX_SCRIPT
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
