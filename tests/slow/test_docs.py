"""The documentation site (``docs/``), built as a contributor builds it, then read in a browser.

``python3 -m autograder.bootstrap docs --out DIR`` builds it once for the module: Sphinx with
warnings as errors and nitpicky, then every internal link and anchor of the built pages checked
and nothing fetched from the network (``autograder/docs.py``). The tests then check that the
build said nothing, that every chapter of the student release is a page with its diagrams,
that the ``course-grade`` options are generated from its parser, that a broken link fails a
build, and, in Chromium, that a chapter page shows its title, its diagram and its maths
typeset (no raw ``$$``), and that the instructor's guide shows its steps and leads to the
options. Screenshots: ``test-artifacts/docs-*.png``. The browser test skips, saying why, where
no Chromium is found (``.ci/run`` installs Debian's).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder.docs import broken_links
from autograder.grade import _parser

from helpers.browser import CHROMIUM_CANDIDATES, CHROMIUM_FLAGS, find_chromium

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHAPTER = "02_masking"  # maths and a diagram (chapter 01's Sources cell has an unclosed $$)
FIGURE = re.compile(r"!\[[^\]]*\]\((figures/[^)\s]+)\)")  # a chapter's diagram in markdown


def _docs_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "autograder.bootstrap", "docs", *args]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built by the bootstrap's docs command: (html folder, its output, seconds)."""
    out = tmp_path_factory.mktemp("docs") / "html"
    start = time.monotonic()
    proc = subprocess.run(_docs_cmd("--out", str(out)), cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, f"docs build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return out, proc.stdout + proc.stderr, seconds


def test_the_site_builds_without_a_warning(site):
    out, log, seconds = site
    assert "WARNING" not in log and "ERROR" not in log, log[-4000:]
    assert "no warnings, every internal link resolves" in log
    assert broken_links(out) == []
    assert (out / "_static" / "mathjax" / "MathJax.js").is_file()  # maths offline
    for page in ("index", "guides/student", "guides/self-learner", "guides/instructor",
                 "reference/course-grade", "reference/guarantees", "contributing/index",
                 "benchmarks", "changelog"):
        assert (out / f"{page}.html").is_file(), page
    print(f"docs built in {seconds:.1f} s")


def test_the_build_treats_links_as_the_site_is_configured_to():
    """What makes a broken link fail the real site is in docs/conf.py: nothing silences MyST's
    or Sphinx's reference warnings, and links are not all taken as external."""
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text())
    values = {t.id: node.value for node in tree.body if isinstance(node, (ast.Assign,
              ast.AnnAssign)) for t in (node.targets if isinstance(node, ast.Assign)
                                        else [node.target]) if isinstance(t, ast.Name)}
    assert "myst_all_links_external" not in values or not ast.literal_eval(
        values["myst_all_links_external"])
    suppressed = ast.literal_eval(values.get("suppress_warnings", ast.List(elts=[])))
    assert not [w for w in suppressed if w.split(".")[0] in ("myst", "ref", "toc")], suppressed


