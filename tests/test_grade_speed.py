"""What keeps grading fast without changing what it decides (issue 16, item 5).

Speeds themselves are measured in ``bench/grade_class.py``; these tests check the mechanisms.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_grading_processes_do_not_compile_jsonschemas_iri_grammars():
    """The parent and nbgrader's process import nbformat (so jsonschema) without building the
    optional ``rfc3987_syntax`` grammars; notebooks are still validated against the schema."""
    out = _run(
        "import sys\n"
        "import autograder.grading.nbgrader_main\n"
        "import nbformat, jsonschema\n"
        "print('imported' if sys.modules.get('rfc3987_syntax') else 'skipped')\n"
        "nb = nbformat.read('solutions/01_attention/01_attention.ipynb', as_version=4)\n"
        "nbformat.validate(nb)\n"
        "nb.cells[0]['cell_type'] = 'nonsense'\n"
        "try:\n"
        "    nbformat.validate(nb)\n"
        "    print('accepted')\n"
        "except nbformat.ValidationError:\n"
        "    print('rejected')\n"
    )
    assert out.split() == ["skipped", "rejected"]
