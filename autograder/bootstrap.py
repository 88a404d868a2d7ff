"""Set up the course and run its main job or its tests: the README's two commands.

    python3 -m autograder.bootstrap lab     # set up, then open JupyterLab on notebooks/
    python3 -m autograder.bootstrap lab --instructor   # the same with nbgrader's instructor tools
    python3 -m autograder.bootstrap test    # set up, then lint (ruff) and run the test suite
    python3 -m autograder.bootstrap test --fast   # the same, the unit tier only (under 2 min)
    python3 -m autograder.bootstrap lab --instructor OUT   # formgrader on course-grade's OUT
    python3 -m autograder.bootstrap docs    # set up, then build the documentation site

Set-up creates ``.venv`` next to this repository, installs the pinned lock
(``constraints.txt``) and the course itself (editable). A stamp of the lock, the project
metadata and the Python version is kept in ``.venv``: a second run with nothing changed
skips the install and starts in about a second. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

from autograder.grading.env import VENV as VENV_VAR

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get(VENV_VAR, ROOT / ".venv"))
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


def _sandbox_tool() -> None:
    """Install Debian's bubblewrap (course-grade's sandbox) when missing, as root with apt.

    Never fails: without it, course-grade refuses to grade and says how to proceed.
    """
    import shutil

    root = getattr(os, "geteuid", lambda: 1)() == 0
    if shutil.which("bwrap") or not shutil.which("apt-get") or not root:
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "bubblewrap"]):
        if subprocess.run(cmd, capture_output=True, env=env).returncode != 0:
            print("note: could not install bubblewrap (course-grade's sandbox)", flush=True)
            return


def setup(force: bool = False) -> None:
    """Create the virtual environment and install the pinned course (idempotent)."""
    if sys.version_info < (3, 11):  # noqa: UP036 -- the bootstrap may run on an older python3
        sys.exit(f"Python 3.11+ is needed, this is {sys.version.split()[0]}")
    _sandbox_tool()
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
    _run(pip + ["-c", ROOT / "constraints.txt", "-e", f"{ROOT}[dev,docs]"])
    STAMP.write_text(_stamp_text())


# What a student's JupyterLab leaves out of nbgrader: the instructor's panels (Formgrader, the
# Create Assignment cell toolbar, the course list) and their server parts. Validate and the
# Assignment List stay: they work offline.
STUDENT_HIDDEN_LAB_PLUGINS = (
    "@jupyter/nbgrader:formgrader",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
)
STUDENT_HIDDEN_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
)


def lab_view_env(view: str, env: dict | None = None) -> dict:
    """The environment for a JupyterLab showing ``view`` ("student" or "instructor").

    The student view adds a generated Jupyter config directory (in the virtual environment)
    to ``JUPYTER_CONFIG_PATH``, ahead of the others: its ``labconfig/page_config.json``
    disables nbgrader's instructor lab plugins and its ``jupyter_server_config.d`` entry the
    matching server extensions. The instructor view is nbgrader's default (everything on).
    """
    from autograder.grading import mathjax

    env = dict(os.environ if env is None else env)
    # nbconvert's pages (formgrader's) load MathJax from this server, not a CDN
    env = mathjax.with_path(env, mathjax.jupyter_path(mathjax.SERVER_URL,
                                                      VENV / "course-lab" / "jupyter"))
    if view == "instructor":
        return env
    if view != "student":
        raise ValueError(f"view must be 'student' or 'instructor', got {view!r}")
    conf = VENV / "course-lab" / "student"
    (conf / "labconfig").mkdir(parents=True, exist_ok=True)
    (conf / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
    page = {"disabledExtensions": {name: True for name in STUDENT_HIDDEN_LAB_PLUGINS}}
    server = {"ServerApp": {"jpserver_extensions": {
        name: False for name in STUDENT_HIDDEN_SERVER_EXTENSIONS}}}
    for path, data in ((conf / "labconfig" / "page_config.json", page),
                       (conf / "jupyter_server_config.d" / "zz-course-student.json", server)):
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    paths = [str(conf)] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    return env


def lab(extra: list) -> int:
    """JupyterLab on notebooks/: the student's view, or with ``--instructor`` nbgrader's
    instructor tools (Formgrader, Create Assignment) too. ``--instructor OUT`` (course-grade's
    output folder, an nbgrader course directory) opens that folder instead, started there so
    that formgrader reads its nbgrader_config.py and gradebook."""
    import secrets

    view, cwd = "student", None
    if "--instructor" in extra:
        view = "instructor"
        i = extra.index("--instructor")
        if i + 1 < len(extra) and not extra[i + 1].startswith("-"):
            cwd = Path(extra[i + 1]).resolve()
            extra = extra[:i + 1] + extra[i + 2:]
            if not (cwd / "nbgrader_config.py").is_file():
                print(f"{cwd} is not a graded course folder (no nbgrader_config.py): run "
                      "course-grade SUBMISSIONS --out FOLDER first", flush=True)
                return 2
    extra = [a for a in extra if a != "--instructor"]
    setup()
    jupyter = _bin("jupyter")
    args = [f"--notebook-dir={cwd or ROOT / 'notebooks'}"]
    # nbgrader's lab extension (Validate button, Nbgrader > Assignment List) ships enabled with
    # nbgrader in .venv/share/jupyter/labextensions; say so plainly if it went missing.
    if not (VENV / "share/jupyter/labextensions/@jupyter/nbgrader/package.json").exists():
        print("warning: nbgrader's JupyterLab extension is missing; reinstall with "
              "`rm .venv/.course-stamp` and run this again", flush=True)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")  # containers often run as root; Jupyter refuses otherwise
    token = None
    if not any(a.startswith(("--port", "--ServerApp.port", "--IdentityProvider.token",
                             "--ServerApp.token", "--ip", "--ServerApp.ip")) for a in extra):
        # Our token; the port is the first free one from 8888 that Jupyter itself binds (a
        # port checked free here could be taken before Jupyter starts): the URL printed is
        # read from the server's own runtime file once it listens (:func:`serve`).
        token = secrets.token_hex(24)
        args += ["--ip=127.0.0.1", "--port=8888", "--ServerApp.port_retries=100",
                 f"--IdentityProvider.token={token}"]
    bar = "=" * 72
    who = ("the instructor's view: nbgrader's Formgrader and Create Assignment are on"
           if view == "instructor" else
           "the student's view; `lab --instructor` adds nbgrader's instructor tools")
    where = f"the graded course {cwd} (Nbgrader > Formgrader)" if cwd else "notebooks/"
    print(f"\n{bar}\nStarting JupyterLab on {where} ({who}; Ctrl+C to stop).", flush=True)
    if not token:
        print("Open the URL JupyterLab prints below.", flush=True)
    print(bar, flush=True)
    # formgrader reads the working folder's config
    return serve([str(jupyter), "lab", *args, *extra], lab_view_env(view), cwd, token)


def serve(argv: list[str], env: dict, cwd: Path | None, token: str | None,
          wait_s: float = 120) -> int:
    """Run the Jupyter server ``argv``; with our ``token``, print its URL once it listens, with
    the port it bound (read from the ``jpserver-<pid>.json`` it writes in a runtime folder of
    its own). Returns the server's exit status."""
    import shutil
    import tempfile
    import time

    runtime = Path(tempfile.mkdtemp(prefix="course-lab-"))
    proc = subprocess.Popen(argv, env={**env, "JUPYTER_RUNTIME_DIR": str(runtime)}, cwd=cwd)
    try:
        deadline = time.monotonic() + wait_s
        while token and proc.poll() is None and time.monotonic() < deadline:
            info = runtime / f"jpserver-{proc.pid}.json"
            try:
                port = json.loads(info.read_text())["port"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.2)
                continue
            bar = "=" * 72
            print(f"\n{bar}\nJupyterLab is up. Open this URL in your browser:\n\n"
                  f"    http://127.0.0.1:{port}/lab?token={token}\n{bar}\n", flush=True)
            break
        try:
            return proc.wait()
        except KeyboardInterrupt:  # Jupyter got the Ctrl+C too: let it shut down
            return proc.wait()
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def pytest_args(extra: list) -> list:
    """pytest's arguments for ``test``: every tier, or with ``--fast`` the unit tier only
    (tests/conftest.py; the other tiers' folders are not even collected); one xdist worker
    per core, the tests of one graded class on one worker (``--dist loadgroup``), and the
    slowest 25 listed at the end.

    >>> pytest_args(["--fast", "-x"])[-5:]
    ['-m', 'unit', '--ignore=tests/grading', '--ignore=tests/slow', '-x']
    """
    args = ["-n", "auto", "--dist", "loadgroup", "--durations=25"]
    if "--fast" in extra:
        args += ["-m", "unit", "--ignore=tests/grading", "--ignore=tests/slow"]
    return args + [a for a in extra if a != "--fast"]


