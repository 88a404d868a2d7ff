"""The record channel: how a graded kernel's records reach the grading process, sealed.

The kernel's probe (``autograder/checks/_probe.py``) sends each record as one ``display_data``
message of type ``record.RECORD_MIME`` from inside the locked test cell that checks it. The
executor (``preprocessors.SealedExecute``) hands each to :class:`Seal`, which accepts a record
only

- while a test cell runs that calls the record's key (``exercises.keys_in`` of its source),
- carrying that cell's *seal*: a secret drawn when the cell starts and written into the
  cell's hidden call as the kernel runs it (``preprocessors.with_seal``): no code that ran
  before the test cell can know it;
- once per key: a second sealed record of a key in one cell makes it ``malformed`` (0);
- from a cell that then ends normally: one that ends in an error, at the cell timeout or
  with the kernel gone after its record was accepted loses it (``malformed``).

An accepted record is written at once to ``.grader/records/<assignment>/<key>.json``, which no
kernel can see: it is final when its test cell ends. Anything else is dropped and written down
(``tampered``: the row is flagged). Nothing the kernel writes into a file is read back.

The same object keeps the grader's own evidence of the run, seen in the trusted process:
``timeouts`` (cells nbclient interrupted) and ``stopped`` (the cell where the kernel ended or
flooded its output), written to ``<notebook>.evidence.json`` as they happen, which
``nbgrader_main`` folds into the assignment's result.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path

from ..record import MAX_RECORD  # a larger record is kept as ``too_large``


def records_dir(root: Path, assignment: str) -> Path:
    """Where the sealed records of one assignment of a student's course folder are."""
    return Path(root) / ".grader" / "records" / assignment


class Seal:
    """The sealed records and the run's evidence of one notebook (see the module's docstring).

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> s = Seal(d, "nb")
    >>> s.start_cell(3, "test_a", ["ch.f"])
    >>> s.record('{"key": "ch.f", "cases": []}')  # without the cell's seal: refused
    >>> s.record(json.dumps({"key": "ch.f", "seal": s.secret, "cases": []}))
    >>> s.end_cell()
    >>> s.record('{"key": "ch.f", "cases": []}')  # a later cell: dropped, written down
    >>> json.loads((d / "ch.f.json").read_text())["key"]
    'ch.f'
    >>> [t["cell"] for t in s.evidence["tampered"]]
    [3, None]
    """

    def __init__(self, folder: Path, notebook: str):
        self.folder = Path(folder)
        self.notebook = notebook
        self.folder.mkdir(parents=True, exist_ok=True)
        self.cell: int | None = None
        self.grade_id: str | None = None
        self.keys: list[str] = []
        self.seen: set[str] = set()
        self.secret: str | None = None  # the running test cell's seal (the module's doc)
        self.course_cell = False  # the running cell is the course's, and no student code ran
        self.student_ran = False
        self.evidence: dict = {"timeouts": [], "stopped": None, "tampered": []}
        self._save()

    def start_cell(self, index: int, grade_id: str | None, keys: list[str],
                   course: bool = False) -> None:
        """A cell starts: ``keys``, the records it may send (a fresh :attr:`secret` seals
        them); ``course``: a locked course cell that calls no student code."""
        self.cell, self.grade_id, self.keys, self.seen = index, grade_id, list(keys), set()
        self.secret = secrets.token_hex(16) if self.keys else None
        self.course_cell = course and not self.student_ran
        if not course and not self.student_ran:  # written once: the student's code has run
            self.student_ran = True
            self.evidence["student_ran"] = True
        # the cell running now, written down as it starts and ends: a whole-run limit that
        # kills this process reads whose code was running (parent/student.py, limit_stop)
        self.evidence["running"] = index
        self._save()

    def end_cell(self) -> None:
        self.cell, self.grade_id, self.keys, self.seen = None, None, [], set()
        self.secret = None
        self.evidence["running"] = None
        self._save()

    def record(self, text) -> None:
        """One record message's payload, as the kernel sent it."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        key, seal = _head_of(text) if isinstance(text, str) else (None, None)
        if key is None or key not in self.keys:
            self._tampered(f"sent a grader record outside its test cell ({key or 'no key'})")
            return
        if seal is None or not secrets.compare_digest(seal, self.secret or ""):
            self._tampered(f"sent a grader record without its test cell's seal ({key})")
            return
        path = self.folder / f"{key}.json"
        if key in self.seen:
            self._tampered(f"sent a second record for {key}")
            _write(path, json.dumps({"key": key, "malformed": "two records sent by one cell"}))
            return
        self.seen.add(key)
        if len(text) > MAX_RECORD:
            text = json.dumps({"key": key, "too_large": len(text)})
        _write(path, text)

    def cell_ended(self, status: str, ename: str = "") -> None:
        """The running cell's reply came; one not "ok" loses the records it sent."""
        if status != "ok":
            self._unsealed(f"ended in {str(ename)[:80] or 'an error'}")

    def _unsealed(self, how: str) -> None:
        """Make each record accepted in the running cell ``malformed`` and write it down."""
        for key in sorted(self.seen):
            _write(self.folder / f"{key}.json", json.dumps(
                {"key": key, "malformed": f"its test cell {how} after the record was sent"}))
            self._tampered(f"the test cell of {key} {how} after its record was sent")
        self.seen = set()

    def invalid_output(self) -> None:
        """The running cell displayed an output nbformat rejects: dropped, written down once."""
        what = "displayed an output that is not a valid notebook output (dropped)"
        if not any(t.get("what") == what for t in self.evidence["tampered"]):
            self._tampered(what)

    def timeout(self, index: int) -> None:
        self.evidence["timeouts"].append(index)
        self._save()

    def stopped(self, index: int | None, why: str) -> None:
        """The run stopped in cell ``index`` (in a course cell before any student code: not
        the student's doing)."""
        if self.evidence["stopped"] is None:
            self.evidence["stopped"] = {"cell": index, "why": why,
                                        "course_cell": self.course_cell}
            self._save()
        self._unsealed(f"stopped ({why})")

    def _tampered(self, what: str) -> None:
        self.evidence["tampered"].append({"cell": self.cell, "grade_id": self.grade_id,
                                          "what": what})
        self._save()

    def _save(self) -> None:
        _write(self.folder / f"{self.notebook}.evidence.json", json.dumps(self.evidence))


