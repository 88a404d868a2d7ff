"""Feedback pages are sanitised (issue 14, item 7): no script, no event handler, no
``javascript:`` URL from the student reaches the instructor's browser, by the three routes of
the issue (``<script>`` in a markdown cell, ``_repr_html_``, ``_repr_javascript_``) and by the
LaTeX a student's markdown holds (issue 48, item 7: the maths becomes MathML at grading time),
while the page keeps its math (MathML, no MathJax), its figures and the check messages."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from autograder.grading import mathjax
from autograder.grading.autograde.feedback_html import clean_page
from autograder.grading.sandbox import bwrap_path

from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, read_csv, run_info

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"
# a 1x1 PNG: the figure a student's output may show
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()

MARKDOWN = (
    "## My notes $x^2$\n\n<script>window.PWNED_MD = 1</script>\n\n"
    "<img src=x onerror=\"window.PWNED_IMG = 1\">\n\n[a link](javascript:window.PWNED_LINK=1)\n"
    "\n<iframe srcdoc=\"<script>parent.PWNED_FRAME=1</script>\"></iframe>\n\n"
    "Maths: $\\text{<script>window.PWNED_TEX = 1</script>}$, "
    "$\\href{javascript:window.PWNED_HREF=1}{x}$, $\\style{x:y}{\\text{<img src=x "
    "onerror=\"window.PWNED_MML=1\">}}$\n"
)
OUTPUTS = (
    "class _Html:\n"
    "    def _repr_html_(self):\n"
    "        return ('<b onmouseover=\"window.PWNED_HOVER=1\">bold</b>'\n"
    "                '<script>window.PWNED_HTML = 1</script>')\n"
    "class _Js:\n"
    "    def _repr_javascript_(self):\n"
    "        return 'window.PWNED_JS = 1'\n"
    "class _Png:\n"
    "    def _repr_png_(self):\n"
    f"        return {base64.b64decode(PNG)!r}\n"
    "display(_Html(), _Js(), _Png())\n"
)
ROUTES = ("PWNED_MD", "PWNED_IMG", "PWNED_LINK", "PWNED_FRAME", "PWNED_HOVER", "PWNED_HTML",
          "PWNED_JS", "PWNED_TEX", "PWNED_HREF", "PWNED_MML")


def _runs_something(body: str) -> list[str]:
    """What in ``body`` a browser would run: script elements, handlers, js URLs, frames."""
    found = re.findall(r"<script\b[^>]*>", body, re.I)
    found += re.findall(r"<[^>]*\son\w+\s*=[^>]*>", body, re.I)
    found += re.findall(r"<[^>]*(?:href|src)\s*=\s*[\"']?\s*javascript:[^>]*>", body, re.I)
    found += re.findall(r"<(?:iframe|object|embed)\b[^>]*>", body, re.I)
    return found


def test_clean_page_keeps_the_head_and_neutralises_the_body():
    page = ("<html><head><script src=\"mathjax.js\"></script></head><body>"
            "<p onclick=\"x()\"><a href=\"jav&#x09;ascript:x()\">a</a>$x^2$</p>"
            "<img src=\"data:image/png;base64,AAAA\"><a href=\"data:text/html,x\">d</a>"
            "<script>bad()</script><iframe src=\"http://e\"></iframe></body></html>")
    out = clean_page(page)
    head, body = out.split("<body>", 1)
    assert head == "<html><head><script src=\"mathjax.js\"></script></head>"
    assert not _runs_something(body), body
    assert "$x^2$" in body and "<img src=\"data:image/png;base64,AAAA\">" in body
    assert "<a>d</a>" in body  # a data: URL that is not an image is dropped


def test_the_test_finds_what_runs():
    """The detector used below is not blind: the raw attack strings trip it."""
    raw = "<body>" + MARKDOWN + "<b onmouseover=\"x\">b</b><a href='javascript:x'>l</a>"
    assert len(_runs_something(raw)) >= 5


@pytest.fixture(scope="module")
def feedback(tmp_path_factory):
    root = tmp_path_factory.mktemp("feedback-html")
    args = ("--workers", "1", "--cell-timeout", "30",
            *(() if bwrap_path() else ("--unsandboxed",)))
    info = run_info(SOURCE, [ASSIGNMENT], args)
    nb = info[ASSIGNMENT][0]
    sub = ClassBuilder(nb).answered()
    at = next(i for i, c in enumerate(sub.cells) if c.metadata.get("nbgrader", {})
              .get("grade_id") == nb.solution_ids[0])
    sub.cells[at + 1:at + 1] = [new_markdown_cell(MARKDOWN), new_code_cell(OUTPUTS)]
    path = root / "class" / "xss" / f"{nb.name}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(sub, path)
    proc = subprocess.run(grade_cmd(root / "class", root / "out", SOURCE, *args),
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    path = next((root / "out" / "feedback" / "xss").rglob(f"{nb.name}.html"))
    return {"page": path.read_text(), "path": path, "rows": read_csv(root / "out" / "grades.csv"),
            "nb": nb}


def test_student_content_in_feedback_runs_nothing(feedback):
    body = feedback["page"].split("<body", 1)[1]
    assert not _runs_something(body), _runs_something(body)
    # the javascript output is dropped (what is left is the student's source, once)
    assert body.count("PWNED_JS") == 1 and "application/javascript" not in body
    assert "&lt;script&gt;window.PWNED_MD" in body  # markdown's script: shown as text


def test_feedback_keeps_math_figures_and_scores(feedback):
    page = feedback["page"]
    head, body = page.split("<body", 1)
    # no MathJax, no script at all: the maths is MathML, written when the page was made
    # (issue 48 item 7: a page opened on its own, from the LMS, shows it)
    assert "<script" not in head and "MathJax" not in page and mathjax.FEEDBACK_URL is None
    assert "$x^2$" not in page
    assert "<math display=\"inline\"><mrow><msup><mi>x</mi><mn>2</mn></msup></mrow></math>" in body
    assert "\\text{&lt;script&gt;window.PWNED_TEX" in body  # no safe MathML: shown as text
    assert f"data:image/png;base64,{PNG}" in page.replace("\n", "")
    nb = feedback["nb"]
    assert [(r["points"], r["status"]) for r in feedback["rows"]] == [
        (f"{g.max_points:g}", "graded") for g in nb.grade_cells]


# (in the subprocess scripts below) count the Jinja templates compiled from here on
COUNT_COMPILES = """
compiled = []
original = jinja2.Environment.compile
def counting(self, *a, **k):
    compiled.append(1)
    return original(self, *a, **k)
