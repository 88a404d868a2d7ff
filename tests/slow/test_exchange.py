"""nbgrader's exchange, round trip, on one machine (issue 48 item 8).

An instructor's nbgrader course folder of the small fixture assignment (its own
``nbgrader_config.py``: course id, exchange root), an exchange folder and two students, each
with a home of their own (a ``.jupyter/nbgrader_config.py`` naming the student, the course and
the exchange, as JupyterHub's per-user servers have):

``nbgrader generate_assignment`` and ``release_assignment``; each student ``fetch_assignment``
and ``submit`` (ann the right answers, bob the release as fetched); ``nbgrader collect``;
``course-grade`` on the course's ``submitted/`` with ``--out`` the course folder (one run);
``nbgrader release_feedback``; each student ``fetch_feedback``.

Asserted: the instructor's ``nbgrader_config.py``, ``source/`` and ``submitted/`` are byte
for byte what they were (the run names the lines to add instead); release_feedback succeeds;
each student fetches exactly one page, their own (their score and their answers, not the
other's).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.synthetic_class.shared import REPO, grade_cmd

SOURCE = REPO / "tests" / "fixtures" / "solutions"
ASSIGNMENT = "99_fixture"
COURSE_ID = "tfs101"
NBGRADER = [sys.executable, "-m", "nbgrader"]


def _env(home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    if home is not None:  # a student's account: its own home and Jupyter config
        env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"))
    return env


def _nbgrader(cwd: Path, *args: str, home: Path | None = None) -> str:
    proc = subprocess.run([*NBGRADER, *args], cwd=cwd, env=_env(home), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def test_exchange_round_trip(tmp_path):
    exchange, course = tmp_path / "exchange", tmp_path / "course"
    exchange.mkdir(mode=0o777)
    shutil.copytree(SOURCE / ASSIGNMENT, course / "source" / ASSIGNMENT)
    config = course / "nbgrader_config.py"
    config.write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    before = config.read_bytes()
    _nbgrader(course, "generate_assignment", ASSIGNMENT)
    _nbgrader(course, "release_assignment", ASSIGNMENT)

    homes = {}
    for student in ("ann", "bob"):
        home = homes[student] = tmp_path / "home" / student
        (home / ".jupyter").mkdir(parents=True)
        (home / "work").mkdir()
        (home / ".jupyter" / "nbgrader_config.py").write_text(
            "c = get_config()  # noqa: F821\n"
            f"c.CourseDirectory.student_id = {student!r}\n"
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"c.Exchange.root = {str(exchange)!r}\n")
        _nbgrader(home / "work", "fetch_assignment", ASSIGNMENT, home=home)
    # ann hands in the right answers (the source's cells, ids and all), bob the release as is
    shutil.copyfile(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                    homes["ann"] / "work" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    for home in homes.values():
        _nbgrader(home / "work", "submit", ASSIGNMENT, home=home)
    _nbgrader(course, "collect", ASSIGNMENT)
    for student in homes:
        assert (course / "submitted" / student / ASSIGNMENT / "submission_secret.txt").is_file()

    # nbgrader's own folders, as the instructor's tools left them
    theirs = {p: p.read_bytes() for top in ("source", "submitted")
              for p in sorted((course / top).rglob("*")) if p.is_file()}

    from autograder.grading.sandbox import bwrap_path

    sandbox = () if bwrap_path() else ("--unsandboxed",)
    proc = subprocess.run(
        grade_cmd(course / "submitted", course, SOURCE, "--workers", "1", "--cell-timeout", "10",
                  *sandbox), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert config.read_bytes() == before  # the instructor's file, untouched
    # ... and source/ and submitted/: nothing course-grade did not make is changed
    assert {p: p.read_bytes() for p in theirs if p.is_file()} == theirs
    assert f"{ASSIGNMENT} not made by course-grade (the instructor's): left as it is" \
        in proc.stderr
    assert f"{config} is not course-grade's: left as it is" in proc.stderr
    assert "c.AssignLatePenalties.plugin_class = " in proc.stderr  # what to add instead

    released = _nbgrader(course, "release_feedback", ASSIGNMENT)
    assert released.count("Releasing feedback for student") == 2, released
    pages = {}
    for student, home in homes.items():
        _nbgrader(home / "work", "fetch_feedback", ASSIGNMENT, home=home)
        found = sorted((home / "work" / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
        assert len(found) == 1, found
        # the page's text as a browser shows it (the answers are highlighted: spans)
        pages[student] = html.unescape(re.sub(r"<[^>]+>", "", found[0].read_text()))
    right = "return sum(x * x for x in xs)"  # ann's answer, shown on her page only
    assert "Score: 6.0 / 6.0" in pages["ann"] and right in pages["ann"]
    assert "Score: 0.0 / 6.0" in pages["bob"] and right not in pages["bob"]
    assert "NotImplementedError" in pages["bob"]
    assert not any("HIDDEN_TEST_MARKER" in page for page in pages.values())
