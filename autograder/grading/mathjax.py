"""Maths rendered offline: MathJax from an installed package, never from a CDN.

nbconvert's HTML templates load MathJax from cdnjs (``mathjax()`` in ``base/mathjax.html.j2``):
offline, the maths stays raw ``$...$``. Instead:

- **feedback pages** load no MathJax at all (``FEEDBACK_URL``, None: an empty macro): their
  maths is MathML, written when the page is made (``autograde/offline_page.py``);
- **formgrader** (``bootstrap lab --instructor``) loads the copy the ``jupyter-server-mathjax``
  package serves (``SERVER_URL``).

Both work by a ``base/mathjax.html.j2`` of our own in a Jupyter data folder listed before the
installed ones: nbconvert looks templates up there first, so the macro's default URL is ours.

Example: ``env["JUPYTER_PATH"] = str(jupyter_path(FEEDBACK_URL, folder))``.
"""

from __future__ import annotations

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


def with_path(env: dict, folder: Path) -> dict:
    """``env`` with ``folder`` first on ``JUPYTER_PATH``."""
    import os

    rest = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    return {**env, "JUPYTER_PATH": os.pathsep.join([str(folder), *rest])}
