"""course-grade's command line before any grading (issue 31, items 11 and 15): ``--dry-run``'s
roster, the folders refused as SUBMISSIONS_DIR, and option errors that name the option, show
an example or list the valid names. Each stops before the sandbox or nbgrader runs and writes
nothing to OUT_DIR; ``main`` runs in-process (Ctrl-C, which needs a real process, is in
tests/grading/test_grade_interrupt.py).
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder.grade import main

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "solutions"  # one assignment: 99_fixture
NB = (FIXTURE / "99_fixture" / "99_fixture.ipynb").read_text()


def _run(capsys, *argv) -> tuple[int, list[str], list[str]]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def _canvas_class(subs: Path) -> None:
    """Canvas files (leeann on time, wangbo marked LATE), the download's zip left next to
    them, a student folder without the notebook, and an encrypted-looking broken zip."""
    subs.mkdir(parents=True)
    for fname in ("leeann_1001_5001_99_fixture.ipynb", "wangbo_LATE_1002_5002_99_fixture.ipynb",
                  "zhao_1003_5003_99_fixture.ipynb"):
        (subs / fname).write_text(NB)
    with zipfile.ZipFile(subs / "submissions.zip", "w") as zf:
        for p in sorted(subs.glob("*.ipynb")):
            zf.write(p, p.name)
    (subs / "José Núñez").mkdir()
    (subs / "José Núñez" / "notes.txt").write_text("no notebook")
    (subs / "Zoë.zip").write_bytes(b"PK\x03\x04 not really")


def test_dry_run_prints_the_roster_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    subs, out = tmp_path / "subs", tmp_path / "out"
    _canvas_class(subs)
    times = tmp_path / "times.csv"
    times.write_text("student,submitted_at\nzhao_1003,2026-12-01T22:10:00+01:00\n")
    rc, stdout, stderr = _run(capsys, subs, "--out", out, "--source", FIXTURE, "--dry-run",
                              "--submitted-at", times)
    assert rc == 0, stderr
    assert stdout[0] == (f"course-grade --dry-run: 5 student(s) in {subs}; assignments: "
                         "99_fixture; nothing graded, nothing written")
    assert stdout[-2:] == [
        "late policy: a late notebook loses its whole score (the default: no earlier run kept "
        "one; give --late-penalty to choose)",
        f"settings: --late-penalty zero, --late-floor none, --grace none, --roster none, "
        f"--submitted-at {times}, --extensions none"]
    stdout = stdout[:-2]
    assert [line.split() for line in stdout[1:]] == [
        ["student", "name", "notebooks", "found", "submission", "time"],
        ["José_Núñez", "José", "Núñez", "none", "unknown", "(no", "late", "penalty)"],
        ["Zoë", "Zoë", "not", "graded:", "not", "a", "zip", "file,", "or", "a", "damaged",
         "one", "unknown", "(no", "late", "penalty)"],
        ["leeann_1001", "leeann", "99_fixture", "unknown", "(no", "late", "penalty)"],
        ["wangbo_1002", "wangbo", "99_fixture", "unknown,", "marked", "LATE", "by", "Canvas",
         "(late", "penalty)"],
        ["zhao_1003", "zhao", "99_fixture", "--submitted-at", "times.csv"]]
    at = stdout[1].index("notebooks found")  # the columns line up
    assert [line[at:].split("  ")[0] for line in stdout[2:]] == [
        "none", "not graded: not a zip file, or a damaged one", "99_fixture", "99_fixture",
        "99_fixture"]
    assert stderr == [
        "course-grade: submissions.zip: skipped 3 student(s) already in the submissions folder "
        "(the same LMS ids, the same files): leeann_1001, wangbo_1002, zhao_1003",
        "course-grade: Zoë.zip: not a zip file, or a damaged one"]
    assert not out.exists()  # nothing written, not even OUT_DIR
    assert list((tmp_path / "tmp").iterdir()) == []  # the zips' temporary folder is gone


def test_dry_run_columns_line_up_after_wide_names(tmp_path, capsys):
    """Issue 48 item 10: a CJK name takes two terminal columns a character; the columns after
    it still start where the header's do."""
    from autograder.grade import _width

    for name in ("李娜", "Zoe\u0308", "ann"):  # wide, a combining mark, plain
        (tmp_path / "subs" / name).mkdir(parents=True)
        (tmp_path / "subs" / name / "99_fixture.ipynb").write_text(NB)
    rc, stdout, stderr = _run(capsys, tmp_path / "subs", "--source", FIXTURE, "--dry-run")
    assert rc == 0, stderr
    table = stdout[1:-2]
    starts = {_width(line[:line.index(word)])
              for line, word in zip(table, ["notebooks found", *["99_fixture"] * 3])}
    assert len(table) == 4 and len(starts) == 1, table


