"""The chapters graded through the real grading path: each chapter's graded proofs.

Two ``course-grade`` runs, each once per test session, grade three students who hand in every
chapter of their group: the solution (full marks), the student release as handed out (0, every
check "not implemented yet"), and the solution with one catalogued mistake per chapter
(``MISTAKES``: that exercise loses points and the feedback names the mistake).
``graded_chapter_02`` grades 02, 03 and 07 (the release filled in from the source);
``graded_chapter_04`` grades 04, 05, 06 and 08 (``ClassBuilder``). Grading does not run
demonstration cells (``autograder/grading/autograde/demo.py``): what they show is proven on the
notebook as ``course-check`` runs it (``executed_chapter``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from autograder.checks import table
from autograder.grading.cells import nbg as _nbg

from .synthetic_class import ClassBuilder
from .synthetic_class.shared import REPO, grade_cmd, graded_dir, read_csv, run_info

SOURCE = REPO / "solutions"


def _mistake(chapter: str, function: str, old: str, new: str, name: str) -> tuple:
    """(answer cell, text replaced, replacement, exercise, mistake named) of ``function``'s
    exercise in ``chapter``."""
    row = table.rows(chapter)[function]
    return row.solution_id, old, new, row.grade_id, name


# One catalogued mistake per chapter, fed through the grading path:
# (answer cell, text replaced, replacement, exercise, mistake named)
MISTAKES = {
    "02_masking": _mistake(
        "02_masking", "masked_attention",
        "    scores = scores + mask  # the survey [S4]: + M\n",
        "    scores = scores + mask  # the survey [S4]: + M\n    return "
        "torch.softmax(scores, dim=-1) @ v\n",
        "-inf producing NaN rows"),
    "03_multihead_attention": _mistake(
        "03_multihead_attention", "multi_head_attention",
        "    return merge_heads(heads) @ W_O  # (B, T_q, H*d_k) @ (H*d_k, d_model)\n",
        "    return merge_heads(heads)\n",
        "forgot W_O"),
    "04_layer_norm": _mistake(
        "04_layer_norm", "layer_norm",
        "((x - mu) ** 2).mean(dim=-1, keepdim=True)", "x.var(dim=-1, keepdim=True)",
        "unbiased variance (divided by d - 1)"),
    # [S1]'s pre-LN block written as post-LN: the residual added
    # after the norm
    "05_feed_forward_blocks": _mistake(
        "05_feed_forward_blocks", "pre_ln_block",
        "x = x + attn(norm1(x))  # R(MSA o LN1)\n    return x + ffn(norm2(x))",
        "x = norm1(x + attn(x))\n    return norm2(x + ffn(x))",
        "residual added after the norm (that is post-LN)"),
    # the KV cache mistake: token t fed at position t + 1
    "06_transformer": _mistake(
        "06_transformer", "incremental_logits", "start=t, cache=cache)",
        "start=t + 1, cache=cache)", "KV cache positions off by one"),
    "07_bpe": _mistake(
        "07_bpe", "decode", '.decode("utf-8", errors="replace")', '.decode("utf-8")',
        "decode fails on bytes that are not valid UTF-8"),
    # the warm-up counted from 0: step 0 gets learning rate 0 (no other exercise uses get_lr)
    "08_training": _mistake(
        "08_training", "get_lr", "return max_lr * (step + 1) / warmup_iters",
        "return max_lr * step / warmup_iters",
        "warm-up starts at 0 (max_lr * step / warmup_iters)"),
}


def filled_release(name: str) -> nbformat.NotebookNode:
    """The release notebook with each solution cell replaced by the source's (a perfect student)."""
    src = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
    answers = {_nbg(c)["grade_id"]: c.source for c in src.cells if _nbg(c).get("solution")}
    nb = nbformat.read(REPO / "notebooks" / name / f"{name}.ipynb", as_version=4)
    for c in nb.cells:
        if _nbg(c).get("solution"):
            c.source = answers[_nbg(c)["grade_id"]]
    return nb


# hands in each chapter as fetched from an earlier release (its answers right): graded on the
# exercises it has (tests/helpers/earlier_releases.py)
EARLIER_STUDENT = "earlier_release"
EARLIER = REPO / "tests" / "fixtures" / "earlier_releases"

# The chapters whose tests share one ``course-grade`` run (``graded_chapter``).
CHAPTERS = ("02_masking", "03_multihead_attention", "07_bpe")


