"""The grading run's own state, written only by the trusted parent process.

- ``OUT_DIR/results/<student>.json``: one file per finished student, written atomically
  (temp file + ``os.replace``). It is the commit point: a student with a result whose
  fingerprint matches the submission is not graded again, so a killed run resumes where it
  stopped and a student is never counted twice.
- ``OUT_DIR/grades.csv``: rewritten (atomically) from all results after every student, and
  at the start of every run: a kill between a student's result file and the CSV rewrite leaves
  the CSV behind by that student (never ahead), and the next run puts it back.
- ``OUT_DIR/gradebook.db``: nbgrader gradebook of the whole class, rebuilt from the results at
  the end of a run (the workers each wrote their own; none was shared).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

from .nbgrader_main import quiet_sqlalchemy

COLUMNS = ["student", "notebook", "exercise", "points", "max_points", "status", "diagnosis",
           "flagged"]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class ResultStore:
    def __init__(self, out: Path):
        self.out = out
        self.dir = out / "results"
        self.dir.mkdir(parents=True, exist_ok=True)

    def load(self) -> dict[str, dict]:
        results = {}
        for p in sorted(self.dir.glob("*.json")):
            try:
                r = json.loads(p.read_text())
            except (OSError, ValueError):
                continue  # an unfinished write never has the final name; be safe anyway
            results[r["student"]] = r
        return results

    def save(self, result_json: str, student: str) -> None:
        _atomic_write(self.dir / f"{student}.json", result_json)

    def write_csv(self, students: list[str] | None = None) -> Path:
        """grades.csv from the stored results (only ``students`` when given), sorted by student."""
        results = self.load()
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for sid in sorted(results):
            if students is None or sid in students:
                for row in results[sid]["rows"]:
                    w.writerow({k: row.get(k, "") for k in COLUMNS})
        path = self.out / "grades.csv"
        _atomic_write(path, buf.getvalue())
        return path

    def write_gradebook(self, template: Path, students: list[str]) -> Path:
        """The class gradebook: the template's (assignments, cells) plus every graded row."""
        from nbgrader.api import Gradebook

        results = self.load()
        tmp = self.out / ".gradebook.db.tmp"
        shutil.copyfile(template / "gradebook.db", tmp)
        with quiet_sqlalchemy(), Gradebook(f"sqlite:///{tmp}") as gb:
            nb_to_assignment = {
                nb.name: a.name for a in gb.assignments for nb in a.notebooks
            }
            for sid in sorted(s for s in students if s in results):
                gb.update_or_create_student(sid)
                done = set()
                for row in results[sid]["rows"]:
                    assignment = nb_to_assignment[row["notebook"]]
                    if assignment not in done:
                        gb.update_or_create_submission(assignment, sid)
                        done.add(assignment)
                    grade = gb.find_grade(row["exercise"], row["notebook"], assignment, sid)
                    grade.auto_score = float(row["points"]) if row["points"] != "" else None
                    grade.needs_manual_grade = row["points"] == ""
                gb.db.commit()
        os.replace(tmp, self.out / "gradebook.db")
        return self.out / "gradebook.db"
