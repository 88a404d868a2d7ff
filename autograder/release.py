"""Regenerate the student release ``notebooks/`` from ``solutions/`` with nbgrader.

    python -m autograder.release                 # every chapter in solutions/
    python -m autograder.release 01_attention    # one chapter
    python -m autograder.release --check         # exit 1 if notebooks/ is not a fresh generation

Each chapter folder ``solutions/<NN_name>/`` is an nbgrader assignment; nbgrader's own
``generate_assignment`` (run as a subprocess, configured by ``autograder/nbgrader_config.py``)
removes the solutions and hidden tests, locks the read-only and test cells, clears outputs
and writes ``notebooks/<NN_name>/``. It runs with ``--no-db``: the release needs no
gradebook (grading records the source cells in its own), and the repository stays clean.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).resolve().parent / "nbgrader_config.py"
SOURCE = ROOT / "solutions"
RELEASE = ROOT / "notebooks"


def chapters() -> list[str]:
    """Assignment names: the folders of solutions/ that hold a notebook of the same name.

    >>> "01_attention" in chapters()
    True
    """
    return sorted(p.parent.name for p in SOURCE.glob("*/*.ipynb") if p.stem == p.parent.name)


def generate(names: list[str], release_dir: Path = RELEASE) -> None:
    """Run ``nbgrader generate_assignment --force`` for each chapter into ``release_dir``."""
    release_dir.mkdir(parents=True, exist_ok=True)
    # One nbgrader process for every chapter ("*") when all are asked for: much faster.
    ids = ["*"] if sorted(names) == chapters() else names
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        for name in ids:
            cmd = [
                sys.executable,
                "-m",
                "nbgrader",
                "generate_assignment",
                name,
                "--force",
                # nbgrader takes the config path without ".py" (traitlets adds it)
                f"--GenerateAssignmentApp.config_file={CONFIG.with_suffix('')}",
                f"--CourseDirectory.root={ROOT}",
                f"--CourseDirectory.release_directory={release_dir}",
                "--no-db",  # the release needs no gradebook; grading builds its own
                "--log-level=WARN",
            ]
            # cwd=tmp: nbgrader also reads ./nbgrader_config.py; make sure it is ours only.
            # nbgrader runs helper executables (alembic) from PATH: put this venv's bin first.
            env = {
                **os.environ,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}" + os.environ.get("PATH", ""),
            }
            res = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env)
            if res.returncode != 0:
                raise RuntimeError(
                    f"nbgrader generate_assignment {name} failed:\n{res.stdout}\n{res.stderr}"
                )


def differences(names: list[str]) -> list[str]:
    """Files of notebooks/ that differ from (or are missing in) a fresh generation."""
    out = []
    with tempfile.TemporaryDirectory(prefix="course-release-check-") as tmp:
        fresh = Path(tmp) / "release"
        generate(names, fresh)
        for name in names:
            new_files = {p.relative_to(fresh) for p in (fresh / name).rglob("*") if p.is_file()}
            old_files = {p.relative_to(RELEASE) for p in (RELEASE / name).rglob("*") if p.is_file()}
            for rel in sorted(new_files | old_files):
                a, b = fresh / rel, RELEASE / rel
                if not (a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)):
                    out.append(str(Path("notebooks") / rel))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m autograder.release", description=__doc__.split("\n")[0]
    )
    ap.add_argument("chapters", nargs="*", help="chapter folders of solutions/ (default: all)")
    ap.add_argument(
        "--check", action="store_true", help="only compare notebooks/ with a fresh generation"
    )
    args = ap.parse_args(argv)
    names = args.chapters or chapters()
    unknown = sorted(set(names) - set(chapters()))
    if unknown:
        ap.error(f"no such chapter in solutions/: {', '.join(unknown)}")
    if args.check:
        diff = differences(names)
        for d in diff:
            print(f"out of date: {d}")
        if diff:
            print("run `python -m autograder.release` and commit notebooks/")
            return 1
        print(f"notebooks/ matches a fresh generation ({', '.join(names)})")
        return 0
    generate(names)
    print(f"generated notebooks/ for {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
