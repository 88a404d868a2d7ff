"""Feedback pages that open on their own (issue 48 item 7; ``offline_page.py``): maths as
MathML made of an allow-list only, whatever the LaTeX (students write markdown), and the
chapter's figures embedded. The whole page, graded and opened in Chromium from a folder with
nothing beside it: tests/slow/test_browser_report.py; a student's page through course-grade:
tests/grading/test_feedback_html.py."""

from __future__ import annotations

import base64
import html
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.diagrams import figures
from autograder.grading.autograde import offline_page
from autograder.grading.autograde.feedback_html import TAGS, clean_page
from autograder.grading.autograde.offline_page import (
    MATHML_ATTRIBUTES,
    MATHML_TAGS,
    finish,
    mathml,
)

from helpers import REPO

# LaTeX that latex2mathml turns into markup it copies from its input
ATTACKS = (
    r"\text{<script>window.PWNED=1</script>}",
    r"\text{<img src=x onerror=window.PWNED=1>}",
    r"\text{</mtext></math><script>window.PWNED=1</script>}",
    r"\href{javascript:window.PWNED=1}{x}",
    r"\style{background:url(javascript:window.PWNED=1)}{x}",
    r"\color{red\" onmouseover=\"window.PWNED=1}{x}",
    r"\mathrm{<svg/onload=window.PWNED=1>}",
    r"\operatorname{\"><script>window.PWNED=1</script>}",
)
_TAG = re.compile(r'<(/?)([A-Za-z][\w:-]*)((?:[^>"]|"[^"]*")*)>')
_ATTR = re.compile(r'\s([^\s=/>]+)(?:="([^"]*)")?')


def markup_problems(body: str) -> list[str]:
    """Tags outside the page's and MathML's lists, attributes outside theirs (on MathML),
    event handlers and script URLs anywhere, in ``body``."""
    found = []
    for m in _TAG.finditer(body):
        name = m[2].lower()
        if name not in TAGS | MATHML_TAGS:
            found.append(m[0])
        for a in _ATTR.finditer(m[3]):
            key, value = a[1].lower(), html.unescape(a[2] or "")
            if key.startswith("on") or "javascript:" in value.lower().replace(" ", "") or (
                    name in MATHML_TAGS and key not in MATHML_ATTRIBUTES):
                found.append(m[0])
    return found


def test_the_detector_sees_what_the_converter_lets_through():
    """Not blind: latex2mathml's own output for these has a script, a handler, a JS URL."""
    from latex2mathml.converter import convert

    raw = [convert(a) for a in ATTACKS[:4]]
    assert all(markup_problems(r) for r in raw), raw


@pytest.mark.parametrize("latex", ATTACKS)
def test_a_formula_never_brings_markup_outside_the_lists(latex):
    for text in (f"${latex}$", f"$${latex}$$", f"\\begin{{align}}{latex}\\end{{align}}"):
        page = clean_page("<html><body><p>" + text + "</p></body></html>", {})
        body = page.split("<body>", 1)[1].split("</body>", 1)[0]
        assert not markup_problems(body), body


def test_what_cannot_be_converted_safely_stays_text():
    body = finish("<p>" + html.escape("$\\text{<script>x()</script>}$", quote=False) + "</p>",
                  {})
    assert body == "<p>$\\text{&lt;script&gt;x()&lt;/script&gt;}$</p>"
    # an attribute outside the list is dropped, the formula kept
    assert mathml("\\href{javascript:x()}{a}", False) == (
        '<math display="inline"><mrow><mrow><mrow><mi>a</mi></mrow></mrow></mrow></math>')


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([
    "x", "^", "_", "{", "}", "\\text{", "\\href{", "\\style{", "\\color{", "\\frac", "<", ">",
    "&", '"', "'", "script", "onload=", "javascript:", "\\\\", "\\begin{matrix}",
    "\\end{matrix}", "$", " ", "/", "</mtext>", "</math>", "<svg", "\\mathrm{", "=", "#"]),
    max_size=20))
def test_any_latex_gives_listed_markup_only(parts):
    text = html.escape("".join(parts), quote=False)
    for wrapped in (f"<p>${text}$</p>", f"<p>$${text}$$</p>"):
        body = finish(wrapped, {})
        assert not markup_problems(body), body


def test_maths_becomes_mathml_where_mathjax_typeset_it():
    body = finish("<p>Let $a_1$ and \\(b\\), $$\\sum_i x_i$$ and \\[y\\] cost \\$5.</p>"
                  "<pre>$ echo $HOME$</pre><p><code>$x$</code> <span>$q$</span></p>", {})
    assert body.count("<math") == 5, body
    assert body.count('display="block"') == 2 and "cost $5." in body
    assert "<pre>$ echo $HOME$</pre>" in body and "<code>$x$</code>" in body
    assert "$" not in re.sub(r"<(pre|code)>.*?</\1>|cost \$5", "", body)


def test_every_formula_of_the_course_converts():
    """The release notebooks' maths (what their feedback pages show) all becomes MathML."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    spans = []

    class Collect(IPythonRenderer):
        def inline_math(self, body):
            spans.append((body, False))
            return ""

        def block_math(self, body):
            spans.append((body, True))
            return ""

    for path in sorted((REPO / "notebooks").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                MarkdownWithMath(renderer=Collect(escape=False)).render("".join(cell["source"]))
    assert len(spans) > 500
    assert [s for s, display in spans if mathml(s, display) is None] == []


def test_the_chapters_figures_are_embedded():
    drawn = figures("01_attention")
    (name,) = drawn
    body = finish(f'<p><img alt="a" src="figures/{name}"> <img src="figures/other.svg">'
                  f' <a href="figures/{name}">link</a></p>', drawn)
    uri = re.search(r'<img alt="a" src="(data:image/svg\+xml;base64,[^"]+)">', body)[1]
    assert base64.b64decode(uri.split(",", 1)[1]).decode() == drawn[name]
    assert '<img src="figures/other.svg">' in body  # not a diagram of the chapter: as it was
    assert f'<a href="figures/{name}">' in body  # only images


def test_a_figure_over_the_limit_stays_a_link(monkeypatch):
    monkeypatch.setattr(offline_page, "MAX_FIGURE_BYTES", 10)
    body = finish('<p><img src="figures/a.svg"></p>', {"a.svg": "<svg>" + " " * 20 + "</svg>"})
    assert body == '<p><img src="figures/a.svg"></p>'
