"""The output folder as the class's ledger: what a run grades, keeps and logs.

A run adds and updates only what it graded. For each student and assignment :func:`plan`
decides from this run's folder and the stored result (``results/<student>.json``):

- a notebook in this folder is graded when it is new, its bytes changed, the checks it was
  graded with changed (*stale*: its ``grader`` fingerprint, :func:`grader_print`, differs),
  or an option asks (``--force``, ``--regrade``, ``--regrade-exercise``);
- a notebook missing from this folder keeps its last result (rows, feedback, submission time,
  Canvas name): a per-assignment download never erases an earlier assignment. Only where no
  earlier run graded one is it the "not submitted" row;
- a result written before fingerprints were kept has an *unknown* grader fingerprint: it is
  not regraded unless an option asks (the run says how many).

:func:`merge` puts a student's new rows into the stored result; every change of a grade is a
line appended to ``OUT_DIR/changes.csv`` (:func:`changes`, :func:`append`; never rewritten).

>>> plan({"a": "h1"}, {"ledger": {"a": {"submission": "h1", "grader": "g0"}}}, {"a": "g1"}).grade
{'a': 'checks changed'}
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..pyast import parse
from ..status import Kind, row_kind
from .exports import cell, total

CHECKS = Path(__file__).resolve().parents[2] / "checks"  # the check code and exercise table
GRADER = Path(__file__).resolve().parents[1]  # autograder/grading: judges with some of it
CHANGES = "changes.csv"
CHANGE_COLUMNS = ["when", "run", "cause", "student", "assignment", "notebook", "exercise",
                  "old", "new"]
# why an assignment is graded: a change's cause (words: a cell starting "-" reads as a formula)
NEW, ABSENT, CHANGED, STALE = ("new submission", "not submitted", "submission changed",
                               "checks changed")
FORCE, REGRADE, EXERCISE, PRUNE = ("option --force", "option --regrade",
                                   "option --regrade-exercise", "option --prune")
BETWEEN = "between runs (formgrader: manual score, extra credit)"


def grader_print(notebooks: list[Path], checks: Path = CHECKS, grader: Path = GRADER) -> str:
    """What decides an assignment's grades, hashed: its source notebooks (the release and the
    hidden tests are made from them) and the files of the check code they use
    (:func:`check_files`). A result whose print differs is stale; a fix to another
    chapter's checks leaves it as it is."""
    h = hashlib.sha256()
    for p in sorted(notebooks):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    for name, data in check_files(notebooks, checks, grader):
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def check_files(notebooks: list[Path], checks: Path = CHECKS,
                grader: Path = GRADER) -> list[tuple[str, bytes]]:
    """The files of the check code (``autograder/checks/``) the ``notebooks`` use, as (name,
    bytes): the modules their code cells import and those the grader's own code
    (``grader``: the verdict, the kernel packages) imports or names, and every module those
    import, at any depth (a function's own imports too). The package's ``__init__.py``
    counts, not the chapter-01 checks it re-exports (they are chapter 01's). Of the exercise table
    (``table.py``), the rows of the chapters whose check modules are used, and all its
    code. A notebook cell that is not Python makes every module count."""
    import json

    modules = {p.stem for p in checks.glob("*.py")}
    wanted: set[str] = set()
    for nb in notebooks:
        try:
            cells = json.loads(nb.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError, AttributeError):
            return [(p.name, p.read_bytes()) for p in sorted(checks.glob("*.py"))]
        for c in cells:
            if not isinstance(c, dict) or c.get("cell_type") != "code":
                continue
            source = c.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            wanted |= _checks_imported(source, modules)
    for path in sorted(grader.rglob("*.py")):
        wanted |= _imports_of(path, modules)
    todo = [m for m in wanted if m != "__init__"]
    while todo:
        m = todo.pop()
        found = _imports_of(checks / f"{m}.py", modules, inside=True)
        for new in found - wanted:
            wanted.add(new)
            if new != "__init__":
                todo.append(new)
    files = []
    for m in sorted(wanted):
        data = (checks / f"{m}.py").read_bytes()
        files.append((f"{m}.py", _table_of(data, wanted) if m == "table" else data))
    return files