def graded_chapter_02(tmp_path_factory, name: str) -> dict:
    """Grade solution / release / wrong of every chapter in ``CHAPTERS`` once (their tests run
    on one xdist worker: tests/conftest.py's SHARED_CLASSES; each student hands in every
    chapter, ``wrong`` with each chapter's own mistake); ``rows`` holds chapter ``name``'s
    rows."""
    wrongs = {n: MISTAKES[n] for n in CHAPTERS}
    root = graded_dir(tmp_path_factory) / ("chapters-" + "-".join(n[:2] for n in CHAPTERS))
    root.mkdir(parents=True, exist_ok=True)
    done = root / "result.json"
    if not done.exists():
        subs = root / "subs"
        for student in ("solution", "release", "wrong"):
            (subs / student).mkdir(parents=True, exist_ok=True)
        for n in CHAPTERS:  # the chapter as fetched from its first release, answered (issue 47)
            (subs / EARLIER_STUDENT).mkdir(exist_ok=True)
            shutil.copyfile(EARLIER / f"{n}.ipynb", subs / EARLIER_STUDENT / f"{n}.ipynb")
        for n, w in wrongs.items():
            cell_id, old, new = w[:3]
            nbformat.write(filled_release(n), subs / "solution" / f"{n}.ipynb")
            nbformat.write(
                nbformat.read(REPO / "notebooks" / n / f"{n}.ipynb", as_version=4),
                subs / "release" / f"{n}.ipynb",
            )
            nb = filled_release(n)
            (cell,) = [c for c in nb.cells if _nbg(c).get("grade_id") == cell_id]
            assert old in cell.source, f"{cell_id} no longer contains the text to replace"
            cell.source = cell.source.replace(old, new)
            nbformat.write(nb, subs / "wrong" / f"{n}.ipynb")
        t0 = time.monotonic()
        proc = subprocess.run(
            grade_cmd(subs, root / "out", SOURCE, "--workers", "2", "--cell-timeout", "60",
                      "--timeout", "600"),
            cwd=REPO, capture_output=True, text=True,
        )
        done.write_text(json.dumps({
            "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
            "seconds": time.monotonic() - t0,
        }))
    result = json.loads(done.read_text())
    out = root / "out"
    result["out"], result["assignment"] = out, name
    result["rows"] = [r for r in read_csv(out / "grades.csv") if r["notebook"] == name] \
        if result["returncode"] == 0 else []
    return result


def feedback_text(out: Path, student: str, name: str) -> str:
    text = html.unescape((out / "feedback" / student / name / f"{name}.html").read_text())
    return re.sub(r"<[^>]+>", "", text)


def autograded_notebook(out: Path, student: str, name: str) -> nbformat.NotebookNode:
    (path,) = out.glob(f".work/students/{student}/autograded/{student}/{name}/{name}.ipynb")
    return nbformat.read(path, as_version=4)


def assert_chapter_graded_correctly(result: dict, name: str, wrong: tuple) -> None:
    assert result["returncode"] == 0, result["stderr"]
    rows = result["rows"]
    by = {s: {r["exercise"]: r for r in rows if r["student"] == s}
          for s in ("solution", "release", "wrong")}
    src = nbformat.read(SOURCE / name / f"{name}.ipynb", as_version=4)
    tests = {
        _nbg(c)["grade_id"]: float(_nbg(c)["points"]) for c in src.cells if _nbg(c).get("grade")
    }
    for student, got in by.items():
        assert sorted(got) == sorted(tests), (student, sorted(got))
        assert all(r["status"] == "graded" for r in got.values()), (student, got)
    # the solution scores full marks, the release 0
    assert {ex: float(r["points"]) for ex, r in by["solution"].items()} == tests
    assert all(float(r["points"]) == 0 for r in by["release"].values())
    # the wrong submission loses exactly that exercise, and the feedback names the mistake
    exercise, mistake = wrong[3:]
    lost = {ex for ex, r in by["wrong"].items() if float(r["points"]) < tests[ex]}
    assert lost == {exercise}, lost
    text = feedback_text(result["out"], "wrong", name)
    assert f"Likely mistake: {mistake}." in text
    assert "_hidden_check(" not in text  # feedback hides the hidden tests
    assert_demo_cells_not_run({s: autograded_notebook(result["out"], s, name) for s in by}, name)


def assert_release_runs_end_to_end(out: Path, name: str) -> None:
    """Every error of the executed release is a graded check saying "not implemented yet"."""
    nb = autograded_notebook(out, "release", name)
    graded = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if _nbg(cell).get("grade"):
            graded += 1
            assert len(errors) == 1 and errors[0].ename == "NotImplementedYet", cell.source
            assert "is not implemented yet" in errors[0].evalue
        else:
            assert not errors, (cell.source, errors)
    assert graded and graded == sum(1 for c in nb.cells if _nbg(c).get("grade"))
    shown = feedback_text(out, "release", name)
    assert shown.count("is not implemented yet") == graded


