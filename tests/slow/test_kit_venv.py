"""The student kit installed with pip into a fresh virtual environment (issue 31 item 1).

A new venv, with no access to this repository: its only extra path is a ``.pth`` line naming
this environment's ``site-packages``, which gives it numpy, torch, ipykernel and nbclient. A
path named in a ``.pth`` file is added as it is, its own ``.pth`` files are not read, so the
editable install of the course (a finder installed by a ``.pth``) stays out: the test first
shows that ``autograder`` cannot be imported there. Then ``pip install`` of the kit's folder
(offline, no build isolation, its pinned dependencies resolved: each must be the version this
environment has, the course's lock, or pip finds nothing to install offline and fails; a kit
whose torch pin is changed does fail), and chapter 04's release notebook is run by nbclient
inside that environment twice: filled in with the solution's answers (every check passes) and with
one catalogued mistake (its check fails and names it).
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
import venv
from pathlib import Path

import nbformat
import pytest

from autograder import kit

from helpers.chapters import MISTAKES, filled_release

CHAPTER = "04_layer_norm"

RUN = r"""
import json, sys
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
nb = nbformat.read(sys.argv[1], as_version=4)
results = []
client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                        resources={"metadata": {"path": sys.argv[2]}})
client.execute()
for c in nb.cells:
    gid = c.metadata.get("nbgrader", {}).get("grade_id", "")
    if c.cell_type != "code" or not c.metadata.get("nbgrader", {}).get("grade"):
        continue
    text = ""
    error = None
    for o in c.get("outputs", []):
        if o.output_type == "stream":
            text += o.text
        elif o.output_type == "error":
            error = o.ename + ": " + o.evalue
    results.append({"grade_id": gid, "text": text, "error": error})
import autograder
results.append({"autograder": autograder.__file__})
print(json.dumps(results))
"""


def _site_packages(env: Path) -> Path:
    (p,) = (env / "lib").glob("python3*/site-packages")
    return p


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A venv with the kit of CHAPTER pip-installed, and the kit's folder."""
    root = tmp_path_factory.mktemp("kit-venv")
    built = kit.build(root / "course-kit", [CHAPTER])
    env = root / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    ours = Path(sysconfig.get_paths()["purelib"])
    (_site_packages(env) / "course_deps.pth").write_text(f"{ours}\n")
    py = env / "bin" / "python"
    # this repository is not importable there before the install
    probe = subprocess.run([str(py), "-c", "import autograder"], cwd=root,
                           capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'autograder'" in probe.stderr
    inst = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "--no-build-isolation",
         "--quiet", str(built)],
        cwd=root, capture_output=True, text=True,
    )
    assert inst.returncode == 0, inst.stdout + inst.stderr
    (root / "run.py").write_text(RUN)
    return root, py, built


def _run(root: Path, py: Path, nb, name: str) -> list:
    work = root / name
    work.mkdir()
    path = work / f"{CHAPTER}.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run(
        [str(py), str(root / "run.py"), str(path), str(work)],
        cwd=work, capture_output=True, text=True, timeout=600,
        env={"PATH": f"{py.parent}:/usr/bin:/bin", "HOME": str(work), "MPLBACKEND": "Agg",
             "OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kit_installs_into_a_fresh_venv_and_the_checks_pass_on_the_answers(fresh):
    root, py, built = fresh
    results = _run(root, py, filled_release(CHAPTER), "answers")
    where = results.pop()["autograder"]
    # the checks came from the installed kit, not from the repository or the kit's folder
    assert str(_site_packages(root / "venv")) in where, where
    assert results, "the notebook has check cells"
    for r in results:
        assert r["error"] is None, r
        assert "✔" in r["text"], r


def test_a_catalogued_mistake_fails_its_check_with_its_name(fresh):
    root, py, built = fresh
    cell_id, old, new, grade_id, named = MISTAKES[CHAPTER]
    nb = filled_release(CHAPTER)
    (cell,) = [c for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade_id") == cell_id]
    assert old in cell.source
    cell.source = cell.source.replace(old, new)
    results = {r.get("grade_id"): r for r in _run(root, py, nb, "mistake")}
    bad = results[grade_id]
    assert bad["error"] is not None and named in bad["error"] + bad["text"], bad
    others = [r for g, r in results.items() if g not in (grade_id, None)]
    assert any(r["error"] is None and "✔" in r["text"] for r in others), others


def test_the_pins_are_enforced_offline(fresh, tmp_path):
    """The install above resolved the kit's pins against this environment: the same kit with
    another torch pin finds nothing offline and fails, naming torch."""
    import shutil

    root, py, built = fresh
    other = tmp_path / "kit"
    shutil.copytree(built, other)
    pyproject = other / "pyproject.toml"
    assert '"torch==2.13.0"' in pyproject.read_text()
    pyproject.write_text(pyproject.read_text().replace('"torch==2.13.0"', '"torch==2.12.99"'))
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation",
         str(other)], cwd=root, capture_output=True, text=True)
    assert proc.returncode != 0, proc.stdout
    assert "depends on torch==2.12.99" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