_IMPORTS: dict[tuple, frozenset[str]] = {}  # (path, its size and time) -> what it imports


def _imports_of(path: Path, modules: set[str], inside: bool = False) -> frozenset[str]:
    """:func:`_checks_imported` of the file at ``path`` (kept for this process while the
    file's size and modification time stay)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, inside, frozenset(modules))
    if key not in _IMPORTS:
        text = path.read_text(encoding="utf-8")
        _IMPORTS[key] = frozenset(_checks_imported(text, modules, inside)
                                  if "autograder.checks" in text or inside else ())
    return _IMPORTS[key]


def _checks_imported(source: str, modules: set[str], inside: bool = False) -> set[str]:
    """The modules of the check code (``__init__``: the package) that the Python ``source``
    imports, at any depth, or names as a whole string (``importlib``); ``inside``: a module
    of the check code, whose relative imports count. A cell that is not Python (IPython's
    ``%`` and ``!`` lines are left out first) imports every module.

    >>> sorted(_checks_imported("from autograder.checks import requires, _codec\\n"
    ...     "def f():\\n    from autograder.checks.masking import x\\n"
    ...     "'>>> from autograder.checks.bpe import y'", {"_codec", "masking", "bpe"}))
    ['__init__', '_codec', 'masking']
    """
    import ast

    try:
        tree = parse(source)
    except SyntaxError:
        try:
            tree = parse("\n".join(line for line in source.splitlines()
                                       if not line.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            return {"__init__", *modules}
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.fullmatch(r"autograder\.checks(\.\w+)?", node.value):
            names = [node.value]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            if inside and node.level == 1:
                names = [f"autograder.checks.{node.module}"] if node.module else \
                    [f"autograder.checks.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
            if node.module == "autograder.checks":
                names += [f"autograder.checks.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["autograder", "checks"]:
                found.add("__init__")
                if len(parts) > 2 and parts[2] in modules:
                    found.add(parts[2])
    return found


def _table_of(data: bytes, wanted: set[str]) -> bytes:
    """``table.py`` less the rows (``TABLES``' entries) of the chapters whose check module
    is not in ``wanted``."""
    import ast

    text = data.decode("utf-8")
    try:
        tree = parse(text)
    except SyntaxError:
        return data
    lines = text.splitlines(keepends=True)
    cut: set[int] = set()
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else \
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if not (isinstance(target, ast.Name) and target.id == "TABLES" and
                isinstance(node.value, ast.Dict)):
            continue
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            module = value.args[0].value if isinstance(value, ast.Call) and value.args and \
                isinstance(value.args[0], ast.Constant) else None
            if isinstance(module, str) and module not in wanted and key is not None:
                cut.update(range(key.lineno - 1, value.end_lineno))
    return "".join(line for i, line in enumerate(lines) if i not in cut).encode()


@dataclass
class Plan:
    """One student's run: ``grade`` {assignment: why}, ``keep`` the assignments kept from an
    earlier run (no notebook of them in this folder), ``unknown`` those graded before
    fingerprints were kept (not regraded), ``stale_kept`` the kept ones whose checks changed,
    that ``--regrade-exercise`` names or whose student ``--regrade`` names (their notebooks
    are not here to grade again: :func:`regrade_kept` grades OUT_DIR's)."""

    grade: dict[str, str] = field(default_factory=dict)
    keep: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    stale_kept: list[str] = field(default_factory=list)


def graded_before(stored: dict | None, notebooks: dict[str, list[str]]) -> set[str]:
    """The assignments of which ``stored`` (a result) holds rows other than "not submitted".

    >>> graded_before({"rows": [{"notebook": "n1", "kind": "graded"},
    ...                         {"notebook": "n2", "kind": "not submitted"}]},
    ...               {"a1": ["n1"], "a2": ["n2"]})
    {'a1'}
    """
    of = {nb: a for a, nbs in notebooks.items() for nb in nbs}
    return {of[row["notebook"]] for row in (stored or {}).get("rows", [])
            if row.get("notebook") in of and row_kind(row) is not Kind.NOT_SUBMITTED}


def plan(present: dict[str, str | None], stored: dict | None, graders: dict[str, str], *,
         notebooks: dict[str, list[str]] | None = None, force: bool = False,
         regrade: bool = False, exercises: frozenset[str] = frozenset(),
         legacy: bool = False, prune: bool = False) -> Plan:
    """What to do with one student: ``present`` {assignment: this folder's fingerprint of its
    notebooks, None when none of them is here}; ``stored`` the student's result (None: never
    graded); ``graders`` {assignment: :func:`grader_print`}; ``notebooks`` {assignment:
    [notebook]}; ``exercises`` the assignments ``--regrade-exercise`` names; ``legacy``: the
    result predates per-assignment fingerprints and its whole-submission fingerprint matches
    this folder (its assignments are unchanged, their checks unknown); ``prune``: a result
    kept of a notebook not in this folder is replaced by the "not submitted" rows.

    >>> p = plan({"a1": None, "a2": "h2"}, {"rows": [{"notebook": "a1", "kind": "graded"}]},
    ...          {"a1": "g", "a2": "g"}, notebooks={"a1": ["a1"], "a2": ["a2"]})
    >>> p.grade, p.keep
    ({'a2': 'new submission'}, ['a1'])
    """
    stored = stored or {}
    kept = graded_before(stored, notebooks or {a: [a] for a in present})
    ledger = stored.get("ledger") or {}
    had = {row.get("notebook") for row in stored.get("rows", [])}
    p = Plan()
    for a, h in present.items():
        entry = ledger.get(a)
        if h is None:  # nothing of it in this folder
            if a in kept and prune:
                p.grade[a] = PRUNE
            elif a in kept:
                p.keep.append(a)
                if regrade or a in exercises or (entry and entry.get("grader") !=
                                                 graders.get(a)):
                    p.stale_kept.append(a)
            elif not any(nb in had for nb in (notebooks or {a: [a]})[a]):
                p.grade[a] = ABSENT  # its "not submitted" rows, the first time
            continue
        why = ""
        if force or regrade:
            why = FORCE if force else REGRADE
        elif entry is None and legacy:
            p.unknown.append(a)
            why = EXERCISE if a in exercises else ""
        elif entry is None:
            why = CHANGED if a in kept else NEW
        elif entry.get("submission") != h:
            why = CHANGED
        elif entry.get("grader") != graders.get(a):
            why = STALE
        elif a in exercises:
            why = EXERCISE
        if why:
            p.grade[a] = why
    return p


def merge(old: dict | None, new: dict, grade: dict[str, str], notebooks: dict[str, list[str]],
          prints: dict[str, dict], only: dict[str, set[str]] | None = None) -> dict:
    """The student's stored result after this run: ``new`` (this run's result of the
    assignments in ``grade``) put into ``old``. Rows and feedback pages of the other
    assignments are ``old``'s; ``only`` {assignment: test cell ids} takes just those
    exercises' rows from ``new`` (``--regrade-exercise``, where nothing else asked for the
    assignment). Submission times and Canvas names stay ``old``'s (a kept notebook graded
    again from OUT_DIR keeps its own; ``ResultStore.save`` adds those of the notebooks in this
    run's folder). ``prints`` {assignment: {"submission", "grader"}} is kept as the result's
    ``ledger``, except after an error of the grader (graded again next run).

    >>> old = {"rows": [{"notebook": "a1", "exercise": "e", "points": "2"}], "feedback": [
    ...     "feedback/s/a1/a1.html"], "timing": {"a1": {"at": "x"}}}
    >>> new = {"rows": [{"notebook": "a2", "exercise": "e", "points": "1"}], "feedback": []}
    >>> m = merge(old, new, {"a2": NEW}, {"a1": ["a1"], "a2": ["a2"]}, {})
    >>> [r["notebook"] for r in m["rows"]], m["feedback"], m["timing"]
    (['a1', 'a2'], ['feedback/s/a1/a1.html'], {'a1': {'at': 'x'}})
    """
    old = old or {}
    only = only or {}
    of = {nb: a for a, nbs in notebooks.items() for nb in nbs}

    def theirs(row: dict) -> bool:  # is this row new's to give?
        a = of.get(row.get("notebook"), row.get("notebook"))
        return a in grade and (a not in only or row.get("exercise") in only[a])

    fresh = {(r["notebook"], r["exercise"]): r for r in new.get("rows", []) if theirs(r)}
    rows = [fresh.pop((r["notebook"], r["exercise"]), r) if theirs(r) else r
            for r in old.get("rows", [])]
    rows += list(fresh.values())
    order = {nb: i for i, nb in enumerate(of)}
    rows.sort(key=lambda r: order.get(r.get("notebook"), len(order)))  # stable: cell order
    result = {**old, **{k: v for k, v in new.items() if k != "rows"}, "rows": rows}
    whole = {a for a in grade if a not in only}
    result["feedback"] = [p for p in old.get("feedback", []) if _assignment(p) not in whole] + \
        [p for p in new.get("feedback", []) if _assignment(p) in grade]
    result["feedback"] = list(dict.fromkeys(result["feedback"]))
    for key in ("timing", "canvas"):  # kept: ResultStore.save adds this folder's over them
        result[key] = {**(old.get(key) or {}),
                       **{a: v for a, v in (new.get(key) or {}).items() if a in grade}}
    ledger = dict(old.get("ledger") or {})
    for a in whole:
        if new.get("fingerprint") == "grader-error":
            ledger.pop(a, None)
        elif a in prints:
            ledger[a] = prints[a]
    result["ledger"] = ledger
    return result


def publish(staging: Path, out: Path, student: str, assignments: list[str]) -> None:
    """Move a student's graded files of ``assignments`` from ``staging`` (where this run's
    grading put them: ``feedback/``, ``submitted/``, ``autograded/``) into OUT_DIR, replacing
    only those assignments' folders: the student's other assignments keep theirs. A
    ``submitted/<student>/<assignment>/`` course-grade did not make (:func:`ours`: nbgrader's
    collect put it there) is left as it is: the notebook graded is the one it holds."""
    import shutil

    for kind in ("feedback", "submitted", "autograded"):
        for a in assignments:
            dest, src = out / kind / student / a, staging / kind / student / a
            rel = f"{kind}/{student}/{a}"
            if kind == "submitted" and not ours(out, rel):
                continue
            shutil.rmtree(dest, ignore_errors=True)
            if src.is_dir():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(src, dest)
            if kind == "submitted":
                (made if src.is_dir() or dest.is_dir() else forget)(out, [rel])
        shutil.rmtree(staging / kind / student, ignore_errors=True)


# ---- nbgrader's own folders: only what course-grade made --------------------------------------
# OUT_DIR may be the instructor's nbgrader course folder (``nbgrader collect`` fills its
# ``submitted/``, ``generate_assignment`` reads its ``source/``). course-grade replaces or
# removes a ``source/<assignment>/`` or ``submitted/<student>/<assignment>/`` only where it
# made it; the ones it made are listed in ``OUT_DIR/created.json``.
CREATED = "created.json"


def created(out: Path) -> set[str]:
    """The folders of OUT_DIR's ``source/`` and ``submitted/`` course-grade made
    (``source/<assignment>``, ``submitted/<student>/<assignment>``). Where no list is kept
    yet, an OUT_DIR an older course-grade graded (its ``nbgrader_config.py`` is
    course-grade's and ``results/`` holds a result) has made every one it holds; any other
    (an instructor's course folder) none. An unreadable list names none."""
    import json

    try:
        found = json.loads((out / CREATED).read_text(encoding="utf-8"))
    except FileNotFoundError:
        found = None
    except (OSError, ValueError):
        return set()
    if found is not None:
        return {x for x in found if isinstance(x, str)} if isinstance(found, list) else set()
    from .course import written_by_us

    config = out / "nbgrader_config.py"
    mine = set()
    if config.is_file() and written_by_us(config) and any((out / "results").glob("*.json")):
        mine = {p.relative_to(out).as_posix() for p in
                [*(out / "source").glob("*"), *(out / "submitted").glob("*/*")]
                if p.is_dir() and not p.is_symlink()}
    _keep(out, mine)
    return mine


def ours(out: Path, rel: str) -> bool:
    """Whether course-grade may replace or remove ``OUT_DIR/<rel>`` (a folder of
    :func:`created`'s kind): there is none, or course-grade made it.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> (out / "submitted" / "ann" / "a1").mkdir(parents=True)  # nbgrader collect's
    >>> ours(out, "submitted/ann/a1"), ours(out, "submitted/bob/a1")
    (False, True)
    >>> made(out, ["submitted/bob/a1"]); (out / "submitted" / "bob" / "a1").mkdir(parents=True)
    >>> ours(out, "submitted/bob/a1"), sorted(created(out))
    (True, ['submitted/bob/a1'])
    """
    path = out / rel
    return not (path.exists() or path.is_symlink()) or rel in created(out)


def made(out: Path, rels: list[str]) -> None:
    """Note that course-grade made the folders ``rels`` of OUT_DIR."""
    if not set(rels) <= (have := created(out)):
        _keep(out, have | set(rels))


def forget(out: Path, rels: list[str]) -> None:
    """Note that the folders ``rels`` course-grade made are gone."""
    if set(rels) & (have := created(out)):
        _keep(out, have - set(rels))


def _keep(out: Path, rels: set[str]) -> None:
    import json

    path = out / CREATED
    tmp = path.with_name(f".{CREATED}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(sorted(rels), indent=0) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def from_ledger(out: Path, folder: Path, student: str, kept: list[str],
                notebooks: dict[str, list[str]], here: dict[str, dict[str, Path]]) -> list[str]:
    """Lay out in ``folder`` (made afresh) what a student's regrade reads, one
    ``<assignment>/<notebook>.ipynb`` each (nbgrader's per-assignment layout): of the ``kept``
    assignments the notebook last graded, from ``OUT_DIR/submitted/<student>/<assignment>/``
    (the grader's own copy, rebuilt from the release: nothing the student sent but its
    answers; in an instructor's course folder, the one ``nbgrader collect`` put there:
    :func:`ours`), and of the others the files ``here`` ({assignment: {notebook: path}}) found in
    this run's folder. Returns the ``kept`` assignments OUT_DIR holds a notebook of."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    found = []
    for a in kept:
        src = out / "submitted" / student / a
        names = [nb for nb in notebooks.get(a, []) if (src / f"{nb}.ipynb").is_file()]
        for nb in names:
            (folder / a).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / f"{nb}.ipynb", folder / a / f"{nb}.ipynb")
        if names:
            found.append(a)
    for a, paths in here.items():
        for nb, path in paths.items():
            (folder / a).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, folder / a / f"{nb}.ipynb")
    folder.mkdir(parents=True, exist_ok=True)
    return found


def regrade_kept(out: Path, work: Path, subs: list, absent: list[str], done: dict,
                 plans: dict, found_of: dict, notebooks: dict, graders: dict,
                 exercises: dict, regrade: frozenset[str] = frozenset()) -> tuple[dict, dict]:
    """Grade again, from the notebooks OUT_DIR keeps (``from_ledger``), the kept
    results of notebooks not in this folder that are stale, named by
    ``--regrade-exercise`` or of a student ``regrade`` (``--regrade``) names: their plans
    updated; returns ({student: the Submission to grade
    instead, a folder of the notebooks to grade}, {student: {assignment: the fingerprints
    to keep}}). A student with a file this folder's intake refused is left as it is."""
    from .submissions import Submission, missing

    grading, prints = {}, {}
    by_id = {s.student: s for s in subs}
    for sid in [*by_id, *absent]:
        p = plans.get(sid) or plan(  # absent from this folder: nothing of it here
            {a: None for a in graders}, done.get(sid), graders, notebooks=notebooks,
            exercises=frozenset(exercises), regrade=sid in regrade)
        sub, stored = by_id.get(sid), done.get(sid) or {}
        if not p.stale_kept or (sub is not None and sub.problem):
            continue
        if sub is None:  # only its kept results: no "not submitted" rows added
            p.grade = {}
            plans[sid] = p
        here, refused = {}, False
        for a in p.grade:
            for (path, note), nb in zip(found_of[sid][a], notebooks[a]):
                refused |= path is None and note != missing(nb)
                if path is not None:
                    here.setdefault(a, {})[nb] = path
        folder = work / "ledger" / sid
        if refused or not (got := from_ledger(out, folder, sid, list(p.stale_kept),
                                              notebooks, here)):
            continue
        for a in got:
            entry = (stored.get("ledger") or {}).get(a) or {}
            p.grade[a] = REGRADE if sid in regrade else \
                STALE if entry.get("grader") != graders[a] else EXERCISE
            p.keep.remove(a)
            p.stale_kept.remove(a)
            prints.setdefault(sid, {})[a] = {"submission": entry.get("submission"),
                                             "grader": graders[a]}
        who = sub or Submission(student=sid, path=None, origin=folder,
                                name=stored.get("name", ""), lms_id=stored.get("lms_id", ""))
        grading[sid] = Submission(student=sid, path=folder, origin=folder, name=who.name,
                                  lms_id=who.lms_id, lms=who.lms, per_assignment=True)
    return grading, prints


def summary(plans: dict, here: set[str]) -> list[str]:
    """The console's lines on what the ledger kept of the students ``here`` (absent ones are
    said on their own) and why it grades (:func:`plan`)."""
    from collections import Counter

    why = Counter(w for p in plans.values() for w in p.grade.values())
    kept = sum(len(p.keep) for sid, p in plans.items() if sid in here)
    unknown = sum(len(p.unknown) for p in plans.values())
    stale_kept = sum(len(p.stale_kept) for p in plans.values())
    lines = []
    if kept:
        lines.append(f"kept {kept} earlier result(s) of notebooks not in this folder "
                     "(--prune removes them)")
    if why[STALE]:
        lines.append(f"{why[STALE]} result(s) graded with other checks or another "
                     "release: graded again")
    if unknown:
        lines.append(f"{unknown} result(s) graded before course-grade kept the checks' "
                     "fingerprint: not graded again (--force or --regrade-exercise to)")
    if stale_kept:
        lines.append(f"{stale_kept} kept result(s) graded with other checks (or named by "
                     "--regrade-exercise or --regrade) have no notebook in OUT_DIR/submitted/, "
                     "or a file of this folder was refused: not graded again")
    return lines


def exercise_ids(name: str, grade_ids: list[str]) -> list[str]:
    """The test cells ``--regrade-exercise ASSIGNMENT:name`` names, among the assignment's
    ``grade_ids`` (the exercise table's ``ex<N>_<M>_<function>``): the id itself, ``ex2_1``,
    ``2.1``, ``Exercise 2.1`` or the function's name.

    >>> ids = ["ex2_1_causal_mask", "ex2_2_apply_mask"]
    >>> [exercise_ids(x, ids) for x in ("ex2_1", "2.2", "Exercise 2.1", "apply_mask", "3.1")]
    [['ex2_1_causal_mask'], ['ex2_2_apply_mask'], ['ex2_1_causal_mask'], ['ex2_2_apply_mask'], []]
    """
    from ..exercises import label

    want = name.strip()
    number = want.removeprefix("Exercise ").strip()
    return [g for g in grade_ids
            if want in (g, g.split("_", 2)[-1]) or g.startswith(f"{want}_")
            or label(g) == f"Exercise {number}"]


def _assignment(rel: str) -> str:
    """The assignment of a feedback page ``feedback/<student>/<assignment>/<nb>.html``."""
    parts = Path(rel).parts
    return parts[2] if len(parts) == 4 else ""


def prune_plan(stored: dict[str, dict], present: dict[str, dict[str, str | None]],
               assignments: list[str], notebooks: dict[str, list[str]]) -> list[str]:
    """What ``--prune`` removes, one line each: the students graded earlier who are not in
    this folder, and, of the assignments this run grades, the kept results of notebooks not
    in this folder (they become "not submitted").

    >>> prune_plan({"ann": {}, "bo": {"rows": [{"notebook": "a1", "kind": "graded"}]}},
    ...            {"bo": {"a1": None}}, ["a1"], {"a1": ["a1"]})
    ['ann (every result)', 'bo a1']
    """
    lines = [f"{sid} (every result)" for sid in sorted(set(stored) - set(present))]
    for sid in sorted(set(stored) & set(present)):
        kept = graded_before(stored[sid], notebooks)
        lines += [f"{sid} {a}" for a in assignments
                  if a in kept and present[sid].get(a, None) is None]
    return lines


# ---- the change log ---------------------------------------------------------------------------


def _value(row: dict | None) -> str:
    if row is None:
        return ""
    if row.get("points", "") != "":
        return str(row["points"])
    return "not submitted" if row_kind(row) is Kind.NOT_SUBMITTED else "not graded"


def changes(before: list[dict], after: list[dict], cause, assignment_of: dict[str, str],
            when: str = "", run: str = "") -> list[dict]:
    """The change log's lines between two sets of grades.csv rows: each exercise whose final
    points (or graded state) changed, and each assignment total (:func:`exports.total`) that
    changed. ``cause(student, assignment)`` says what caused it.

    >>> b = [{"student": "s", "notebook": "n", "exercise": "e", "points": "1", "kind": "graded"}]
    >>> a = [{**b[0], "points": "2"}]
    >>> [(c["exercise"], c["old"], c["new"]) for c in changes(b, a, lambda s, x: "x", {})]
    [('e', '1', '2'), ('total', '1', '2')]
    """
    def index(rows):
        return {(r["student"], r["notebook"], r["exercise"]): r for r in rows}

    def totals(rows):
        found: dict[tuple[str, str], list[dict]] = {}
        for r in rows:
            found.setdefault((r["student"], assignment_of.get(r["notebook"], r["notebook"])),
                             []).append(r)
        return {k: total(v) for k, v in found.items()}

    old, new = index(before), index(after)
    lines = []
    for key in sorted(set(old) | set(new)):
        o, n = _value(old.get(key)), _value(new.get(key))
        if o != n:
            sid, nb, ex = key
            a = assignment_of.get(nb, nb)
            lines.append(_line(when, run, cause(sid, a), sid, a, nb, ex, o, n))
    t_old, t_new = totals(before), totals(after)
    for sid, a in sorted(set(t_old) | set(t_new)):
        o, n = t_old.get((sid, a)), t_new.get((sid, a))
        if o != n:
            lines.append(_line(when, run, cause(sid, a), sid, a, "", "total",
                               "" if o is None else o or "none", "" if n is None else n or "none"))
    return lines


def _line(*values: str) -> dict:
    return dict(zip(CHANGE_COLUMNS, values, strict=True))


def now() -> str:
    """The change log's ``when``: UTC, to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def append(out: Path, lines: list[dict]) -> Path:
    """Append ``lines`` to ``OUT_DIR/changes.csv`` (its header written once); never rewritten."""
    path = out / CHANGES
    if not lines:
        return path
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CHANGE_COLUMNS, lineterminator="\n")
    if not path.exists() or path.stat().st_size == 0:
        w.writeheader()
    w.writerows({k: cell(v) for k, v in line.items()} for line in lines)
    with open(path, "a", encoding="utf-8", newline="") as f:
        f.write(buf.getvalue())
        f.flush()
        os.fsync(f.fileno())
    return path


def read(out: Path) -> list[dict]:
    """Every line of ``OUT_DIR/changes.csv`` (none when there is no log)."""
    try:
        with open(out / CHANGES, encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def last_run(out: Path) -> list[dict]:
    """The change log's lines of its last run."""
    lines = read(out)
    return [line for line in lines if line["run"] == lines[-1]["run"]] if lines else []
