"""Maths rendered offline: MathJax from an installed package, never from a CDN.

nbconvert's HTML templates, which nbgrader's feedback pages and formgrader's grading pages
extend, load MathJax from cdnjs (``mathjax()`` in ``base/mathjax.html.j2``, called without a
URL). On a machine without the network the maths of every page stays raw ``$...$``. The
``jupyter-server-mathjax`` package ships MathJax 2.7 (:data:`STATIC`, 12 MB) and serves it
from a Jupyter server at ``/static/jupyter_server_mathjax/``. This module points the pages at a
local copy instead of the CDN:

- **feedback pages** (``OUT_DIR/feedback/<student>/<assignment>/<nb>.html``, and their
  copies under ``return/``) load no MathJax at all: their maths is MathML, written when the
  page is made (``autograde/offline_page.py``), so that a page returned through the LMS and
  opened on its own shows it. The grading process renders them with :func:`jupyter_path`
  (``FEEDBACK_URL``, None: an empty macro) on its ``JUPYTER_PATH``. (:func:`publish`, which
  copied MathJax to ``OUT_DIR/mathjax`` for them, is no longer needed by any page);
- **formgrader** (``bootstrap lab --instructor``) loads the server's own copy
  (``SERVER_URL``), with :func:`jupyter_path` of that URL on the server's ``JUPYTER_PATH``.

Both work by a ``base/mathjax.html.j2`` of our own in a Jupyter data folder listed before the
installed ones: nbconvert looks templates up there first, so the macro's default URL is ours.

Example: ``env["JUPYTER_PATH"] = str(jupyter_path(FEEDBACK_URL, folder))``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # a configuration the package ships
FEEDBACK_URL = None  # feedback pages: no MathJax, their maths is MathML (offline_page.py)
SERVER_URL = f"/static/jupyter_server_mathjax/MathJax.js?config={CONFIG}"

# The macro nbconvert's templates import (``{% from 'mathjax.html.j2' import mathjax %}``): the
# same name and argument, our URL as its default, the usual $...$ and $$...$$ delimiters.
MACRO = """{%- macro mathjax(url="URL") -%}
<script src="{{ url }}"></script>
<script type="text/x-mathjax-config">
if (window.MathJax) {
  MathJax.Hub.Config({
    tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]],
              displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
              processEscapes: true, processEnvironments: true},
    TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
    displayAlign: "center", messageStyle: "none"
  });
  MathJax.Hub.Queue(["Typeset", MathJax.Hub]);
}
</script>
{%- endmacro %}
"""


def static_dir() -> Path | None:
    """The installed package's MathJax folder (None where the package is missing)."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    return folder if (folder / "MathJax.js").is_file() else None


def macro(url: str | None) -> str:
    """The ``mathjax.html.j2`` whose macro loads MathJax from ``url`` (None: a macro that
    writes nothing).

    >>> 'src="{{ url }}"' in macro("x.js") and 'url="x.js"' in macro("x.js")
    True
    >>> macro(None)
    '{%- macro mathjax(url=None) -%}{%- endmacro %}\\n'
    """
    if url is None:
        return "{%- macro mathjax(url=None) -%}{%- endmacro %}\n"
    return MACRO.replace('url="URL"', f'url="{url}"')


def jupyter_path(url: str | None, folder: Path) -> Path:
    """A Jupyter data folder under ``folder`` whose ``nbconvert/templates/base/mathjax.html.j2``
    loads MathJax from ``url`` (written once); put it first on ``JUPYTER_PATH``."""
    base = Path(folder) / "nbconvert" / "templates" / "base"
    path = base / "mathjax.html.j2"
    text = macro(url)
    if not path.is_file() or path.read_text() != text:
        base.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return Path(folder)


def publish(out: Path) -> bool:
    """Copy MathJax to ``out/mathjax`` (the feedback pages' ``FEEDBACK_URL``) unless it is
    there; False where the package is missing (the pages then show the maths as written)."""
    src = static_dir()
    dest = Path(out) / "mathjax"
    if src is None:
        return False
    if not (dest / "MathJax.js").is_file():
        tmp = Path(out) / ".mathjax.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return True


def with_path(env: dict, folder: Path) -> dict:
    """``env`` with ``folder`` first on ``JUPYTER_PATH``."""
    import os

    rest = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    return {**env, "JUPYTER_PATH": os.pathsep.join([str(folder), *rest])}
