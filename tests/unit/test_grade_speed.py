"""What keeps grading fast without changing what it decides (issue 16, item 5).

Speeds themselves are measured in ``bench/grade_class.py``; these tests check the mechanisms.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


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
        "import autograder.grading.autograde.nbgrader_main\n"
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


def test_report_charts_follow_the_data():
    """The report is rewritten as students finish: the same results give the same page, and a
    new student's rows change the charts they fall in (here a not-graded bar appears)."""
    import re

    from autograder.grading.parent import report

    def rows(student, points):
        return [{"student": student, "notebook": nb, "exercise": "ex1", "points": points,
                 "max_points": "2", "status": "graded", "diagnosis": ""}
                for nb in ("01_attention", "04_layer_norm")]

    def charts(page):
        return re.findall(r"<svg class='plot' .*?</svg>", page)

    results = {"ann": {"student": "ann", "rows": rows("ann", "2"), "seconds": 3.0}}
    first = report.render(results)
    assert report.render(results) == first and len(charts(first)) == 2
    results["bob"] = {"student": "bob", "rows": rows("bob", "0"), "seconds": 4.0}
    results["bob"]["rows"][1]["status"] = "not graded: timeout"
    results["bob"]["rows"][1]["points"] = ""
    second = charts(report.render(results))
    assert second[0] != charts(first)[0] and "n/g" not in second[0]
    assert "n/g" in second[1] and "n/g" not in charts(first)[1]
