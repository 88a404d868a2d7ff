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

from helpers.exchange import (
    ASSIGNMENT,
    RIGHT_ANSWER,
    answer_right,
    course_folder,
    course_grade,
    fetched_page,
    nbgrader,
    student_home,
)


def test_exchange_round_trip(tmp_path):
    course, config, exchange = course_folder(tmp_path)
    before = config.read_bytes()
    nbgrader(course, "generate_assignment", ASSIGNMENT)
    nbgrader(course, "release_assignment", ASSIGNMENT)

    homes = {}
    for student in ("ann", "bob"):
        home = homes[student] = student_home(tmp_path / "home" / student, student, exchange)
        (home / "work").mkdir()
        nbgrader(home / "work", "fetch_assignment", ASSIGNMENT, home=home)
    # ann hands in the right answers, bob the release as is
    answer_right(homes["ann"] / "work" / ASSIGNMENT)
    for home in homes.values():
        nbgrader(home / "work", "submit", ASSIGNMENT, home=home)
    nbgrader(course, "collect", ASSIGNMENT)
    for student in homes:
        assert (course / "submitted" / student / ASSIGNMENT / "submission_secret.txt").is_file()

    # nbgrader's own folders, as the instructor's tools left them
    theirs = {p: p.read_bytes() for top in ("source", "submitted")
              for p in sorted((course / top).rglob("*")) if p.is_file()}

    proc = course_grade(course)
    assert config.read_bytes() == before  # the instructor's file, untouched
    # ... and source/ and submitted/: nothing course-grade did not make is changed
    assert {p: p.read_bytes() for p in theirs if p.is_file()} == theirs
    assert f"{ASSIGNMENT} not made by course-grade (the instructor's): left as it is" \
        in proc.stderr
    assert f"{config} is not course-grade's: left as it is" in proc.stderr
    assert "c.AssignLatePenalties.plugin_class = " in proc.stderr  # what to add instead

    released = nbgrader(course, "release_feedback", ASSIGNMENT)
    assert released.count("Releasing feedback for student") == 2, released
    pages = {}
    for student, home in homes.items():
        nbgrader(home / "work", "fetch_feedback", ASSIGNMENT, home=home)
        pages[student] = fetched_page(home / "work" / ASSIGNMENT)
    assert "Score: 6.0 / 6.0" in pages["ann"] and RIGHT_ANSWER in pages["ann"]
    assert "Score: 0.0 / 6.0" in pages["bob"] and RIGHT_ANSWER not in pages["bob"]
    assert "NotImplementedError" in pages["bob"]
    assert not any("HIDDEN_TEST_MARKER" in page for page in pages.values())