def test_a_broken_internal_link_fails_the_build(tmp_path):
    """A Markdown link to a page that does not exist, built by the same command: it fails,
    naming the page and the line."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["myst_nb"]\nnb_execution_mode = "off"\n')
    (src / "index.md").write_text("# A page\n\nSee [the guide](guides/nowhere.md).\n")
    proc = subprocess.run([sys.executable, "-m", "autograder.docs", "--source", str(src),
                           "--out", str(tmp_path / "html")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert "index.md:3" in log and "guides/nowhere.md" in log, log


def test_a_broken_anchor_in_a_built_page_is_reported(site, tmp_path):
    out, _, _ = site
    copy = tmp_path / "html"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".doctrees", "_static", "_images"))
    page = copy / "guides" / "instructor.html"
    page.write_text(page.read_text().replace(
        "</body>", '<a href="../reference/course-grade.html#no-such-option">x</a></body>'))
    found = [p for p in broken_links(copy) if "instructor.html" in p and "no-such-option" in p]
    assert found, "a link to a missing anchor went unreported"


def test_every_chapter_is_a_page_with_its_diagrams(site):
    out, _, _ = site
    for nb_path in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        chapter = nb_path.parent.name
        page = out / "chapters" / chapter / f"{chapter}.html"
        assert page.is_file(), f"{chapter} has no page"
        nb = nbformat.read(nb_path, as_version=4)
        shown = [m for c in nb.cells if c.cell_type == "markdown"
                 for m in FIGURE.findall(c.source)]
        html = page.read_text()
        images = re.findall(r'<img[^>]*\ssrc="([^"]+\.svg)"', html)
        assert len(images) == len(shown), f"{chapter}: {shown} shown, {images} in the page"
        for src in images:
            assert (page.parent / src).resolve().is_file(), f"{chapter}: {src} missing"
        assert "NotImplementedError" in html  # the student release, not the solutions


def test_the_course_grade_options_are_generated_from_its_parser(site):
    out, _, _ = site
    html = (out / "reference" / "course-grade.html").read_text()
    options = [s for a in _parser()._actions for s in a.option_strings if s.startswith("--")]
    assert len(options) > 15
    missing = [o for o in options if f">{o}<" not in html and f">{o} " not in html]
    assert not missing, f"options not on the reference page: {missing}"


def _chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium to drive: looked for $COURSE_CHROMIUM, "
                    + ", ".join(CHROMIUM_CANDIDATES) + " and `chromium` on PATH "
                    "(install it: apt-get install -y chromium)")
    return path


# What a reader sees: the title, the diagrams as loaded images, the maths as MathJax typeset
# it (each TeX span replaced by a rendered element), and any TeX left as visible text.
SEEN_JS = """() => ({
    title: document.title,
    h1: (document.querySelector('h1') || {}).innerText || '',
    images: [...document.querySelectorAll('article img')].map(i => ({
        src: i.getAttribute('src'), natural: i.naturalWidth,
        width: i.getBoundingClientRect().width})),
    maths: document.querySelectorAll('span.math.notranslate, div.math.notranslate').length,
    typeset: [...document.querySelectorAll('span.math.notranslate, div.math.notranslate')].filter(
        e => e.querySelector('.MathJax_CHTML, .MathJax_Display, .MathJax')).length,
    errors: document.querySelectorAll('.MathJax_Error').length,
    text: document.querySelector('article').innerText,
    headings: [...document.querySelectorAll('article h2')].map(h => h.innerText),
})"""
TYPESET_JS = """() => window.MathJax && MathJax.Hub && MathJax.Hub.queue
    && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0
    && document.querySelectorAll('.MathJax_CHTML, .MathJax_Display, .MathJax').length > 0"""


def test_a_chapter_and_the_instructors_guide_in_chromium(site):
    chromium = _chromium()
    out, _, _ = site
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.goto((out / "chapters" / CHAPTER / f"{CHAPTER}.html").as_uri())
            page.wait_for_load_state("load")
            page.wait_for_function(TYPESET_JS, timeout=60_000)
            chapter = page.evaluate(SEEN_JS)
            page.screenshot(path=str(ARTIFACTS / "docs-chapter.png"))

            page.goto((out / "guides" / "instructor.html").as_uri())
            page.wait_for_load_state("load")
            guide = page.evaluate(SEEN_JS)
            page.screenshot(path=str(ARTIFACTS / "docs-instructor.png"))
            page.click("article a[href$='reference/course-grade.html']")
            page.wait_for_load_state("load")
            options = page.evaluate(SEEN_JS)
        finally:
            browser.close()

    assert chapter["h1"].startswith("Chapter 2"), chapter["h1"]
    assert chapter["h1"] in chapter["title"]
    assert chapter["images"] and all(
        i["natural"] > 0 and i["width"] > 100 for i in chapter["images"]), chapter["images"]
    assert chapter["maths"] > 20 and chapter["typeset"] == chapter["maths"], (
        f"{chapter['typeset']} of {chapter['maths']} formulas typeset")
    assert chapter["errors"] == 0, f"{chapter['errors']} MathJax processing errors"
    for raw in ("$$", "\\(", "\\[", "\\frac"):
        assert raw not in chapter["text"], f"raw TeX {raw!r} on the chapter page"

    assert guide["h1"] == "The instructor’s guide: a term", guide["h1"]
    steps = [h for h in guide["headings"] if re.match(r"\d\. ", h)]
    assert [s.split()[0] for s in steps] == ["0.", "1.", "2.", "3.", "4.", "5.", "6."], steps
    assert "course-grade submissions/ --out grades/" in guide["text"]
    assert options["h1"] == "course-grade" and "--due" in options["text"], options["h1"]