def test(extra: list) -> int:
    """Lint, then the tests: ``test`` runs every tier (what CI runs), ``test --fast`` the unit
    tier (the contributor's loop); other arguments go to pytest."""
    setup()
    py = str(_bin("python"))
    rc = subprocess.call([py, "-m", "ruff", "check", "."], cwd=ROOT)
    if rc:
        print("ruff found problems (above)", flush=True)
        return rc
    # pytest-xdist already runs one worker per core: one BLAS/OpenMP thread each avoids
    # oversubscription (measured: 100 tiny GPT forwards 2.6 s -> 0.17 s on 2 cores).
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    # Hundreds of Python processes (xdist workers, course-grade, the grading and kernel
    # processes) import the same modules: each compiles them again where bytecode is not
    # written (PYTHONDONTWRITEBYTECODE, set in many containers), and pytest's rewritten test
    # modules are not cached either. Measured in a fresh clone: collecting the unit tier
    # 10.6-12.4 -> 6.7-7.4 s of CPU per worker; two grading modules 58.3 -> 52.1-54.9 s.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return subprocess.call([py, "-m", "pytest", *pytest_args(extra)], cwd=ROOT, env=env)


def docs(extra: list) -> int:
    """Build the documentation site into docs/_build/html (``--out DIR`` elsewhere): Sphinx with
    warnings as errors, then every internal link checked (``autograder/docs.py``)."""
    setup()
    return subprocess.call([str(_bin("python")), "-m", "autograder.docs", *extra], cwd=ROOT)


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
    p.add_argument("job", choices=["setup", "lab", "test", "docs", "lock"])
    args, extra = p.parse_known_args(argv)
    if args.job == "setup":
        setup()
        return 0
    return {"lab": lab, "test": test, "docs": docs, "lock": lock}[args.job](extra)


if __name__ == "__main__":
    sys.exit(main())
