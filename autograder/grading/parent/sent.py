"""A submitted notebook's cells, read once, in a limited process of their own.

The parent never parses a student's notebook: its JSON can be anything up to
:data:`~.submissions.MAX_NOTEBOOK_BYTES` (300,000 empty outputs in one cell, 15 MB, took
the parent 2 s of CPU to read twice, and nbformat's validation three times as long before the
notebook was rebuilt). :func:`read_cells` hands the open file to ``python -m
autograder.grading.parent.sent`` (this module, standard library only), which limits its own
memory and CPU time, parses the JSON once, counts the cells before anything else is done with
them (more than :data:`~.submissions.MAX_CELLS`: refused), and writes back only what the
rebuilt notebook and the flags read (:func:`student_cells`): each cell's type, source and
scalar nbgrader metadata. Outputs, attachments and all other metadata never reach the parent:
its work for a notebook grows with the student's sources, not with the outputs.

>>> student_cells(b'{"cells": [{"cell_type": "code", "source": "x", "outputs": [{}, {}],'
...               b' "metadata": {"tags": [1], "nbgrader": {"grade_id": "a", "points": [2]}}}]}')
[{'cell_type': 'code', 'source': 'x', 'metadata': {'nbgrader': {'grade_id': 'a', \
'points': 'list'}}}]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from .submissions import (
    MAX_CELLS,
    MAX_NESTING,
    MAX_NOTEBOOK_BYTES,
    IntakeProblem,
    _too_deep,
    open_bounded,
)

MEMORY_MB = 2048  # the reading process's address space (a 32 MB notebook of empty objects:
# about 700 MB parsed)
CPU_S = 30  # ... and its CPU time (the 15 MB notebook of 300,000 outputs: 0.3 s)
_KEYS = ("grade_id", "grade", "solution", "locked", "points", "task", "schema_version")


class NotANotebook(Exception):
    """The file is not a notebook of this chapter: the row's reason (``not graded: ...``)."""


def student_cells(data: bytes) -> list[dict]:
    """The cells of a submitted notebook as plain dicts ``{cell_type, source, metadata}``:
    nbformat 4's ``cells``, or the cells of nbformat 3's ``worksheets`` (a code cell's source
    in ``input``, a heading cell as a Markdown heading); of the metadata only nbgrader's
    (:func:`_nbgrader`). Raises :class:`NotANotebook` (not JSON, no list of cells) or
    :class:`~.submissions.IntakeProblem` (over a cap).

    >>> student_cells(b'{"worksheets": [{"cells": [{"cell_type": "heading", "level": 2,'
    ...                b' "source": "Hi"}, {"cell_type": "code", "input": ["x", "=1"]}]}]}')
    [{'cell_type': 'markdown', 'source': '## Hi', 'metadata': {}}, {'cell_type': 'code', \
'source': 'x=1', 'metadata': {}}]
    """
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        if _too_deep(data, MAX_NESTING):
            raise IntakeProblem(f"the notebook nests deeper than {MAX_NESTING} levels") from None
        raise NotANotebook("invalid notebook file (not valid JSON)") from None
    raw = doc.get("cells") if isinstance(doc, dict) else None
    if raw is None and isinstance(doc, dict) and isinstance(doc.get("worksheets"), list):
        raw = [c for s in doc["worksheets"] if isinstance(s, dict)
               for c in (s.get("cells") if isinstance(s.get("cells"), list) else [])]
    if not isinstance(raw, list):
        raise NotANotebook("invalid notebook file (not an object with a list of cells)")
    if len(raw) > MAX_CELLS:  # counted before anything is done with them
        raise IntakeProblem(f"the notebook has more than {MAX_CELLS} cells")
    cells = []
    for c in raw:
        if not isinstance(c, dict):
            continue
        kind = c.get("cell_type")
        text = _text(c.get("input", c.get("source")) if kind == "code" else c.get("source"))
        if kind == "heading":
            level = c.get("level") if type(c.get("level")) is int else 1
            kind, text = "markdown", "#" * min(max(level, 1), 6) + " " + text
        meta = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        ours = _nbgrader(meta.get("nbgrader"))
        cells.append({"cell_type": kind if kind in ("code", "markdown", "raw") else "raw",
                      "source": text, "metadata": {"nbgrader": ours} if ours is not None else {}})
    return cells


def _nbgrader(meta) -> dict | None:
    """A cell's nbgrader metadata as the rebuilding and the flags read it: nbgrader's own keys,
    a value that is not a JSON scalar as its type's name (it still differs from the
    release's), a ``grade_id`` that is not text left out; None when there is none.

    >>> _nbgrader({"grade_id": ["x"], "grade": True, "extra": 1}), _nbgrader([1])
    ({'grade': True}, None)
    """
    if not isinstance(meta, dict):
        return None
    out = {}
    for k in _KEYS:
        if k not in meta:
            continue
        v = meta[k]
        if k == "grade_id" and not isinstance(v, str):
            continue
        scalar = v is None or type(v) in (bool, int, float) or (
            isinstance(v, str) and len(v) <= 1000)
        out[k] = v if scalar else type(v).__name__
    return out


def _text(source) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return ""


# ---- the parent's side ----------------------------------------------------------------------


def read_cells(path: Path) -> list[dict]:
    """:func:`student_cells` of the notebook at ``path``, read by a limited process of its own
    (see the module's doc); the parent only opens the file (a link or special file is never
    opened, one over :data:`~.submissions.MAX_NOTEBOOK_BYTES` never read) and reads back the
    cells. Raises :class:`~.submissions.IntakeProblem` or :class:`NotANotebook` with the row's
    reason; ``OSError`` when the file cannot be opened."""
    fd = open_bounded(path, MAX_NOTEBOOK_BYTES)
    try:
        done = subprocess.run([sys.executable, "-m", __name__], stdin=fd, capture_output=True,
                              timeout=CPU_S * 4)
    except subprocess.TimeoutExpired:
        raise IntakeProblem("the notebook could not be read within the grader's limits "
                            f"({CPU_S * 4} s)") from None
    finally:
        os.close(fd)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if type(answer) is not dict:
        raise IntakeProblem("the notebook could not be read within the grader's limits "
                            f"({MEMORY_MB} MB, {CPU_S} s of CPU; exit {done.returncode})")
    if answer.get("problem"):
        raise (NotANotebook if answer.get("kind") == "not a notebook" else IntakeProblem)(
            str(answer["problem"]).replace("the notebook", path.name, 1))
    return answer["cells"]


def main() -> None:
    """The reading process: limits first, then stdin (at most the cap, plus one byte to tell
    a file that grew), then one JSON answer on stdout."""
    limit = MEMORY_MB * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    data = sys.stdin.buffer.read(MAX_NOTEBOOK_BYTES + 1)
    try:
        if len(data) > MAX_NOTEBOOK_BYTES:
            raise IntakeProblem(f"the notebook is larger than {MAX_NOTEBOOK_BYTES / 2**20:g} MB")
        answer = {"cells": student_cells(data)}
    except NotANotebook as e:
        answer = {"problem": str(e), "kind": "not a notebook"}
    except IntakeProblem as e:
        answer = {"problem": str(e), "kind": "over a cap"}
    except MemoryError:
        answer = {"problem": f"the notebook needs more than {MEMORY_MB} MB to read",
                  "kind": "over a cap"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
