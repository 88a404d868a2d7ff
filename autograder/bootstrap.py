"""Set up the course and run its main job or its tests: the README's two commands.

    python3 -m autograder.bootstrap lab     # set up, then open JupyterLab on notebooks/
    python3 -m autograder.bootstrap test    # set up, then lint (ruff) and run the test suite

Set-up creates ``.venv`` next to this repository, installs the pinned lock
(``constraints.txt``) and the course itself (editable). A stamp of the lock, the project
metadata and the Python version is kept in ``.venv``: a second run with nothing changed
skips the install and starts in about a second. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("COURSE_VENV", ROOT / ".venv"))
STAMP = VENV / ".course-stamp"


def _bin(name: str) -> Path:
    sub = "Scripts" if os.name == "nt" else "bin"
    suffix = ".exe" if os.name == "nt" else ""
    return VENV / sub / f"{name}{suffix}"


def _stamp_text() -> str:
    h = hashlib.sha256()
    for f in ("constraints.txt", "pyproject.toml"):
        h.update((ROOT / f).read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()


def _run(cmd: list, **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def setup(force: bool = False) -> None:
    """Create the virtual environment and install the pinned course (idempotent)."""
    if sys.version_info < (3, 11):
        sys.exit(f"Python 3.11+ is needed, this is {sys.version.split()[0]}")
    if not _bin("python").exists():
        print(f"creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    if not force and STAMP.exists() and STAMP.read_text() == _stamp_text():
        print("environment up to date (delete .venv/.course-stamp to reinstall)", flush=True)
        return
    py = _bin("python")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "install", "-q"]
    # torch first, from the pinned CPU build: an unpinned torch would pull a multi-GB CUDA build.
    _run(pip + ["-c", ROOT / "constraints.txt", "torch==2.13.0"])
    _run(pip + ["-c", ROOT / "constraints.txt", "-e", f"{ROOT}[dev]"])
    STAMP.write_text(_stamp_text())


def lab(extra: list) -> int:
    setup()
    jupyter = _bin("jupyter")
    print("\nStarting JupyterLab on notebooks/ -- open the URL printed below.", flush=True)
    return subprocess.call([str(jupyter), "lab", f"--notebook-dir={ROOT / 'notebooks'}", *extra])


def test(extra: list) -> int:
    setup()
    py = str(_bin("python"))
    rc = subprocess.call([py, "-m", "ruff", "check", "."], cwd=ROOT)
    if rc:
        print("ruff found problems (above)", flush=True)
        return rc
    return subprocess.call([py, "-m", "pytest", "-n", "auto", *extra], cwd=ROOT)


def lock(extra: list) -> int:
    """Rewrite constraints.txt from what is installed in .venv (after changing pins)."""
    setup(force=True)
    out = subprocess.run(
        [str(_bin("python")), "-m", "pip", "freeze", "--exclude-editable"],
        check=True, capture_output=True, text=True,
    ).stdout
    lines = [ln.replace("+cpu", "") for ln in out.splitlines() if ln and not ln.startswith("-e")]
    head = (ROOT / "constraints.txt").read_text().splitlines()[:2]
    (ROOT / "constraints.txt").write_text("\n".join(head + sorted(lines, key=str.lower)) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m autograder.bootstrap", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job", choices=["setup", "lab", "test", "lock"])
    args, extra = p.parse_known_args(argv)
    if args.job == "setup":
        setup()
        return 0
    return {"lab": lab, "test": test, "lock": lock}[args.job](extra)


if __name__ == "__main__":
    sys.exit(main())
