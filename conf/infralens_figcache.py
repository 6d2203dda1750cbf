"""A content-keyed cache for the plot directive's figures, shared by every build.

matplotlib's plot directive redraws a figure when its script is newer than
the image in the build folder. That misses the data: a figure drawn from
``infralens`` must change when the package does, and a clean build (a fresh
``build/html``) redraws every figure although nothing changed. This wraps the
directive's ``render_figures``: the key is a hash of the script, the drawing
helpers (``_figures/_draw.py``), every source file of the package, the
figure formats and rcParams, matplotlib's version and ``SOURCE_DATE_EPOCH``.
A hit copies the stored images into place (one worker at a time per
figure, under a lock file); a miss removes any stale images
for that figure, draws it, and stores the result under ``build/figure-cache``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "figure-cache"
FIGURES = ROOT / "handbook" / "_figures"
PACKAGE = ROOT / "labs_src" / "infralens"


def _inputs_digest() -> str:
    """Hash of everything a figure script may read besides itself."""
    h = hashlib.sha256()
    for path in sorted([FIGURES / "_draw.py", *PACKAGE.rglob("*.py")]):
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _key(code: str, code_path: str, function_name: str | None, config: Any) -> str:
    import matplotlib

    h = hashlib.sha256()
    script = Path(code_path)
    parts = [
        code,
        script.name,
        script.read_text(encoding="utf-8") if script.is_file() else "",
        str(function_name),
        repr(config.plot_formats),
        repr(sorted(config.plot_rcparams.items())),
        str(config.plot_apply_rcparams),
        matplotlib.__version__,
        os.environ.get("SOURCE_DATE_EPOCH", ""),
        _inputs_digest(),
    ]
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def install() -> None:
    """Wrap the plot directive's render_figures with the cache (idempotent)."""
    from matplotlib.sphinxext import plot_directive

    original = plot_directive.render_figures
    if getattr(original, "_infralens_cached", False):
        return

    def render_figures(
        code: str,
        code_path: str,
        output_dir: str,
        output_base: str,
        context: bool,
        function_name: str | None,
        config: Any,
        **kwargs: Any,
    ) -> Any:
        if context:  # figures sharing state across directives are not cached
            return original(
                code, code_path, output_dir, output_base, context, function_name, config, **kwargs
            )
        key = _key(code, code_path, function_name, config)
        CACHE.mkdir(parents=True, exist_ok=True)
        # One figure script may sit on two pages that parallel workers read at
        # once; both draw into the same folder, so one key is drawn by one
        # worker at a time and the other finds it cached.
        with open(CACHE / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return _cached(
                    key,
                    code,
                    code_path,
                    output_dir,
                    output_base,
                    context,
                    function_name,
                    config,
                    **kwargs,
                )
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _cached(
        key: str,
        code: str,
        code_path: str,
        output_dir: str,
        output_base: str,
        context: bool,
        function_name: str | None,
        config: Any,
        **kwargs: Any,
    ) -> Any:
        entry = CACHE / key
        index = entry / "results.json"
        if index.is_file():
            stored = json.loads(index.read_text(encoding="utf-8"))
            results = []
            for piece, images in stored:
                files = []
                for basename, formats in images:
                    img = plot_directive.ImageFile(basename, output_dir)
                    img.formats = list(formats)
                    for fmt in formats:
                        shutil.copyfile(entry / f"{basename}.{fmt}", img.filename(fmt))
                    files.append(img)
                results.append((piece, files))
            return results
        # A miss: the directive's own check compares only the script's mtime with
        # the image, so stale images of this figure must go before it looks.
        out = Path(output_dir)
        for stale in [*out.glob(f"{output_base}.*"), *out.glob(f"{output_base}_[0-9][0-9]*")]:
            stale.unlink()
        results = original(
            code, code_path, output_dir, output_base, context, function_name, config, **kwargs
        )
        tmp = Path(tempfile.mkdtemp(dir=CACHE))
        stored = []
        for piece, images in results:
            for img in images:
                for fmt in img.formats:
                    shutil.copyfile(img.filename(fmt), tmp / f"{img.basename}.{fmt}")
            stored.append((piece, [(img.basename, img.formats) for img in images]))
        (tmp / "results.json").write_text(json.dumps(stored), encoding="utf-8")
        try:
            tmp.rename(entry)
        except OSError:  # another worker stored the same figure first
            shutil.rmtree(tmp, ignore_errors=True)
        return results

    render_figures._infralens_cached = True  # type: ignore[attr-defined]
    plot_directive.render_figures = render_figures


def setup(app: Any) -> dict[str, Any]:
    install()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
