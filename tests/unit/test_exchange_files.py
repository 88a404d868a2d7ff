"""The course folder's config and nbgrader's exchange files, without grading (issue 48 item 8).

``write_course_config`` rewrites only its own ``nbgrader_config.py``; ``exchange.carry`` puts
the secret ``nbgrader submit`` wrote, and the submission's time, where ``nbgrader
release_feedback`` reads them. The whole round trip through nbgrader: tests/slow/test_exchange.py.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from autograder.grading.config import GradeConfig
from autograder.grading.parent.course import MARK
from autograder.grading.parent.exchange import SECRET, STAMP, carry
from autograder.grading.parent.results import write_course_config

CONFIG = GradeConfig(cell_timeout=10)
SECRET_TEXT = "0f" * 64  # as nbgrader's secrets.token_hex(64)


def test_instructor_config_is_never_rewritten(tmp_path):
    mine = tmp_path / "nbgrader_config.py"
    mine.write_text("c = get_config()\nc.CourseDirectory.course_id = 'ml101'\n"
                    "c.Exchange.root = '/srv/nbgrader/exchange'\n")
    before = mine.read_bytes()
    add = write_course_config(tmp_path, CONFIG, "10%/day")
    assert mine.read_bytes() == before
    assert not (tmp_path / "exchange").exists()  # the instructor's exchange is elsewhere
    assert "c.AssignLatePenalties.plugin_class = " \
        "'autograder.grading.gradebook.LatePolicyPlugin'" in add
    assert "c.LatePolicyPlugin.penalty = '10%/day'" in add
    # with the lines added by hand, nothing more to say; the file still unchanged
    mine.write_text(mine.read_text() + "\n".join(add) + "\n")
    after = mine.read_bytes()
    assert write_course_config(tmp_path, CONFIG, "10%/day") == []
    assert mine.read_bytes() == after


def test_own_config_is_rewritten(tmp_path):
    assert write_course_config(tmp_path, CONFIG, "zero") == []
    text = (tmp_path / "nbgrader_config.py").read_text()
    assert text.startswith(MARK) and "c.LatePolicyPlugin.penalty = 'zero'" in text
    assert f"c.Exchange.root = {str(tmp_path / 'exchange')!r}" in text
    assert write_course_config(tmp_path, CONFIG, "none") == []  # the next run's policy
    text = (tmp_path / "nbgrader_config.py").read_text()
    assert "'none'" in text and "'zero'" not in text
    # a file an older course-grade wrote (no mark line) is course-grade's too
    (tmp_path / "nbgrader_config.py").write_text(
        text.replace(MARK + "\n", "").replace("'none'", "'zero'"))
    assert write_course_config(tmp_path, CONFIG, "none") == []
    assert "'zero'" not in (tmp_path / "nbgrader_config.py").read_text()


def _graded(staging: Path, student: str, assignment: str) -> None:
    for kind, name in (("submitted", "nb.ipynb"), ("feedback", "nb.html")):
        folder = staging / kind / student / assignment
        folder.mkdir(parents=True)
        (folder / name).write_text("x")


def test_carry_puts_the_secret_where_release_feedback_reads_it(tmp_path):
    collected, staging, kept = tmp_path / "submitted" / "ann", tmp_path / "staging", \
        tmp_path / "out" / "submitted" / "ann"
    (collected / "a1").mkdir(parents=True)
    (collected / "a1" / SECRET).write_text(SECRET_TEXT)
    (kept / "a2").mkdir(parents=True)  # an earlier run's copy: a regrade from OUT_DIR
    (kept / "a2" / SECRET).write_text("ab" * 64)
    for a in ("a1", "a2", "a3"):
        _graded(staging, "ann", a)
    at = datetime(2026, 12, 7, 20, 31, 23, 450755, tzinfo=UTC)
    assert carry([collected, kept], staging, "ann", ["a1", "a2", "a3"], {"a1": at}) == 2
    fb = staging / "feedback" / "ann"
    assert (fb / "a1" / SECRET).read_text() == SECRET_TEXT
    assert (fb / "a1" / STAMP).read_text() == "2026-12-07 20:31:23.450755 UTC"
    assert (staging / "submitted" / "ann" / "a1" / SECRET).read_text() == SECRET_TEXT
    assert (fb / "a2" / SECRET).read_text() == "ab" * 64 and (fb / "a2" / STAMP).read_text() == ""
    # no secret (not through the exchange): neither file, nbgrader could not deliver it
    assert not (fb / "a3" / SECRET).exists() and not (fb / "a3" / STAMP).exists()


def test_carry_reads_only_a_secret(tmp_path):
    collected, staging = tmp_path / "submitted" / "ann", tmp_path / "staging"
    other = tmp_path / "bob_secret.txt"
    other.write_text(SECRET_TEXT)
    (collected / "a1").mkdir(parents=True)
    os.symlink(other, collected / "a1" / SECRET)  # a link is not followed
    (collected / "a2").mkdir()
    (collected / "a2" / SECRET).write_text("<script>" + "0" * 40)
    (collected / "a3").mkdir()
    (collected / "a3" / SECRET).write_text("0" * 2000)  # over nbgrader's size
    for a in ("a1", "a2", "a3"):
        _graded(staging, "ann", a)
    assert carry([collected], staging, "ann", ["a1", "a2", "a3"], {}) == 0
    assert not list((staging / "feedback").rglob(SECRET))