jinja2.Environment.compile = counting
"""


def test_templates_are_compiled_once_per_process_and_pages_are_unchanged():
    # a subprocess: the shared cache patches nbconvert for the rest of the process
    code = r"""
import json, jinja2
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
nb = new_notebook(cells=[new_markdown_cell("# T\n$x^2$"), new_code_cell("print(1)")])
plain = HTMLExporter().from_notebook_node(nb)[0]
{count}
from autograder.grading.nbgrader_patches import share_compiled_templates
share_compiled_templates(); share_compiled_templates()
first = HTMLExporter().from_notebook_node(nb)[0]
n_first = len(compiled)
second = HTMLExporter().from_notebook_node(nb)[0]
print(json.dumps([n_first, len(compiled) - n_first, first == second,
                  _strip(first) == _strip(plain)]))
"""
    code = code.replace("{count}", COUNT_COMPILES.strip("\n"))
    code = code.replace("_strip(", "(lambda s: __import__('re').sub(r'id=\"[^\"]*\"', '', s))(")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    n_first, n_second, same, as_before = json.loads(out.stdout.strip().splitlines()[-1])
    assert n_first > 0 and n_second == 0  # the second exporter compiled nothing
    assert same and as_before


def test_a_warmed_up_process_renders_the_same_page_without_compiling():
    """``feedback_html.warm_up`` (the warm process, before it forks): the next feedback page
    compiles no template (its exporter finds them built) and is the page a process that did not
    warm up renders, cleaned alike. In subprocesses: the warm-up fills process-wide caches."""
    code = r"""
import json, sys, jinja2
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from autograder.grading.autograde import feedback_html
from autograder.grading.nbgrader_patches import share_compiled_templates
share_compiled_templates()
if sys.argv[1] == "warm":
    feedback_html.warm_up()
{count}
nb = new_notebook(metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}},
                  cells=[new_markdown_cell("# T\n$x^2$ <script>x()</script>", id="m"),
                         new_code_cell("print(1)", id="c",
                                       outputs=[new_output("stream", text="1\n")])])
exporter = HTMLExporter(config=GenerateFeedback(coursedir=CourseDirectory()).config)
resources = {"nbgrader": {"notebook": "nb", "score": 1, "max_score": 2, "late_penalty": 0}}
page = feedback_html.clean_page(exporter.from_notebook_node(nb, resources)[0])
print(json.dumps([len(compiled), page]))
"""
    code = code.replace("{count}", COUNT_COMPILES.strip("\n"))
    runs = {}
    for mode in ("cold", "warm"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True,
                             cwd=REPO, timeout=120)
        assert out.returncode == 0, out.stderr
        runs[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs["cold"][0] > 0 and runs["warm"][0] == 0
    assert runs["warm"][1] == runs["cold"][1] and "&lt;script&gt;" in runs["warm"][1]
