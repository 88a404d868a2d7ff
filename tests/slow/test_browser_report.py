"""The class report (``OUT_DIR/report.html``) of a real graded class, opened in Chromium.

The class: the synthetic notebook-01 class that test_grade_class.py grades (12 students: full
marks, blank, wrong, timeouts, a kernel that dies, an invalid file, ...; graded once per test
session and shared), copied, plus three students who make mistakes the check library names
(two with an overflowing softmax, one with transposed scores). Rerunning ``course-grade`` on
the copy grades only the three new students (the others are already graded) and rewrites
the report for all 15. In the browser: every plot is an inline SVG shown at its size with
visible bars, the mistakes table ranks the mistake two students made first and
names them, and the not-graded table names its students. Screenshot:
``test-artifacts/report-class.png``. And one student's returned feedback page
(``OUT_DIR/return/``), alone in an empty folder, scripts off: its maths is MathML and its
diagram loads, with no file beside it (issue 48 item 7; ``test-artifacts/feedback-returned.png``).
"""

from __future__ import annotations

import shutil
import subprocess

import nbformat
import pytest

from autograder.checks import table

from helpers.browser import CHROMIUM_CANDIDATES, CHROMIUM_FLAGS, find_chromium
from helpers.synthetic_class import ClassBuilder
from helpers.synthetic_class.shared import REPO, grade_cmd, graded_class, notebook_info

EX = table.rows("01_attention")  # {function: exercise row} of the chapter

ASSIGNMENT = "01_attention"
SOURCE = REPO / "solutions"
ARTIFACTS = REPO / "test-artifacts"
# the same arguments as test_grade_class.py's fixture: the class is graded once per session
ARGS = ("--workers", "2", "--cell-timeout", "30", "--timeout", "400", "--memory", "3072")
EXTRA = ("earlier_release",)  # as test_grade_class.py's (the same graded class)

OVERFLOW = '''def softmax(x, axis=-1):
    e = np.exp(x)  # no max subtracted
    return e / np.sum(e, axis=axis, keepdims=True)
'''
TRANSPOSED = '''def dot_product_scores(Q, K):
    return K @ np.swapaxes(Q, -1, -2)
'''
MISTAKES = {  # student -> (answer cell, its source)
    "overflow_a": (EX["softmax"].solution_id, OVERFLOW),
    "overflow_b": (EX["softmax"].solution_id, OVERFLOW),
    "transposed": (EX["dot_product_scores"].solution_id, TRANSPOSED),
}

pytestmark = [
    pytest.mark.skipif(not (SOURCE / ASSIGNMENT).exists(), reason="notebook 01 not there"),
]


def _chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium to drive: looked for $COURSE_CHROMIUM, "
                    + ", ".join(CHROMIUM_CANDIDATES) + " and `chromium` on PATH")
    return path