def assert_fast(out: Path) -> None:
    """The filled-in notebooks run (autograde + feedback, the whole grading) in under 2 min:
    every chapter of ``CHAPTERS`` together."""
    seconds = json.loads((out / "results" / "solution.json").read_text())["seconds"]
    assert seconds < 120, seconds


def _edit(gid, old, new):
    def f(g, src):
        if g != gid:
            return src
        assert old in src, f"{old!r} not in answer cell {gid}"
        return src.replace(old, new)

    return f


# The chapters whose tests share one ``course-grade`` run (one template, one class).
CHAPTERS_04 = ("04_layer_norm", "05_feed_forward_blocks", "06_transformer", "08_training")
STUDENTS = ("solution", "release", "mistake")


def graded_chapter_04(tmp_path_factory, assignment: str) -> dict:
    """Grade solution, release and one mistake of every chapter in ``CHAPTERS`` once (the
    first chapter to ask grades them all: each student hands in every chapter, the ``mistake``
    student with each chapter's own mistake); return what ``assignment``'s tests need.

    Returns {"returncode", "stderr", "rows" {student: {exercise: row}} (this chapter's rows),
    "seconds" {student: s} (the student's whole grading, every chapter), "feedback"
    {student: html}, "autograded" {student: notebook}, "grade_cells" [...]}.
    """
    mistakes = {a: MISTAKES[a] for a in CHAPTERS_04}
    root = graded_dir(tmp_path_factory) / ("chapters-" + "-".join(a[:2] for a in CHAPTERS_04))
    root.mkdir(exist_ok=True)
    done = root / "result.json"
    if not done.exists():
        args = ("--workers", "2", "--cell-timeout", "120", "--timeout", "900")
        info = run_info(SOURCE, list(CHAPTERS_04), args)  # the template the run starts from
        cls = root / "class"
        names, grade_cells = {}, {}
        for a in CHAPTERS_04:
            nb = info[a][0]
            names[a], grade_cells[a] = nb.name, [g.grade_id for g in nb.grade_cells]
            builder = ClassBuilder(nb)
            gid, old, new = mistakes[a][:3]
            for student, book in zip(STUDENTS, (builder.answered(), builder.release(),
                                                builder.answered(_edit(gid, old, new)))):
                (cls / student).mkdir(parents=True, exist_ok=True)
                nbformat.write(book, cls / student / f"{nb.name}.ipynb")
            earlier = EARLIER / f"{nb.name}.ipynb"  # the chapter's release before its newest
            if earlier.exists():  # exercise, answered (issue 47)
                (cls / EARLIER_STUDENT).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(earlier, cls / EARLIER_STUDENT / earlier.name)
        t0 = time.monotonic()
        proc = subprocess.run(grade_cmd(cls, root / "out", SOURCE, *args), cwd=REPO,
                              capture_output=True, text=True)
        done.write_text(json.dumps({
            "returncode": proc.returncode, "stderr": proc.stderr[-5000:],
            "seconds_total": time.monotonic() - t0, "names": names,
            "grade_cells": grade_cells,
        }))
    whole = json.loads(done.read_text())
    name = whole["names"][assignment]
    result = {"returncode": whole["returncode"], "stderr": whole["stderr"],
              "seconds_total": whole["seconds_total"], "name": name,
              "grade_cells": whole["grade_cells"][assignment], "assignment": assignment}
    out = root / "out"
    result["rows"], result["seconds"], result["feedback"], result["autograded"] = {}, {}, {}, {}
    if result["returncode"] == 0:
        for r in read_csv(out / "grades.csv"):
            if r["notebook"] == name:
                result["rows"].setdefault(r["student"], {})[r["exercise"]] = r
        for s in STUDENTS:
            res = json.loads((out / "results" / f"{s}.json").read_text())
            result["seconds"][s] = res["seconds"]
            page = out / "feedback" / s / assignment / f"{name}.html"
            result["feedback"][s] = page.read_text() if page.exists() else ""
            book = (out / ".work" / "students" / s / "autograded" / s / assignment
                    / f"{name}.ipynb")
            result["autograded"][s] = nbformat.read(book, as_version=4)
    return result


