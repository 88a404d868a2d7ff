"""Feedback pages with nothing in them that runs in a browser (issue 14, item 7).

The instructor opens every student's feedback page, and the student controls much of what is
in it: markdown cells, and outputs (``_repr_html_``, ``_repr_javascript_``). Two layers, both
from the same allow-list (:data:`TAGS`, :func:`allowed_attribute`, bleach's HTML5 parser):

- :class:`SanitizeOutputs` (a feedback preprocessor): nbconvert's ``SanitizeHTML`` on the
  outputs: ``text/html`` and ``text/markdown`` cleaned, any other type that is not plain data
  dropped (markdown cells are left to the pass below, which keeps ``a -> b`` readable);
- :func:`clean_page` (on every page ``generate_feedback`` wrote): the rendered ``<body>``
  through bleach: other tags escaped into visible text, event handlers and ``srcdoc``
  dropped, URLs only ``http``, ``https``, ``mailto``, anchors and raster ``data:image``. The
  template's ``<head>`` is kept as written. Then the body's maths becomes MathML and the
  chapter's diagrams are embedded (``offline_page.py``).

>>> clean_page('<head><script>mathjax()</script></head><body>'
...            '<p onclick="x()"><a href=" JaVa&#x73;cript:x()">a</a> $x^2$</p></body>')
'<head><script>mathjax()</script></head><body><p><a>a</a> $x^2$</p></body>'
"""

from __future__ import annotations

import re
from pathlib import Path

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import default

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd",
    "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3",
    "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "main", "mark", "ol", "p", "pre",
    "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
    "td", "tfoot", "th", "thead", "time", "tr", "u", "ul", "var",
})
PROTOCOLS = frozenset({"http", "https", "mailto", "data"})
RASTER = ("data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp")


def allowed_attribute(tag: str, name: str, value: str) -> bool:
    """Any attribute but event handlers, ``srcdoc``, namespaced names (``xlink:href``), and
    values that are ``javascript:`` or ``data:`` URLs other than raster images (bleach then
    checks every URL attribute's scheme against :data:`PROTOCOLS`)."""
    name = name.lower()
    if name.startswith("on") or ":" in name or name in ("srcdoc", "formaction"):
        return False
    squeezed = "".join(ch for ch in value or "" if ch > " ").lower()  # as a browser reads it
    if squeezed.startswith(("javascript:", "vbscript:")):
        return False
    return not squeezed.startswith("data:") or squeezed.startswith(RASTER)


def _cleaner():
    from bleach.css_sanitizer import CSSSanitizer
    from bleach.sanitizer import Cleaner

    return Cleaner(tags=TAGS, attributes=allowed_attribute, protocols=PROTOCOLS, strip=False,
                   strip_comments=True, css_sanitizer=CSSSanitizer())


_BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)


def clean_page(page: str, offline: dict[str, str] | None = None) -> str:
    """The page with its body cleaned (see the module docstring); the head is kept. With
    ``offline`` (the chapter's figures, ``{file name: SVG text}``), the cleaned body then gets
    its maths as MathML and those figures embedded (``offline_page.finish``: a page that
    opens on its own)."""
    start = _BODY.search(page)
    if start is None:  # not a page the template wrote: clean all of it
        return _cleaner().clean(page)
    end = page.lower().rfind("</body>")
    end = end if end >= start.end() else len(page)
    body = _cleaner().clean(page[start.end():end])
    if offline is not None:
        from .offline_page import finish

        body = finish(body, offline)
    return page[:start.end()] + body + page[end:]


def clean_feedback(folder: Path) -> list[Path]:
    """Clean every ``*.html`` page under ``folder`` (``feedback/<student>/<assignment>``) in
    place, its maths as MathML and the assignment's diagrams (``autograder/diagrams.py``)
    embedded; returns the pages."""
    from autograder.diagrams import figures

    drawn = figures(Path(folder).name)
    pages = sorted(folder.rglob("*.html"))
    for page in pages:
        page.write_text(clean_page(page.read_text(encoding="utf-8"), drawn), encoding="utf-8")
    return pages


def warm_up() -> None:
    """Render and clean one small feedback page and drop it, in the warm process before it
    forks: the templates, selectors, lexer, parser and MathML converter every first page
    builds (about 1 s of CPU a student) are then inherited. Caches of their own sources, never
    of a page: no page changes. Where it fails, the first page builds them."""
    try:
        from nbconvert.exporters import HTMLExporter
        from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
        from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
        from nbgrader.converters import GenerateFeedback
        from nbgrader.coursedir import CourseDirectory

        # nbgrader's own page settings (its feedback template), as generate_feedback has them,
        # and the feedback's preprocessors that build something (the scores are given below)
        exporter = HTMLExporter(config=GenerateFeedback(coursedir=CourseDirectory()).config)
        for preprocessor in (SanitizeOutputs, CSSHTMLHeaderPreprocessor):
            exporter.register_preprocessor(preprocessor, enabled=True)
        grade = {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1,
                 "score": 1}
        nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                   "language": "python"},
                                    "language_info": {"name": "python",
                                                      "pygments_lexer": "ipython3"}})
        nb.cells = [
            new_markdown_cell("# A *page*\n\n$x^2$, `x`, [a](https://example.org)\n\n"
                              "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```"),
            new_code_cell("def f(x):\n    return x ** 2  # f\n\nprint(f'{f(2)}')",
                          metadata={"nbgrader": grade}, execution_count=1, outputs=[
                              new_output("stream", name="stdout", text="4\n"),
                              new_output("execute_result", execution_count=1,
                                         data={"text/plain": "4", "text/html": "<b>4</b>"}),
                              new_output("error", ename="E", evalue="x",
                                         traceback=["\x1b[0;31mE\x1b[0m: x"])]),
        ]
        resources = {"nbgrader": {"notebook": "warm-up", "score": 1, "max_score": 1,
                                  "late_penalty": 0}}
        clean_page(exporter.from_notebook_node(nb, resources)[0], {})
        from .offline_page import warm_up as offline_warm_up

        offline_warm_up()
    except Exception:  # noqa: BLE001 - a head start only
        pass


class SanitizeOutputs(SanitizeHTML):
    """nbconvert's ``SanitizeHTML`` with the course's allow-list, on outputs and raw cells
    (markdown cells: see the module docstring)."""

    @default("enabled")
    def _enabled(self):  # nbconvert preprocessors are off unless enabled
        return True

    @default("tags")
    def _tags(self):
        return sorted(TAGS)

    @default("attributes")
    def _attributes(self):
        return allowed_attribute

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown":
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