def _class_with_mistakes(tmp_path_factory, dest):
    base = graded_class(tmp_path_factory, "nb01-class", SOURCE, ASSIGNMENT, ARGS, EXTRA)
    assert base["returncode"] == 0, base["stderr"]
    root = base["out"].parent
    shutil.copytree(root / "class", dest / "class")
    shutil.copytree(root / "out", dest / "out", ignore=shutil.ignore_patterns("students"))
    info = notebook_info(tmp_path_factory, SOURCE, [ASSIGNMENT])
    builder = ClassBuilder(info[ASSIGNMENT][0])
    for student, (cell_id, source) in MISTAKES.items():
        nb = builder.answered(lambda gid, src, c=cell_id, s=source: s if gid == c else src)
        (dest / "class" / student).mkdir()
        nbformat.write(nb, dest / "class" / student / f"{ASSIGNMENT}.ipynb")
    proc = subprocess.run(grade_cmd(dest / "class", dest / "out", SOURCE, *ARGS), cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "12 student(s) already graded, skipped" in proc.stderr
    return dest / "out"


def _read_report(chromium: str, report, screenshot) -> dict:
    """What Chromium shows of ``report``: plots, heading, mistakes rows, not-graded text."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(screenshot), full_page=True)
            return {
                "imgs": page.eval_on_selector_all(
                    "svg.plot", "els => els.map(s => ({bars: s.querySelectorAll('rect.bar')"
                    ".length, w: s.getBoundingClientRect().width, "
                    "h: s.getBoundingClientRect().height, tall: [...s.querySelectorAll("
                    "'rect.bar')].filter(r => r.getBoundingClientRect().height > 5).length}))"),
                "heading": page.inner_text("body > p"),
                "mistakes": page.eval_on_selector_all(
                    "table.mistakes tr", "rows => rows.slice(1).map(r => [...r.cells].map("
                    "c => c.innerText.replace(/\\s+/g, ' ')))"),
                "not_graded": page.inner_text("table.not-graded"),
            }
        finally:
            browser.close()


def _check_report(seen: dict) -> None:
    assert seen["heading"] == "15 students graded."
    imgs = seen["imgs"]
    assert imgs and all(i["bars"] >= 2 and i["tall"] >= 1 and i["w"] > 100 and i["h"] > 100
                        for i in imgs), imgs  # drawn, with visible bars
    mistakes = seen["mistakes"]
    assert [m[0] for m in mistakes] == [str(i) for i in range(1, len(mistakes) + 1)]
    counts = [int(m[3]) for m in mistakes]
    assert counts == sorted(counts, reverse=True)  # ranked by how many students
    named = {m[1]: (int(m[3]), m[4]) for m in mistakes}
    assert named["unstable softmax overflowing"] == (2, "overflow_a, overflow_b"), mistakes
    kinds = {m[1]: m[5] for m in mistakes}  # catalogued mistakes are told from failure kinds
    assert kinds["unstable softmax overflowing"] == "catalogued mistake", mistakes
    assert kinds["scores transposed (K Qᵀ)"] == "catalogued mistake", mistakes
    assert kinds["not implemented"] == "failure kind", mistakes  # the blank student
    assert "transposed" in named["scores transposed (K Qᵀ)"][1], mistakes
    assert "blank" in named["not implemented"][1]
    assert "invalid_json" in seen["not_graded"]  # the grader's own evidence
    for student in ("os_exit", "infinite_loop"):  # its code ended its kernel, or ran over in
        assert student not in seen["not_graded"]  # its own cell: 0, not excused (issue 47)
    assert "ended the kernel" in named and "os_exit" in named["ended the kernel"][1], mistakes


def test_report_of_a_class_in_chromium(tmp_path_factory, tmp_path):
    chromium = _chromium()
    out = _class_with_mistakes(tmp_path_factory, tmp_path)
    ARTIFACTS.mkdir(exist_ok=True)
    _check_report(_read_report(chromium, out / "report.html", ARTIFACTS / "report-class.png"))


def _read_alone(chromium: str, page_path, screenshot) -> dict:
    """What Chromium, scripts off, shows of ``page_path``: its MathML, its images, and every
    URL the page asked for."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(java_script_enabled=False,
                                          viewport={"width": 1300, "height": 1000})
            page = context.new_page()
            asked: list[str] = []
            page.on("request", lambda r: asked.append(r.url))
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(screenshot), full_page=False)
            return {
                "asked": asked,
                "maths": page.eval_on_selector_all(
                    "math", "els => els.map(e => [e.namespaceURI, "
                    "e.getBoundingClientRect().width, e.getBoundingClientRect().height])"),
                "images": page.eval_on_selector_all(
                    "img", "els => els.map(e => [e.src.slice(0, 26), e.complete, "
                    "e.naturalWidth])"),
                "raw": page.evaluate("() => (document.body.innerText.match("
                                     "/\\$[^$\\s][^$]*\\\\[a-z]+[^$]*\\$/g) || []).length"),
            }
        finally:
            browser.close()


def test_a_returned_feedback_page_opens_on_its_own(tmp_path_factory, tmp_path):
    """Issue 48 item 7: a page given back through the LMS (``OUT_DIR/return/``), opened from a
    folder with nothing beside it and scripts off, shows its maths (MathML, laid out) and the
    chapter's diagram (an image that loaded), and asks for no file but itself."""
    chromium = _chromium()
    base = graded_class(tmp_path_factory, "nb01-class", SOURCE, ASSIGNMENT, ARGS, EXTRA)
    assert base["returncode"] == 0, base["stderr"]
    pages = sorted((base["out"] / "return").glob(f"*/{ASSIGNMENT}/{ASSIGNMENT}.html"))
    assert pages
    alone = tmp_path / "Downloads"
    alone.mkdir()
    shutil.copyfile(pages[0], alone / pages[0].name)
    ARTIFACTS.mkdir(exist_ok=True)
    seen = _read_alone(chromium, alone / pages[0].name, ARTIFACTS / "feedback-returned.png")
    assert seen["asked"] == [(alone / pages[0].name).as_uri()], seen["asked"]
    maths = seen["maths"]
    assert len(maths) > 50, len(maths)
    assert all(ns == "http://www.w3.org/1998/Math/MathML" for ns, _, _ in maths)
    assert sum(w > 0 and h > 0 for _, w, h in maths) > 50  # laid out, not raw text
    assert seen["raw"] == 0  # no $...\command...$ left as text
    figures = [i for i in seen["images"] if i[0] == "data:image/svg+xml;base64,"]
    assert figures and all(done and width > 0 for _, done, width in figures), seen["images"]