def assert_demo_cells_not_run(autograded: dict, assignment: str) -> None:
    """Every demonstration cell of the chapter is in each graded copy, not run (its source
    replaced, no output); every other code cell of the source is there as it was."""
    from autograder.grading.autograde.demo import NOT_RUN, is_demo

    src = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    demos = [c.source for c in src.cells if is_demo(c)]
    assert demos, f"{assignment} has no demonstration cells"
    for student, book in autograded.items():
        code = [c for c in book.cells if c.cell_type == "code"]
        skipped = [c for c in code if c.source == NOT_RUN]
        assert len(skipped) == len(demos), (student, len(skipped), len(demos))
        assert all(not c.outputs for c in skipped), student
        assert not any(c.source in demos for c in code), student  # none of them ran


def executed_chapter(tmp_path_factory, assignment: str, which: str = "solution"):
    """The chapter's ``solutions/`` (``which="solution"``) or ``notebooks/`` (``"release"``)
    notebook executed as ``course-check`` runs it (``selfcheck.execute``: a fresh kernel,
    demonstration cells included, a training notebook at its smoke size), once per session."""
    from autograder import release, selfcheck

    base = SOURCE if which == "solution" else release.RELEASE
    root = graded_dir(tmp_path_factory) / f"executed-{assignment}-{which}"
    root.mkdir(exist_ok=True)
    done = root / f"{assignment}.ipynb"
    if not done.exists():
        nb = selfcheck.execute(base / assignment / f"{assignment}.ipynb")
        nbformat.write(nb, root / "tmp.ipynb")
        (root / "tmp.ipynb").rename(done)
    return nbformat.read(done, as_version=4)


def check_earlier_release(result: dict, added: str | None = None) -> None:
    """The earlier release's notebook (its answers right) keeps full marks on every exercise it
    has; ``added`` (the exercise added since, e.g. "2.2"; None: the exercises never changed)
    scores 0 and its row says why. Its rows are never "not graded" (nbgrader used to fail on
    the missing cells: KeyError)."""
    assert result["returncode"] == 0, result["stderr"]
    rows = result["rows"]
    rows = rows[EARLIER_STUDENT] if isinstance(rows, dict) else {
        r["exercise"]: r for r in rows if r["student"] == EARLIER_STUDENT}
    chapter = table.chapter(result["assignment"])
    new = table.exercise(result["assignment"], added).grade_id if added else None
    assert sorted(rows) == sorted(e.grade_id for e in chapter.exercises)
    for gid, r in rows.items():
        if gid == new:
            assert (r["points"], r["status"], r["diagnosis"]) == (
                "0", f"graded (not in this notebook: Exercise {added}; an earlier release of "
                "the chapter, or its cells deleted)", "earlier release"), r
        else:
            assert (r["status"], r["points"]) == ("graded", r["max_points"]), r


def check_chapter(result: dict, mistake: tuple, max_seconds: float = 120.0) -> None:
    """The standard's CI proofs on a ``graded_chapter`` result (one assert per claim)."""
    assert result["returncode"] == 0, result["stderr"]
    rows = result["rows"]
    # the solution scores full marks on every exercise
    for r in rows["solution"].values():
        assert (r["status"], r["points"]) == ("graded", r["max_points"]), r
    # the release runs end to end, scores 0, and every check says "not implemented yet"
    for r in rows["release"].values():
        assert (r["status"], r["points"]) == ("graded", "0"), r
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c
             for c in result["autograded"]["release"].cells}
    for gid in result["grade_cells"]:
        errors = [o for o in cells[gid].outputs if o.output_type == "error"]
        assert len(errors) == 1 and errors[0].ename == "NotImplementedYet", (gid, errors)
        assert "is not implemented yet" in errors[0].evalue, errors[0].evalue
    assert_demo_cells_not_run(result["autograded"], result["assignment"])
    # one catalogued mistake: less than full marks there, full elsewhere; feedback names it
    exercise, name = mistake[3], mistake[4]
    for ex, r in rows["mistake"].items():
        if ex == exercise:
            assert r["status"] == "graded" and float(r["points"]) < float(r["max_points"]), r
        else:
            assert r["points"] == r["max_points"], r
    assert f"Likely mistake: {name}." in result["feedback"]["mistake"]
    # the notebooks execute (and are graded) on CPU in under 2 minutes: every chapter of
    # CHAPTERS together, the solution student's whole grading
    assert result["seconds"]["solution"] < max_seconds, result["seconds"]


def warnings_in_course_cells(book) -> list[str]:
    """Warning text in the outputs of a graded notebook's course cells (not the test cells,
    where a failed check may legitimately print): every student's feedback would carry it."""
    found = []
    for i, cell in enumerate(book.cells):
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        for out in cell.outputs:
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            if "Warning" in text or "warnings.warn" in text:
                found.append(f"cell {i}: {text[:300]}")
    return found