def read_evidence(root: Path, assignment: str, notebook: str) -> dict:
    """What :class:`Seal` wrote for one notebook ({} when its run never started)."""
    try:
        data = json.loads((records_dir(root, assignment) / f"{notebook}.evidence.json")
                          .read_text())
    except (OSError, ValueError):
        return {}
    return data if type(data) is dict else {}


_SEAL = re.compile(r'\s*,\s*"seal"\s*:\s*"([0-9a-f]{1,64})"')


def _head_of(text: str) -> tuple[str | None, str | None]:
    """The ``"key"`` of a record's text and the ``"seal"`` right after it, without parsing it.

    >>> _head_of('{"key":"attention.softmax","seal":"0f3a","cases":[]}')
    ('attention.softmax', '0f3a')
    >>> _head_of('{"key": "attention.softmax", "cases": []}'), _head_of('[1]')
    (('attention.softmax', None), (None, None))
    """
    head = text[:400].lstrip()
    if not head.replace(" ", "").startswith('{"key":'):
        return None, None
    rest = head.split(":", 1)[1].lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None, None
    if type(value) is not str or len(value) >= 200:
        return None, None
    seal = _SEAL.match(rest, end)
    return value, seal.group(1) if seal else None


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------- reading a sealed record
def read_record(folder: Path, key: str) -> dict | None:
    """The sealed record for ``key`` in ``folder`` (:func:`parse_record`), None if none."""
    path = Path(folder) / f"{key}.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_RECORD + 1)
        while len(data) <= MAX_RECORD:
            more = os.read(fd, MAX_RECORD + 1 - len(data))
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    return parse_record(data, key)


# A record's bounds, far above what the probe writes: its deepest nesting is about 105
# (record, cases, case, samples, sample, then up to 33 levels of ``_codec`` data, 3 JSON
# levels each for a dict) and its only JSON numbers are short (times; outputs travel as
# strings). Python's json recurses once per level, so depth is checked before parsing.
MAX_RECORD_DEPTH = 400
MAX_RECORD_DIGITS = 1000
_SCAN_CHUNK = 1 << 20  # bytes of a record scanned at once (its arrays: some 50 MB)


