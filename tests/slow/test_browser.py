"""The course in JupyterLab, in a real browser: what a student does on day one.

Starts JupyterLab headless on a free localhost port (random token) on a temporary copy of the
course, drives the system's Chromium with Playwright, and

* opens the solution of notebook 01, checks nbgrader's extension is there (Validate button,
  Nbgrader menu), runs all cells from the Run menu, and checks every check cell shows its
  success message, no cell failed, and the attention heatmap is on the page as an image;
  saves a screenshot to ``test-artifacts/``;
* meanwhile, in a second tab, opens the student release of notebook 01, runs all cells, and
  checks the first check says "not implemented yet" (and nothing before it failed); saves a
  screenshot too.

Skipped, with the reason, only where no Chromium executable can be found
(``.ci/run`` installs Debian's ``chromium`` where it can). Set COURSE_CHROMIUM to use another.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from helpers.browser import (
    CHROMIUM_CANDIDATES,
    CHROMIUM_FLAGS,
    PANEL,
    LabServer,
    find_chromium,
    open_notebook,
    save_notebook,
    start_run_all,
    wait_run_done,
)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHAPTER = "01_attention"
SOLUTION = f"solutions/{CHAPTER}/{CHAPTER}.ipynb"
RELEASE = f"notebooks/{CHAPTER}/{CHAPTER}.ipynb"

CHECK_CALL = re.compile(r"^\s*check_\w+\(", re.M)  # a visible check: `check_softmax(softmax)`
SUCCESS = re.compile(r"✔ .*match(es)? the reference")  # autograder.checks' success line
NOT_YET = "not implemented yet"


# Per cell, in page order: kind, prompt, output text, and the images it shows (rendered size).
CELLS_JS = """() => [...document.querySelectorAll(
        'PANEL .jp-Notebook .jp-Cell')].map(c => ({
    kind: c.classList.contains('jp-CodeCell') ? 'code'
          : c.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
    prompt: (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '',
    text: [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent).join('\\n'),
    images: [...c.querySelectorAll('.jp-OutputArea-output img')].map(i => ({
        natural: i.naturalWidth, width: i.getBoundingClientRect().width,
        height: i.getBoundingClientRect().height})),
}))""".replace("PANEL", PANEL)


def _chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip(
            "no Chromium to drive: looked for $COURSE_CHROMIUM, "
            + ", ".join(CHROMIUM_CANDIDATES)
            + " and `chromium` on PATH (install it: apt-get install -y chromium)")
    return path


def _course_copy(dest: Path) -> Path:
    """The course folder as a student has it, in a temp dir (saving must not touch the repo)."""
    for sub in ("solutions", "notebooks"):
        shutil.copytree(ROOT / sub, dest / sub, ignore=shutil.ignore_patterns(
            ".ipynb_checkpoints", "__pycache__"))
    return dest


def _page_cells(page, expected: nbformat.NotebookNode) -> list[dict]:
    cells = page.evaluate(CELLS_JS)
    kinds = [c.cell_type for c in expected.cells]
    assert [c["kind"] for c in cells] == kinds, "the page does not show the notebook's cells"
    return cells


def _check_indices(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and CHECK_CALL.search(c.source)]


@contextmanager
def _screenshot_on_failure(page, lab: LabServer, name: str):
    try:
        yield
    except Exception as e:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}-FAILED.png"))
        raise AssertionError(f"{e}\n--- JupyterLab log (tail) ---\n{lab.log()}") from e


def _scroll_to(page, cell_index: int, block: str = "center") -> None:
    """Scroll the notebook so cell ``cell_index`` is at the top/center of the view."""
    page.locator(f"{PANEL} .jp-Notebook .jp-Cell").nth(cell_index).evaluate(
        f"e => e.scrollIntoView({{block: '{block}'}})")
    page.wait_for_timeout(300)  # let the scroll settle before the picture


def _start(page, lab: LabServer, course: Path, rel: str) -> nbformat.NotebookNode:
    """Open notebook ``rel`` in ``page``, check nbgrader's extension is there, Run All Cells."""
    assert (course / rel).exists(), f"{rel} is missing"
    nb = nbformat.read(course / rel, as_version=4)
    assert _check_indices(nb), f"{rel} calls no check_*(...)"
    open_notebook(page, lab, rel)
    # nbgrader's lab extension, as the README promises: Validate in the notebook toolbar and
    # the Nbgrader menu (Assignment List).
    assert page.locator(".jp-NotebookPanel-toolbar .validate-button").count() == 1, \
        "nbgrader's Validate button is missing from the notebook toolbar"
    assert "Nbgrader" in page.locator(".lm-MenuBar-item").all_text_contents()
    start_run_all(page)
    return nb


def _finish_solution(page, course: Path, nb) -> None:
    checks = _check_indices(nb)
    wait_run_done(page)
    cells = _page_cells(page, nb)
    for i, (c, src) in enumerate(zip(cells, nb.cells)):
        if c["kind"] == "code" and src.source.strip():
            assert re.fullmatch(r"\[\d+\]:", c["prompt"].strip()), \
                f"cell {i} did not run (prompt {c['prompt']!r}):\n{src.source[:300]}"
        assert "✘" not in c["text"] and "Traceback" not in c["text"], \
            f"cell {i} failed in the solution notebook:\n{c['text'][:1500]}"
    for i in checks:
        assert SUCCESS.search(cells[i]["text"]), (
            f"check cell {i} shows no success message:\n{nb.cells[i].source}\n"
            f"-> {cells[i]['text']!r}")
    n_success = sum(len(SUCCESS.findall(c["text"])) for c in cells)
    assert n_success >= len(checks)

    # The attention heatmap: a figure drawn by a cell after the first check, shown as an image.
    shown = [i for i, c in enumerate(cells)
             if any(im["natural"] > 100 and im["width"] > 100 and im["height"] > 100
                    for im in c["images"])]
    assert shown, "no figure (image output) appeared on the page"
    heatmap = next((i for i in shown if re.search(r"imshow|heatmap|matshow|plot_attention",
                                                  nb.cells[i].source)), None)
    assert heatmap is not None, \
        f"no image output comes from a heatmap cell (images in cells {shown})"

    _scroll_to(page, heatmap, "start")  # the heatmap's code and figure
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser-01-solution.png"))

    # What the browser shows is also what it saves: no error output, the figure as PNG.
    save_notebook(page, course / SOLUTION)
    saved = nbformat.read(course / SOLUTION, as_version=4)
    errors = [(i, o.get("ename")) for i, c in enumerate(saved.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, f"error outputs in the saved solution notebook: {errors}"
    assert any("image/png" in o.get("data", {}) for o in saved.cells[heatmap].outputs)


def _finish_release(page, nb) -> None:
    first = _check_indices(nb)[0]
    wait_run_done(page)
    cells = _page_cells(page, nb)
    for i in range(first):
        assert "Traceback" not in cells[i]["text"] and "✘" not in cells[i]["text"], \
            f"cell {i} failed before the first check:\n{cells[i]['text'][:1500]}"
    text = cells[first]["text"]
    assert re.fullmatch(r"\[\d+\]:", cells[first]["prompt"].strip()), "first check did not run"
    assert NOT_YET in text, f"first check of the release does not say {NOT_YET!r}:\n{text}"
    assert not SUCCESS.search(text) and "Traceback" not in text, text

    _scroll_to(page, first)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser-01-release.png"))


def test_notebook_01_in_jupyterlab(tmp_path):
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    course = _course_copy(tmp_path / "course")
    t0 = time.monotonic()
    with LabServer(course, tmp_path) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh --user-data-dir
            executable_path=chromium, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000})
        try:
            sol = browser.pages[0] if browser.pages else browser.new_page()
            rel = browser.new_page()
            for page in (sol, rel):
                page.set_default_timeout(30_000)
            t1 = time.monotonic()
            # Both notebooks run at once, in two tabs, each with its own kernel.
            with _screenshot_on_failure(sol, lab, "browser-01-solution"):
                sol_nb = _start(sol, lab, course, SOLUTION)
            with _screenshot_on_failure(rel, lab, "browser-01-release"):
                rel_nb = _start(rel, lab, course, RELEASE)
            with _screenshot_on_failure(sol, lab, "browser-01-solution"):
                _finish_solution(sol, course, sol_nb)
            t2 = time.monotonic()
            with _screenshot_on_failure(rel, lab, "browser-01-release"):
                _finish_release(rel, rel_nb)
            t3 = time.monotonic()
        finally:
            browser.close()
    print(f"\nbrowser test: {time.monotonic() - t0:.1f} s (server and browser up {t1 - t0:.1f} s, "
          f"solution {t2 - t1:.1f} s, then release {t3 - t2:.1f} s)")


def _nbgrader_panels(page) -> dict:
    """What nbgrader shows in the open notebook's JupyterLab: its menu's items, the Create
    Assignment sidebar, the Validate button."""
    page.locator(".lm-MenuBar-item", has_text="Nbgrader").click()
    menu = [t for t in page.locator(".lm-Menu-itemLabel").all_text_contents() if t.strip()]
    page.keyboard.press("Escape")
    tabs = page.locator(".lm-TabBar-tab").evaluate_all(
        "els => els.map(e => e.getAttribute('title') || e.textContent)")
    return {
        "menu": menu,
        "create_assignment": any("Create Assignment" in t for t in tabs),
        "validate": page.locator(".jp-NotebookPanel-toolbar .validate-button").count(),
    }


def _hint_in_two_steps(page) -> dict:
    """Open Exercise 1.1's hint as a student does: its first fold shows the nudge and keeps the
    key line folded; the second fold shows the key line with its code rendered."""
    cell = page.locator(f"{PANEL} .jp-MarkdownCell", has_text="Exercise 1.1").first
    cell.scroll_into_view_if_needed()
    outer = cell.locator("details").first
    outer.locator("summary").first.click()
    inner = outer.locator("details").first
    seen = {"nudge_first": outer.locator("p").first.is_visible(),
            "key_hidden_first": not inner.locator("code").first.is_visible()}
    inner.locator("summary", has_text="The key line").click()
    seen["key_then"] = inner.locator("code").first.is_visible()
    return seen


@pytest.mark.parametrize("view", ["student", "instructor"])
def test_lab_views_show_the_student_or_the_instructor_panels(view, tmp_path):
    """Issue 18 trial: `lab` showed students nbgrader's instructor panels. The student view
    (the default) has Validate and the Assignment List only; `lab --instructor` has
    Formgrader and Create Assignment too."""
    from playwright.sync_api import sync_playwright

    chromium = _chromium()
    course = _course_copy(tmp_path / "course")
    with LabServer(course, tmp_path, startup_timeout=180, view=view) as lab, \
            sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            with _screenshot_on_failure(page, lab, f"browser-lab-{view}"):
                open_notebook(page, lab, RELEASE)
                seen = _nbgrader_panels(page)
                if view == "student":
                    hint = _hint_in_two_steps(page)
        finally:
            browser.close()
    if view == "student":  # issue 49 item 5: the nudge first, the key line in a second fold
        assert hint == {"nudge_first": True, "key_hidden_first": True, "key_then": True}, hint
    assert seen["validate"] == 1, seen
    assert "Assignment List" in seen["menu"], seen
    if view == "student":
        assert seen["menu"] == ["Assignment List"], seen
        assert not seen["create_assignment"], seen
    else:
        assert {"Formgrader", "Create assignment", "Course List"} <= set(seen["menu"]), seen
        assert seen["create_assignment"], seen


def test_lab_command_passes_its_token_and_folder(monkeypatch, capsys):
    """`python3 -m autograder.bootstrap lab` gives JupyterLab its token and notebooks/ and
    lets it pick the port from 8888 (the URL is printed by ``serve``); with the user's own
    --port it passes no token."""
    from autograder import bootstrap

    calls = []
    monkeypatch.setattr(bootstrap, "setup", lambda: None)
    monkeypatch.setattr(bootstrap, "serve",
                        lambda argv, env, cwd, token: calls.append((argv, env, token)) or 0)

    assert bootstrap.lab([]) == 0
    argv, env, token = calls[-1]
    assert argv[1] == "lab" and f"--notebook-dir={ROOT / 'notebooks'}" in argv
    assert "--port=8888" in argv and f"--IdentityProvider.token={token}" in argv
    assert "--ServerApp.port_retries=100" in argv

    assert bootstrap.lab(["--port=9999"]) == 0
    argv, env, token = calls[-1]
    assert "--port=9999" in argv and not any(a.startswith("--IdentityProvider") for a in argv)
    assert token is None and "token=" not in capsys.readouterr().out

    # the student's view by default; `--instructor` is taken by `lab`, not passed to Jupyter
    student = str(bootstrap.VENV / "course-lab" / "student")
    assert calls[0][1]["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == student
    assert bootstrap.lab(["--instructor"]) == 0
    assert "--instructor" not in calls[-1][0]
    assert student not in calls[-1][1].get("JUPYTER_CONFIG_PATH", "")
    assert "instructor's view" in capsys.readouterr().out


def test_lab_prints_the_url_that_serves_when_its_first_port_is_taken(capsys):
    """Another server holds 8888 (and the next ports may be taken meanwhile): the printed URL
    is the port JupyterLab bound, and that URL answers with the course's notebooks."""
    import socket
    import threading
    import urllib.request

    from autograder import bootstrap

    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        held.bind(("127.0.0.1", 8888))
        held.listen()
    except OSError:
        pass  # already taken by something else: the same situation
    token = "0123456789abcdef"
    argv = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
            "--port=8888", "--ServerApp.port_retries=100", f"--IdentityProvider.token={token}",
            f"--notebook-dir={ROOT / 'notebooks'}", *(["--allow-root"] if os.geteuid() == 0
                                                     else [])]
    status = {}
    worker = threading.Thread(target=lambda: status.update(
        code=bootstrap.serve(argv, dict(os.environ), None, token)))
    worker.start()
    try:
        deadline, url = time.monotonic() + 120, None
        while url is None and time.monotonic() < deadline and worker.is_alive():
            time.sleep(0.5)
            out = capsys.readouterr().out
            found = re.search(r"http://127\.0\.0\.1:(\d+)/lab\?token=(\w+)", out)
            url = found and found[0]
        assert url and found[2] == token and found[1] != "8888", out
        api = url.replace("/lab?", "/api/contents/01_attention?")
        with urllib.request.urlopen(api, timeout=30) as r:
            assert "01_attention.ipynb" in r.read().decode()
    finally:
        held.close()
        if url:  # the server's own shutdown endpoint: serve() then returns its exit status
            stop = urllib.request.Request(url.replace("/lab?", "/api/shutdown?"), method="POST")
            urllib.request.urlopen(stop, timeout=30).close()
        worker.join(60)
    assert not worker.is_alive() and status.get("code") == 0
