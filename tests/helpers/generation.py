"""``release.generate`` run once per distinct input within one test.

A generation is a ``nbgrader generate_assignment`` process (about 5 s of CPU). A test that
generates the same chapter sources twice (``release.differences`` first, then ``generate``
itself, or ``differences`` before and after editing only the generated files) gets the first
run's files again the second time: the same bytes a second run writes, since a generation
depends only on the sources (``tests/unit/test_release.py::
test_committed_release_equals_a_fresh_generation`` holds that for every chapter).

What a generation reads of ``source/<name>/`` is what :func:`release.generate` copies (every
file but hidden ones, ``__pycache__``, ``<name>.ipynb`` and ``figures/``) and the ``<name>.py``
source: the key is those files' bytes, so an edit to a source is always generated afresh.
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
from pathlib import Path

from autograder import diagrams, release


def _read(source: Path, name: str) -> list[Path]:
    """The files of ``source/<name>/`` a generation reads, as ``release.generate`` copies them
    (its ``ignore`` patterns), and the chapter's ``.py`` source."""
    folder = Path(source) / name
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if rel.parts[0] in (f"{name}.ipynb", release.FIGURES):
            continue
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        if p.is_file():
            out.append(p)
    return out


def _key(names, source: Path) -> str:
    h = hashlib.sha256()
    for name in names:
        for p in _read(source, name):
            h.update(f"{name}/{p.relative_to(Path(source) / name)}\0".encode())
            h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def generate_once(monkeypatch, keep: Path) -> list:
    """Put a ``release.generate`` in place (for ``differences`` too) that runs nbgrader once per
    distinct (chapters, sources) and writes that run's files (kept under ``keep``) again for
    the same sources later. Returns the list of the real runs' chapter lists."""
    real = release.generate
    sig = inspect.signature(real)
    runs: dict[tuple, Path] = {}
    real_runs: list = []

    def generate(*args, **kwargs):
        a = sig.bind(*args, **kwargs)
        a.apply_defaults()
        names, release_dir, solutions_dir = a.arguments["names"], *(
            Path(a.arguments[k]) for k in ("release_dir", "solutions_dir"))
        source = Path(a.arguments["source"])
        key = (tuple(names), _key(names, source))
        if key not in runs:
            real(*a.args, **a.kwargs)
            real_runs.append(list(names))
            saved = runs[key] = keep / f"run{len(runs)}"
            for name in names:
                shutil.copytree(release_dir / name, saved / "release" / name)
                (saved / "solutions").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(solutions_dir / name / f"{name}.ipynb",
                                saved / "solutions" / f"{name}.ipynb")
            return
        saved = runs[key]
        for name in names:  # what generate writes, in the order it writes it
            shutil.rmtree(release_dir / name, ignore_errors=True)
            shutil.copytree(saved / "release" / name, release_dir / name)
            (solutions_dir / name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(saved / "solutions" / f"{name}.ipynb",
                            solutions_dir / name / f"{name}.ipynb")
            diagrams.write(name, solutions_dir / name / release.FIGURES)  # as generate does

    monkeypatch.setattr(release, "generate", generate)
    return real_runs
