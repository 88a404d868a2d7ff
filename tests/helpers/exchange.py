"""An nbgrader course on one machine: the instructor's course folder, the exchange, students.

Shared by tests/slow/test_exchange.py (the command-line round trip) and
tests/slow/test_jupyterhub.py (the same course behind a JupyterHub). Every nbgrader command
runs as a subprocess of this environment's Python; a student's runs with the student's own
home (``HOME`` and ``JUPYTER_CONFIG_DIR``), as a per-user server on a hub has.
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
# ann's answer (the source's): shown on her feedback page only
RIGHT_ANSWER = "return sum(x * x for x in xs)"


def env(home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    if home is not None:  # a student's account: its own home and Jupyter config
        env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"))
    return env


def nbgrader(cwd: Path, *args: str, home: Path | None = None) -> str:
    proc = subprocess.run([*NBGRADER, *args], cwd=cwd, env=env(home), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def make_exchange(exchange: Path) -> Path:
    """The exchange folder, open to every account (nbgrader's own layout goes inside)."""
    exchange.mkdir(parents=True)
    exchange.chmod(0o777)  # `chmod 777 EXCHANGE`: each student writes their inbound copy
    return exchange


def course_folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The instructor's course folder (the fixture assignment in ``source/``) and the exchange.

    Returns (course, its nbgrader_config.py, exchange).
    """
    exchange, course = make_exchange(tmp_path / "exchange"), tmp_path / "course"
    shutil.copytree(SOURCE / ASSIGNMENT, course / "source" / ASSIGNMENT)
    config = course / "nbgrader_config.py"
    config.write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    return course, config, exchange


def formgrader_api(course: Path):
    """nbgrader's API on the course folder, as formgrader's buttons call it (in this process:
    one import of nbgrader for all the instructor's steps)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", str(course)).load_config()
    return NbGraderAPI(CourseDirectory(config=config, root=str(course)), config=config)


def done(result: dict) -> str:
    """The log of one of :func:`formgrader_api`'s steps, which must have succeeded."""
    assert result["success"], result
    return result["log"]


def student_home(home: Path, student: str, exchange: Path) -> Path:
    """``home`` made a student's: its ``.jupyter/nbgrader_config.py`` names the student."""
    (home / ".jupyter").mkdir(parents=True, exist_ok=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.student_id = {student!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    return home


def answer_right(assignment_dir: Path) -> None:
    """The fetched notebook replaced by the right answers (the source's cells, ids and all)."""
    shutil.copyfile(SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                    assignment_dir / f"{ASSIGNMENT}.ipynb")


def course_grade(course: Path) -> subprocess.CompletedProcess:
    """course-grade on the course's collected ``submitted/``, out into the course folder."""
    from autograder.grading.sandbox import bwrap_path

    sandbox = () if bwrap_path() else ("--unsandboxed",)
    proc = subprocess.run(
        grade_cmd(course / "submitted", course, SOURCE, "--workers", "1", "--cell-timeout", "10",
                  *sandbox), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def fetched_page(assignment_dir: Path) -> str:
    """The text of the one feedback page fetched into ``assignment_dir``, as a browser shows
    it (the answers are highlighted: spans)."""
    found = sorted((assignment_dir / "feedback").glob(f"*/{ASSIGNMENT}.html"))
    assert len(found) == 1, found
    return html.unescape(re.sub(r"<[^>]+>", "", found[0].read_text()))