def test_dry_run_needs_no_out_and_shows_nbgraders_times(tmp_path, capsys):
    course = tmp_path / "course"
    (course / "submitted" / "ann" / "99_fixture").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    (course / "submitted" / "ann" / "99_fixture" / "99_fixture.ipynb").write_text(NB)
    (course / "submitted" / "ann" / "99_fixture" / "timestamp.txt").write_text(
        "2026-11-20 14:03:00.250000 UTC")
    rc, stdout, _ = _run(capsys, course / "submitted", "--source", FIXTURE, "--dry-run")
    assert rc == 0
    assert stdout[-3].split() == ["ann", "ann", "99_fixture", "nbgrader", "timestamp.txt"]


def test_dry_run_without_any_notebook_still_shows_the_roster(tmp_path, capsys):
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    rc, stdout, stderr = _run(capsys, tmp_path / "subs", "--source", FIXTURE, "--dry-run")
    assert rc == 2
    assert stdout[-3].split() == ["ann", "ann", "none", "unknown", "(no", "late", "penalty)"]
    assert stderr == ["course-grade: no assignment notebook found in the submissions"]


def test_out_is_required_without_dry_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path)])
    assert e.value.code == 2
    assert "required: --out" in capsys.readouterr().err


# ---- folders that are no class ---------------------------------------------------------------


def _output(folder: Path) -> None:  # what course-grade leaves in OUT_DIR
    (folder / "results").mkdir(parents=True)
    (folder / "grades.csv").write_text("student\n")


def _started_output(folder: Path) -> None:  # a run interrupted in its first second
    (folder / ".work" / "unpacked").mkdir(parents=True)


def _repository(folder: Path) -> None:
    (folder / "autograder").mkdir(parents=True)
    (folder / "solutions").mkdir()


def _named_repository(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "transformers-from-scratch"\n')


def test_a_submissions_folder_that_is_an_output_is_refused(tmp_path, capsys):
    subs, out = tmp_path / "subs", tmp_path / "graded"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "99_fixture.ipynb").write_text(NB)
    _output(subs)
    for extra in ([], ["--dry-run"]):
        rc, stdout, stderr = _run(capsys, subs, "--out", out, "--source", FIXTURE, *extra)
        assert (rc, stdout) == (2, [])
        assert stderr == [
            f"course-grade: refusing to grade {subs}: it is a course-grade output (results/, "
            "grades.csv). Pass the folder that holds only the students' submissions (the LMS "
            "download, a folder or .zip per student) as SUBMISSIONS_DIR, and the output folder "
            "as --out"]
        assert not out.exists()


ENTRIES = {  # an entry of SUBMISSIONS that looks like what is refused as SUBMISSIONS itself
    "out": (_output, "a course-grade output (results/, grades.csv)"),
    "o": (_started_output, "a course-grade output (.work/)"),
    "course": (_repository, "the course repository (autograder/, solutions/)"),
    "tfs": (_named_repository, "the course repository (pyproject.toml naming "
            "transformers-from-scratch)"),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_an_entry_that_looks_like_an_output_or_the_course_is_one_students_folder(
        tmp_path, capsys, entry):
    """Issue 47: one student's folder holding an empty results/ and a grades.csv made
    course-grade refuse the whole class. What an entry holds never stops the class: it is
    that student's folder, and the console says what it looks like."""
    make, looks = ENTRIES[entry]
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "99_fixture.ipynb").write_text(NB)
    make(subs / entry)
    rc, stdout, stderr = _run(capsys, subs, "--source", FIXTURE, "--dry-run")
    assert rc == 0, stderr
    assert f"course-grade: {entry}/ looks like {looks}: graded as one student's folder" in stderr
    assert any(line.split()[:1] == [entry] for line in stdout), stdout


def test_the_repository_itself_and_an_out_inside_the_submissions_are_refused(tmp_path, capsys):
    rc, _, stderr = _run(capsys, REPO, "--out", tmp_path / "out", "--dry-run")
    assert rc == 2 and stderr[0].startswith(
        f"course-grade: refusing to grade {REPO}: it is the course repository (autograder/, "
        "solutions/, pyproject.toml naming transformers-from-scratch).")
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    rc, _, stderr = _run(capsys, subs, "--out", subs / "graded", "--source", FIXTURE)
    assert (rc, stderr) == (2, [
        f"course-grade: --out {subs / 'graded'} is inside SUBMISSIONS_DIR {subs}: it would be "
        "read as a student's submission. Pass an --out outside it"])
    assert not (subs / "graded").exists()


def test_a_students_own_files_named_like_an_output_are_no_output(tmp_path, capsys):
    """One mark alone (a student's ``results/``, a ``grades.csv``) is a student's work, and so
    is whatever a student uploaded into the folder Moodle named after them."""
    subs = tmp_path / "subs"
    (subs / "ann" / "results").mkdir(parents=True)
    (subs / "ann" / "99_fixture.ipynb").write_text(NB)
    (subs / "bo").mkdir()
    (subs / "bo" / "grades.csv").write_text("x")
    moodle = subs / "Cy Ng_2001_assignsubmission_file_"
    _output(moodle)
    _repository(moodle)
    rc, stdout, _ = _run(capsys, subs, "--source", FIXTURE, "--dry-run")
    assert rc == 0 and [line.split()[0] for line in stdout[2:-2]] == ["Cy_Ng_2001", "ann", "bo"]


