"""What a Dask task sends back of a student's grading folder, and where the parent puts it:
:func:`dispatch.graded_notebooks` and :func:`dispatch.publish_remote` (no cluster needed; the
cluster itself: ``tests/grading/test_dispatch.py``)."""

from __future__ import annotations

from pathlib import Path

from autograder.grading.parent.dispatch import graded_notebooks, publish_remote
from autograder.grading.parent.results import publish_student


def _grading_folder(root: Path) -> None:
    """ada handed in 01_a (submitted, autograded, nbgrader's timestamp) and nothing of 02_b."""
    for kind in ("submitted", "autograded"):
        folder = root / kind / "ada" / "01_a"
        folder.mkdir(parents=True)
        (folder / "01_a.ipynb").write_bytes(f"{kind} notebook".encode())
        (folder / "timestamp.txt").write_text("2026-01-01T00:00:00+00:00")
    (root / "autograded" / "ada" / "02_b").mkdir(parents=True)  # nothing handed in


def _tree(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and ".work" not in p.parts}


def test_sent_back_and_published_as_a_local_run(tmp_path):
    root = tmp_path / "root"
    _grading_folder(root)
    files, left_out = graded_notebooks(root, "ada", ["01_a", "02_b"])
    assert files == {"submitted/ada/01_a/01_a.ipynb": b"submitted notebook",
                     "autograded/ada/01_a/01_a.ipynb": b"autograded notebook"}
    assert left_out == []
    local, remote = tmp_path / "local", tmp_path / "remote"
    for out in (local, remote):
        (out / ".work").mkdir(parents=True)
        (out / "autograded" / "ada" / "02_b").mkdir(parents=True)  # an older grading's copy
    publish_student(root, local, "ada", ["01_a", "02_b"])
    publish_remote(remote, "ada", ["01_a", "02_b"], {"feedback": {}, "notebooks": files})
    assert _tree(remote) == _tree(local) == files
    assert not (remote / "autograded" / "ada" / "02_b").exists()  # replaced, as locally
    assert list((remote / ".work").iterdir()) == []  # the unpacking folder is gone


def test_only_the_students_own_paths_are_written(tmp_path):
    out = tmp_path / "out"
    (out / ".work").mkdir(parents=True)
    nb = "01_a/01_a.ipynb"
    notebooks = {f"submitted/ada/{nb}": b"ok", f"submitted/bob/{nb}": b"another student",
                 f"autograded/ada/../../../{nb}": b"out of its folder", "gradebook.db": b"no"}
    publish_remote(out, "ada", ["01_a"], {"feedback": {}, "notebooks": notebooks})
    assert _tree(out) == {f"submitted/ada/{nb}": b"ok"}


def test_over_the_cap_is_left_out_and_named(tmp_path):
    root = tmp_path / "root"
    _grading_folder(root)
    files, left_out = graded_notebooks(root, "ada", ["01_a"], cap=len(b"submitted notebook"))
    assert files == {"submitted/ada/01_a/01_a.ipynb": b"submitted notebook"}
    assert left_out == ["autograded/ada/01_a/01_a.ipynb"]
