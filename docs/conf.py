"""Sphinx configuration of the course's documentation site.

Built by ``python3 -m autograder.bootstrap docs`` (``autograder/docs.py``), offline: no
intersphinx, no theme or maths from a CDN. MathJax 2.7 comes from the installed
``jupyter-server-mathjax`` package (the copy formgrader loads, see
``autograder/grading/mathjax.py``), copied into ``_static/mathjax`` after the build. The
chapters are the student release (``notebooks/NN_x/NN_x.ipynb`` with their ``figures/``),
copied into ``chapters/`` (not committed) and rendered by MyST-NB without running them: a
reader sees the chapter text and diagrams, not the solutions.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

from autograder import docs as course_docs  # noqa: E402
from autograder.grading import mathjax  # noqa: E402

course_docs.sync_chapters(ROOT / "notebooks", DOCS / "chapters")

project = "Transformers from Scratch"
author = "the course's authors"
copyright = "the course's authors"  # noqa: A001
html_title = project

extensions = ["myst_nb", "sphinxarg.ext"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 4
nb_execution_mode = "off"  # the chapters are shown as committed, never run
nb_merge_streams = True
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
suppress_warnings: list[str] = []

html_theme = "furo"
html_static_path: list[str] = []
html_last_updated_fmt = None
html_show_sourcelink = False
html_copy_source = False
html_show_copyright = False

# MathJax 2.7 from the installed package (copied into _static/mathjax by setup() below). The
# package ships only the STIX-Web fonts: MathJax's default, TeX, would fetch a fontdata.js that
# is not there and fail on a prime ("Math Processing Error" on $\mathbb{R}^{d'\times d}$).
mathjax_path = f"mathjax/MathJax.js?config={mathjax.CONFIG}"
# MyST marks its pages tex2jax_ignore and its maths class "math" (MathJax 3's names): MathJax 2
# is told the same, so only the maths is typeset
myst_update_mathjax = False
mathjax2_config = {
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                "processEscapes": True, "processEnvironments": True,
                "ignoreClass": "tex2jax_ignore|mathjax_ignore",
                "processClass": "tex2jax_process|mathjax_process|math|output_area"},
    "HTML-CSS": {"availableFonts": ["STIX-Web"], "preferredFont": "STIX-Web",
                 "webFont": "STIX-Web", "imageFont": None},
    "messageStyle": "none",
}


def _publish_mathjax(app, exception) -> None:
    """Copy the ``jupyter-server-mathjax`` package's MathJax into ``_static/mathjax``."""
    if exception is None and app.builder.format == "html":
        spec = importlib.util.find_spec("jupyter_server_mathjax")
        src = Path(next(iter(spec.submodule_search_locations))) / "static" if spec else None
        if src is None or not (src / "MathJax.js").is_file():
            raise RuntimeError("jupyter-server-mathjax is not installed: the maths cannot "
                               "render offline")
        shutil.copytree(src, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def setup(app):
    app.connect("build-finished", _publish_mathjax)