# ---- option errors ---------------------------------------------------------------------------


def test_option_errors_name_the_option_and_the_way_out(tmp_path, capsys):
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "01_attention.ipynb").write_text("{}")
    available = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())
    cases = {
        ("--due", "01_attention=01/12/2026"):
            "--due 01_attention=01/12/2026: '01/12/2026' is not an ISO 8601 date; e.g. --due "
            "01_attention=2026-12-01T23:59+01:00 (ISO 8601; no zone: UTC)",
        ("--due", "01_attention"):
            "--due wants ASSIGNMENT=DATE, got '01_attention'; e.g. --due "
            "01_attention=2026-12-01T23:59+01:00 (ISO 8601; no zone: UTC)",
        ("--assignment", "01_atention", "02_masking"):
            "--assignment: no such assignment: 01_atention (did you mean 01_attention?); "
            f"the assignments in {REPO / 'solutions'} are: {', '.join(available)}",
        ("--due", "01_atention=2026-12-01T23:59+01:00"):
            "--due: no such assignment: 01_atention (did you mean 01_attention?); the "
            f"assignments in {REPO / 'solutions'} are: {', '.join(available)}",
        ("--regrade", "anne"): "--regrade: no such student: anne (did you mean ann?)",
    }
    for args, message in cases.items():
        rc, _, stderr = _run(capsys, subs, "--out", out, "--unsandboxed", *args)
        assert (rc, stderr) == (2, [f"course-grade: {message}"]), args
        assert not out.exists() or args[0] == "--regrade", args  # refused before any write


def test_an_unreadable_instructor_file_stops_the_run_before_any_unpacking(
        tmp_path, capsys, monkeypatch):
    """Issue 48 item 10: a wrong --roster or --submitted-at path, or a malformed file, is
    said at once; no student's zip is unpacked first (intake's discover is never called)."""
    import autograder.grading.parent.submissions as submissions

    subs = tmp_path / "subs"
    _canvas_class(subs)
    bad = tmp_path / "times.csv"
    bad.write_text("student,when\nleeann,yesterday\n")
    unpacked = []
    monkeypatch.setattr(submissions, "discover", lambda *a, **k: unpacked.append(a) or ([], []))
    for option, path in (("--roster", tmp_path / "no-such-roster.csv"),
                         ("--submitted-at", tmp_path / "no-such-times.csv"),
                         ("--submitted-at", bad)):
        rc, _, stderr = _run(capsys, subs, "--dry-run", option, path)
        assert rc == 2 and len(stderr) == 1 and stderr[0].startswith(
            f"course-grade: {option}"), (option, stderr)
    assert unpacked == []


def test_the_class_settings_are_kept_in_the_output_folder(tmp_path, capsys):
    """``--late-penalty``, ``--roster`` and ``--submitted-at`` given once are the class's
    (OUT_DIR/settings.json): a later run that leaves them out uses them and says so, and
    ``--dry-run --out`` shows them; an option given again changes the kept one."""
    from autograder.grading.parent.settings import SETTINGS, write

    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "ann").mkdir(parents=True)
    (subs / "ann" / "99_fixture.ipynb").write_text(NB)
    times = tmp_path / "times.csv"
    times.write_text("student,submitted_at\nann,2026-12-01T22:10:00+01:00\n")
    out.mkdir()
    write(out, {"late_penalty": "none", "roster": None, "submitted_at": times})
    rc, stdout, stderr = _run(capsys, subs, "--out", out, "--source", FIXTURE, "--dry-run")
    assert rc == 0, stderr
    assert stdout[-3].split()[-2:] == ["--submitted-at", "times.csv"]  # read again
    assert stdout[-2] == "late policy: no late penalty (lateness only shown)"
    assert stdout[-1] == (f"settings: --late-penalty none, --late-floor none, --grace none, "
                          f"--roster none, --submitted-at {times}, --extensions none (kept: "
                          f"--late-penalty none; --submitted-at {times})")
    assert f"course-grade: --submitted-at {times}: kept from an earlier run ({SETTINGS}); " \
        "give the option to change it" in stderr
    rc, stdout, stderr = _run(capsys, subs, "--out", out, "--source", FIXTURE, "--dry-run",
                              "--late-penalty", "zero")
    assert stdout[-1].startswith("settings: --late-penalty zero, ") and "--late-penalty" \
        not in stdout[-1].split("(kept: ")[1]
    times.unlink()  # a kept file that is gone: said, as a file given on the command line
    rc, _, stderr = _run(capsys, subs, "--out", out, "--source", FIXTURE, "--dry-run")
    assert rc == 2 and "times.csv" in stderr[-1]
