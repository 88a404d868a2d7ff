"""A submitted notebook's cells, read once, in a limited process of its own.

The parent never parses a student's notebook (its JSON can be anything up to
``submissions.MAX_NOTEBOOK_BYTES``). ``rebuild.read_cells`` hands the open file to this module,
run as a script of its own (``python -I -S sent.py CAPS``: standard library only), which limits
its own memory and CPU time, parses the JSON once, counts the cells first, and writes back only
each cell's type, source and scalar nbgrader metadata (:func:`student_cells`): the parent's
work grows with the student's sources, not with the outputs.

>>> student_cells(b'{"cells": [{"cell_type": "code", "source": "x", "outputs": [{}, {}],'
...               b' "metadata": {"tags": [1], "nbgrader": {"grade_id": "a", "points": [2]}}}]}')
[{'cell_type': 'code', 'source': 'x', 'metadata': {'nbgrader': {'grade_id': 'a', \
'points': 'list'}}}]
"""

from __future__ import annotations

import json
import re
import sys

_KEYS = ("grade_id", "grade", "solution", "locked", "points", "task", "schema_version")


class NotANotebook(Exception):
    """The file is not a notebook of this chapter: the row's reason (``not graded: ...``)."""


def student_cells(data: bytes) -> list[dict]:
    """The cells of a submitted notebook as plain dicts ``{cell_type, source, metadata}``:
    nbformat 4's ``cells``, or the cells of nbformat 3's ``worksheets`` (a code cell's source
    in ``input``, a heading cell as a Markdown heading); of the metadata only nbgrader's
    (:func:`_nbgrader`). Raises :class:`NotANotebook` (not JSON, no list of cells).

    >>> student_cells(b'{"worksheets": [{"cells": [{"cell_type": "heading", "level": 2,'
    ...                b' "source": "Hi"}, {"cell_type": "code", "input": ["x", "=1"]}]}]}')
    [{'cell_type': 'markdown', 'source': '## Hi', 'metadata': {}}, {'cell_type': 'code', \
'source': 'x=1', 'metadata': {}}]
    """
    return _compact(_raw_cells(data))


def _raw_cells(data: bytes) -> list:
    """The notebook's list of cells as parsed (nothing of them looked at yet)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise NotANotebook("invalid notebook file (not valid JSON)") from None
    raw = doc.get("cells") if isinstance(doc, dict) else None
    if raw is None and isinstance(doc, dict) and isinstance(doc.get("worksheets"), list):
        raw = [c for s in doc["worksheets"] if isinstance(s, dict)
               for c in (s.get("cells") if isinstance(s.get("cells"), list) else [])]
    if not isinstance(raw, list):
        raise NotANotebook("invalid notebook file (not an object with a list of cells)")
    return raw


def _compact(raw: list) -> list[dict]:
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


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(data: bytes, limit: int) -> bool:
    """True if the JSON text nests deeper than ``limit``, found without parsing it.

    Strings are blanked, everything but brackets is dropped, then innermost pairs are
    removed once per level: anything left after ``limit`` rounds (that still shrinks) is
    deeper. Unbalanced text is left for the parser to call invalid.

    >>> too_deep(b'{"a": [1, "[[[["]}', 2), too_deep(b'{"a": [[1]]}', 2)
    (False, True)
    """
    s = _STRING.sub(b'""', data).translate(None, _NOT_BRACKET)
    run = re.compile(rb"[\[{]{%d}" % (limit + 1))  # that many openings in a row: too deep
    for _ in range(limit):
        if not s:
            return False
        if run.search(s):
            return True
        # one level a round: a pair is marked first, so "{[]}" loses "[]" only
        inner = s.replace(b"[]", b"x").replace(b"{}", b"x")
        if len(inner) == len(s):
            return False  # unbalanced: not ours to judge
        s = inner.replace(b"x", b"")
    return b"[]" in s or b"{}" in s


def read(data: bytes, caps: dict) -> dict:
    """The answer for the parent: ``{"cells": [...]}``, or ``{"problem": why, "kind": "not a
    notebook" | "over a cap"}`` (``caps``: ``bytes``, ``cells``, ``nesting``); "the notebook"
    in ``why`` is the parent's to name.

    >>> read(b'{"cells": [{}, {}]}', {"bytes": 99, "cells": 1, "nesting": 9})
    {'problem': 'the notebook has more than 1 cells', 'kind': 'over a cap'}
    """
    if len(data) > caps["bytes"]:
        return {"problem": f"the notebook is larger than {caps['bytes'] / 2**20:g} MB",
                "kind": "over a cap"}
    try:
        raw = _raw_cells(data)
    except NotANotebook as e:
        if too_deep(data, caps["nesting"]):
            return {"problem": f"the notebook nests deeper than {caps['nesting']} levels",
                    "kind": "over a cap"}
        return {"problem": str(e), "kind": "not a notebook"}
    if len(raw) > caps["cells"]:  # counted before anything is done with them
        return {"problem": f"the notebook has more than {caps['cells']} cells",
                "kind": "over a cap"}
    return {"cells": _compact(raw)}


def main(caps: dict) -> None:
    """The reading process: its limits first, then stdin (at most the cap, plus one byte to
    tell a file that grew), then one JSON answer on stdout."""
    import resource

    limit = caps["memory_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (caps["cpu_s"], caps["cpu_s"] + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    data = sys.stdin.buffer.read(caps["bytes"] + 1)
    try:
        answer = read(data, caps)
    except MemoryError:
        answer = {"problem": f"the notebook needs more than {caps['memory_mb']} MB to read",
                  "kind": "over a cap"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
