"""``nbgrader export`` for a course-grade OUT_DIR: not graded stays apart from 0.

Named in OUT_DIR's ``nbgrader_config.py`` (``results.write_course_config``); a module of its
own so that course-grade does not import nbgrader when it starts (about 2 s).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from nbgrader.plugins import ExportPlugin

from .exports import cell as csv_cell


class NotGradedCsvExport(ExportPlugin):
    """nbgrader's CSV export, plus what it hides: ``needs_manual_grade`` (and then an empty
    ``score``, never 0; an assignment not handed in: empty scores), the student's ``name``
    and ``lms_user_id``. OUT_DIR's nbgrader_config.py names it; it writes ``export.csv``
    unless ``--to`` says otherwise (nbgrader's default name would overwrite grades.csv)."""

    def export(self, gradebook) -> None:
        dest = self.to or "export.csv"
        keys = ["assignment", "duedate", "timestamp", "student_id", "last_name",
                "first_name", "email", "lms_user_id", "raw_score",
                "late_submission_penalty", "score", "max_score", "needs_manual_grade"]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        w.writeheader()
        for assignment in gradebook.assignments:
            if self.assignment and assignment.name not in self.assignment:
                continue
            for student in gradebook.students:
                if self.student and student.id not in self.student:
                    continue
                row = {"assignment": assignment.name, "duedate": assignment.duedate or "",
                       "student_id": student.id, "last_name": student.last_name or "",
                       "first_name": student.first_name or "", "email": student.email or "",
                       "lms_user_id": student.lms_user_id or "",
                       "max_score": _fmt(assignment.max_score)}
                try:
                    s = gradebook.find_submission(assignment.name, student.id)
                except Exception:  # nothing handed in: not a 0, and nothing to grade
                    row.update(timestamp="", raw_score="", late_submission_penalty="",
                               score="", needs_manual_grade="False")
                else:
                    penalty = s.late_submission_penalty or 0.0
                    row.update(timestamp=s.timestamp or "", raw_score=_fmt(s.score),
                               late_submission_penalty=_fmt(penalty),
                               needs_manual_grade=str(bool(s.needs_manual_grade)),
                               score="" if s.needs_manual_grade
                               else _fmt(max(0.0, s.score - penalty)))
                w.writerow({k: csv_cell(v) for k, v in row.items()})
        Path(dest).write_text(buf.getvalue())
        self.log.info("Exported grades to %s", dest)


def _fmt(x) -> str:
    """Points as the CSV shows them: ``_fmt(2.0) == '2'``, ``_fmt(None) == ''``."""
    return "" if x is None else f"{float(x):g}"