class _Refused(Exception):
    """A record over one of the bounds, raised while parsing it (not a ValueError)."""


def record_depth(data: bytes) -> int:
    r"""The deepest nesting of ``[`` and ``{`` in JSON text ``data``, outside its strings: one
    linear, vectorised scan (no recursion; 1 to 2 s for 64 MB of any content). A quote ends
    a string unless an odd run of backslashes precedes it.

    >>> record_depth(b'{"a": [[1], "]]{{"], "b": {}}')
    3
    >>> record_depth(rb'["\\", ["\"[", {}]]'), record_depth(b"")
    (3, 0)
    """
    import numpy as np

    step = np.zeros(256, dtype=np.int8)
    step[list(b"[{")], step[list(b"]}")] = 1, -1
    deepest = level = 0
    in_string, escaped = False, False  # at the chunk's start
    for start in range(0, len(data), _SCAN_CHUNK):
        a = np.frombuffer(data, np.uint8, min(_SCAN_CHUNK, len(data) - start), start)
        special = np.flatnonzero((a == 34) | (a == 92))  # the quotes and backslashes
        if escaped and special.size and special[0] == 0:
            special = special[1:]  # escaped by the previous chunk's last backslash
        is_bs = a[special] == 92
        after_bs = np.zeros(special.size, dtype=bool)  # right after a backslash
        after_bs[1:] = is_bs[:-1] & (special[1:] == special[:-1] + 1)
        index = np.arange(special.size)
        run_start = np.maximum.accumulate(np.where(is_bs & ~after_bs, index, 0))
        odd_run = is_bs & ((index - run_start) % 2 == 0)  # ends an odd run of backslashes
        odd_before = np.zeros(special.size, dtype=bool)
        odd_before[1:] = odd_run[:-1]
        quotes = special[~is_bs & ~(after_bs & odd_before)]
        escaped = bool(special.size and special[-1] == a.size - 1 and odd_run[-1])
        brackets = np.flatnonzero(step[a])
        outside = (np.searchsorted(quotes, brackets) + in_string) % 2 == 0
        in_string ^= bool(quotes.size % 2)
        if outside.any():
            levels = np.cumsum(step[a[brackets[outside]]], dtype=np.int64) + level
            deepest, level = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def _json_constant(name: str):
    raise _Refused(f"{name} in place of a number")


def _json_int(text: str) -> int:
    if len(text) > MAX_RECORD_DIGITS:
        raise _Refused(f"an integer of {len(text):,} digits")
    return int(text)


def _json_float(text: str) -> float:
    x = float(text)
    if x - x != 0:  # inf (1e999)
        raise _Refused(f"a number out of range ({text[:20]})")
    return x


def parse_record(data: bytes, key: str) -> dict | None:
    """The record for ``key`` from ``data``: the dict; None when not JSON or not ``key``'s;
    ``{"too_large": n}``; ``{"key": key, "malformed": why}`` past a bound the probe never
    nears (nesting, an integer's digits, NaN or Infinity).

    >>> parse_record(b'{"key": "a.f", "cases": []}', "a.f")
    {'key': 'a.f', 'cases': []}
    >>> parse_record(b'{"key": "a.f", "cases": NaN}', "a.f")
    {'key': 'a.f', 'malformed': 'NaN in place of a number'}
    >>> parse_record(b'{"key": "b.g"}', "a.f") is None
    True
    """
    if len(data) > MAX_RECORD:
        return {"too_large": len(data)}
    depth = record_depth(data)
    if depth > MAX_RECORD_DEPTH:
        return {"key": key, "malformed": f"nested {depth:,} levels deep"}
    try:
        rec = json.loads(data, parse_constant=_json_constant,
                         parse_int=_json_int, parse_float=_json_float)
    except _Refused as e:
        return {"key": key, "malformed": str(e)}
    except RecursionError:  # (the depth bound is below the interpreter's limit)
        return {"key": key, "malformed": "nested too deeply to read"}
    except ValueError:
        return None
    return rec if type(rec) is dict and rec.get("key") == key else None