def source_notebook(assignment: str) -> nbformat.NotebookNode:
    """The chapter's source notebook (``solutions/``)."""
    return nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)


def assert_points_add_up(assignment: str) -> None:
    """The title cell of the source states the sum of the graded cells' points."""
    nb = source_notebook(assignment)
    points = [c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert f"Points: {sum(points):g} in total" in nb.cells[0].source


def assert_every_check_called(assignment: str, checks: str, call: str = '_hidden_check("{k}"',
                              not_checks: int = 0) -> None:
    """Every check registered by ``autograder.checks.<checks>`` (one per name it exports, but
    ``not_checks`` of them) is called in the source as ``call`` (``{k}``: the key)."""
    import importlib

    from autograder.checks._core import registered

    module = importlib.import_module(f"autograder.checks.{checks}")
    text = "\n".join(c.source for c in source_notebook(assignment).cells)
    keys = [k for k in registered() if k.startswith(f"{checks}.")]
    assert len(keys) == len(module.__all__) - not_checks
    for k in keys:
        assert call.format(k=k) in text, k


class GradedWithChapter02:
    """The proofs of a chapter of ``CHAPTERS`` on ``graded_chapter_02``'s run: a test module's
    ``Test...`` class subclasses it and names its chapter (``NAME``)."""

    NAME: str

    @pytest.fixture(scope="class")
    @classmethod
    def chapter(cls, tmp_path_factory):
        return graded_chapter_02(tmp_path_factory, cls.NAME)

    def test_solution_full_marks_release_zero_and_mistake_named(self, chapter):
        assert_chapter_graded_correctly(chapter, self.NAME, MISTAKES[self.NAME])

    def test_first_release_graded_with_full_marks(self, chapter):
        """The chapter as a student fetched it from its first release, answered (issue 47): its
        exercises never changed, so full marks, and its rows say nothing about an edit."""
        check_earlier_release(chapter)

    def test_release_executes_end_to_end_saying_not_implemented_yet(self, chapter):
        assert chapter["returncode"] == 0, chapter["stderr"]
        assert_release_runs_end_to_end(chapter["out"], self.NAME)

    def test_notebook_runs_in_under_two_minutes(self, chapter):
        assert chapter["returncode"] == 0, chapter["stderr"]
        assert_fast(chapter["out"])


class GradedWithChapter04:
    """The proofs of a chapter of ``CHAPTERS_04`` on ``graded_chapter_04``'s run and in its
    source: a test module's ``Test...`` class subclasses it and names its chapter
    (``ASSIGNMENT``), the exercise added since its earlier release (``ADDED``; None: none),
    and its checks module (``CHECKS``: ``autograder.checks.<CHECKS>``, called as ``CALL``,
    exporting ``NOT_CHECKS`` names that are not checks)."""

    ASSIGNMENT: str
    ADDED: str | None = None
    CHECKS: str
    CALL = '_hidden_check("{k}"'
    NOT_CHECKS = 0

    @pytest.fixture(scope="class")
    @classmethod
    def graded(cls, tmp_path_factory):
        return graded_chapter_04(tmp_path_factory, cls.ASSIGNMENT)

    def test_grading_path_proofs(self, graded):
        check_chapter(graded, MISTAKES[self.ASSIGNMENT])

    def test_earlier_release_graded_on_its_own_exercises(self, graded):
        """The chapter as a student fetched it from an earlier release, answered (issue 47):
        full marks on every exercise it has; the one added since (``ADDED``) scores 0 and its
        row says why (no exercise added: full marks, and its rows say nothing about an
        edit)."""
        check_earlier_release(graded, self.ADDED)

    def test_points_in_the_title_cell_add_up(self):
        assert_points_add_up(self.ASSIGNMENT)

    def test_every_check_is_called_with_its_hidden_key_in_the_source(self):
        assert_every_check_called(self.ASSIGNMENT, self.CHECKS, self.CALL, self.NOT_CHECKS)


class CourseCellsQuiet:
    """With ``GradedWithChapter04``, in a module with an ``executed`` fixture (the solution as
    ``course-check`` runs it): no warning in the course cells of either."""

    def test_course_cells_print_no_warnings(self, graded, executed):
        """Issue 18 trial: a course cell's deprecation warning (06: imshow of a tensor, 08:
        ax.bar of a tensor) lands in every student's feedback (graded) or notebook
        (executed)."""
        assert warnings_in_course_cells(graded["autograded"]["solution"]) == []
        assert warnings_in_course_cells(executed) == []
