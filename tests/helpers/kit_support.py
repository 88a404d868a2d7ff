"""What the student-kit tests look for in a kit (``autograder/kit.py``), and the verdict runs.

* :func:`answer_definitions`: a def/class named as an exercise function of the kit's chapters
  whose body is not a stub (``raise NotImplementedError``, or the reference stub's
  ``_unavailable(...)`` call), in the kit's Python files and its notebooks' code cells;
* :func:`solution_regions`: nbgrader's solution or hidden-test markers anywhere;
* :func:`hidden_leaks`: a hidden case's label, or one of its arrays (inputs or expected output)
  that no visible case shares, anywhere in the kit's data;
* :func:`mistake_sources`: a catalogued mistake function's source text in a kit file;
* :func:`compare_verdicts`: each visible check of the kit, run with only the kit on
  ``sys.path``, against the repository's own visible check (answers, mistakes, a mutant);
* :func:`install_problems`: what the kit's ``pyproject.toml``, README and ``constraints.txt``
  would install wrongly (issue 48 item 9).
"""

from __future__ import annotations

import ast
import base64
import functools
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import nbformat

from autograder.checks.table import TABLES

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- answers
def _exercise_names(chapters) -> set[str]:
    return {n for c in chapters for e in TABLES[c].exercises
            for n in (e.function, *e.arguments)}


def _is_stub(body) -> bool:
    body = list(body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1:
        return False
    node = body[0]
    if isinstance(node, ast.Raise):
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "_unavailable")


def _code_sources(folder: Path):
    for path in sorted(folder.rglob("*.py")):
        yield path.relative_to(folder).as_posix(), path.read_text()
    for path in sorted(folder.rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        release = REPO / "notebooks" / path.stem / path.name
        given = set()
        if release.is_file():  # a cell of the release notebook is what students get anyway
            given = {c.source for c in nbformat.read(release, as_version=4).cells}
        for i, c in enumerate(nb.cells):
            if c.cell_type == "code" and c.source not in given:
                # notebook magics are not Python: blank them
                yield f"{path.name}[{i}]", re.sub(r"(?m)^\s*[%!].*$", "", c.source)


# the plain-data codec's own ``encode``/``decode`` (JSON of tensors), not chapter 07's BPE
# ``encode``/``decode``: exempt only while the kit's file is the repository's, byte for byte
_SAME_NAME = {("autograder/checks/_codec.py", "encode"), ("autograder/checks/_codec.py", "decode")}
# chapter 08's drivers (experiments that call the student's function, no reference code):
# exempt while the kit's file is the repository's
_DRIVERS = "autograder/checks/_training_drivers.py"
# methods that share an exercise's name and are another thing: a seq2seq model's encode and
# decode (source -> memory -> logits), a character tokenizer's (chapter 08's data), chapter
# 08's tokenizer of the learner's chapter-07 pieces (its encode and decode call theirs)
_OTHER_METHODS = {("transformer_ref/models.py", "Transformer"),
                  ("transformer_ref/train/data.py", "CharTokenizer"),
                  ("autograder/checks/yours.py", "YourBPE")}


def answer_definitions(folder: Path, chapters) -> list[str]:
    names = _exercise_names(chapters)
    found = []
    for where, src in _code_sources(Path(folder)):
        same = (REPO / where).is_file() and (REPO / where).read_text() == src
        tree = ast.parse(src)
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and (where, node.name) in _OTHER_METHODS:
                skip |= {id(n) for n in node.body}
            # a check's probe: ``_step_probe(step_fn)`` defines ``train_step(seed, ...)``,
            # which runs the student's step in an experiment (chapter 08's wrappers)
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_probe") \
                    and where.startswith("autograder/checks/"):
                skip |= {id(n) for n in node.body}
        if same and where == _DRIVERS:
            continue
        for node in ast.walk(tree):
            if id(node) in skip or same and (where, node.__dict__.get("name")) in _SAME_NAME:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and node.name in names:
                if isinstance(node, ast.ClassDef) or not _is_stub(node.body):
                    found.append(f"{where}: {node.name}")
    return found


def solution_regions(folder: Path) -> list[str]:
    marks = ("### BEGIN SOLUTION", "### END SOLUTION", "BEGIN HIDDEN TESTS", "_hidden_check(")
    return [f"{p.relative_to(folder)}: {m}" for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.suffix in (".py", ".ipynb", ".json", ".md")
            for m in marks if m in p.read_text(errors="replace")]


# ---------------------------------------------------------------- hidden cases
def _arrays(x, out: set):
    """Every tensor/array in ``x`` (nested) as (dtype, shape, bytes), at least 4 entries."""
    import numpy as np
    import torch

    if type(x) in (tuple, list):
        for a in x:
            _arrays(a, out)
    elif type(x) is dict:
        for a in x.values():
            _arrays(a, out)
    elif isinstance(x, torch.Tensor):
        if x.numel() >= 4:
            a = x.detach().cpu().contiguous()
            if a.dtype == torch.bfloat16:
                a = a.view(torch.int16)
            out.add((str(x.dtype).replace("torch.", ""), tuple(x.shape), a.numpy().tobytes()))
    elif isinstance(x, np.ndarray) and x.size >= 4 and x.dtype.kind in "biufc":
        out.add((x.dtype.name, tuple(x.shape), np.ascontiguousarray(x).tobytes()))
    elif hasattr(x, "plain_args"):
        _arrays(x.plain_args(), out)


def _data_arrays(enc, out: set):
    if isinstance(enc, list):
        for a in enc:
            _data_arrays(a, out)
    elif isinstance(enc, dict):
        if enc.get("$") in ("nd", "tensor"):
            n = 1
            for s in enc["shape"]:
                n *= s
            if n >= 4:
                out.add((enc["dtype"], tuple(enc["shape"]), base64.b64decode(enc["v"])))
        for v in enc.values():
            _data_arrays(v, out)


def _strings(x, out: set):
    if isinstance(x, str):
        out.add(x)
    elif isinstance(x, list):
        for a in x:
            _strings(a, out)
    elif isinstance(x, dict) and x.get("$") not in ("nd", "tensor", "npscalar", "bytes"):
        for k, v in x.items():  # (an array's base64 is no text)
            out.add(k)
            _strings(v, out)


_OUTPUTS: dict = {}  # (id(mistake), id(case)) -> (mistake, case, (raised, value))


def _mistake_output(m, case):
    """``_core._mistake_output(m, case)`` (what the kit records for a mistake on a visible
    case), run once per mistake and case in this process: :func:`hidden_leaks` and
    :func:`compare_verdicts` both need it, on the same registered checks (their cases are
    built once). Raises what it raised."""
    from autograder.checks import _core

    hit = _OUTPUTS.get((id(m), id(case)))
    if hit is None or hit[0] is not m or hit[1] is not case:
        try:
            res = (False, _core._mistake_output(m, case))
        except Exception as e:  # noqa: BLE001
            res = (True, e.with_traceback(None))
        hit = _OUTPUTS[(id(m), id(case))] = (m, case, res)
    raised, value = hit[2]
    if raised:
        raise value
    return value


def hidden_leaks(folder: Path, chapters) -> list[str]:
    """Hidden labels and hidden arrays found in the kit's data (and labels in its code)."""

    folder = Path(folder)
    data_arrays, data_strings = set(), set()
    for path in sorted((folder / "autograder" / "checks" / "kit_data").glob("*.json")):
        data = json.loads(path.read_text())
        _data_arrays(data, data_arrays)
        _strings(data, data_strings)
    code = "\n".join(p.read_text() for p in sorted(folder.rglob("*.py")))
    # what the visible cases of the kit's chapters show anyway (a hidden case may share an
    # input, a mask say, with a visible one, or a label with another check's visible case)
    visible, visible_labels = set(), set()
    for ch in chapters:
        for ex in TABLES[ch].exercises:
            check = ex.declaration()
            for c in check.cases:
                if c.hidden:
                    continue
                visible_labels.add(c.label)
                _arrays((c.args, c.kwargs, c.expected, c.probe), visible)
                if c.call is not None:
                    _arrays(c.call(), visible)
                for m in check.mistakes:  # the kit records the mistakes on these
                    try:
                        _arrays(_mistake_output(m, c), visible)
                    except Exception:  # noqa: BLE001
                        pass
    leaks = []
    for ch in chapters:
        for ex in TABLES[ch].exercises:
            for c in ex.declaration().cases:
                if not c.hidden:
                    continue
                if c.label not in visible_labels and (
                        c.label in data_strings or repr(c.label) in code):
                    leaks.append(f"{ex.key}: hidden label {c.label!r}")
                for what, value in (("inputs", (c.args, c.kwargs)), ("expected", c.expected)):
                    mine = set()
                    _arrays(value, mine)
                    if c.call is not None and what == "inputs":
                        _arrays(c.call(), mine)
                    if (mine - visible) & data_arrays:
                        leaks.append(f"{ex.key}: hidden case {c.label!r}: its {what}")
    return leaks


# ---------------------------------------------------------------- mistakes
def _source_of(fn) -> str | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    if fn.__name__ != "<lambda>":
        try:
            return textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            return None
    text, lambdas, lines = _lambdas_of(code.co_filename)
    node = lambdas.get(code.co_firstlineno)
    if node is None:
        return None
    body = node.body
    if lines is None:
        return ast.get_source_segment(text, body)
    # the same segment, from the lines it spans only (not the whole file split again)
    where = types.SimpleNamespace(lineno=1, end_lineno=body.end_lineno - body.lineno + 1,
                                  col_offset=body.col_offset, end_col_offset=body.end_col_offset)
    return ast.get_source_segment("".join(lines[body.lineno - 1:body.end_lineno]), where)


@functools.cache
def _lambdas_of(filename: str) -> tuple:
    """(a source file's text, {line: its first lambda there, in ``ast.walk`` order}, its lines
    (None where ``str.splitlines`` would split it elsewhere than ``ast`` does)), once per file."""
    text = Path(filename).read_text()
    lambdas = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Lambda):
            lambdas.setdefault(node.lineno, node)
    odd = re.search("[\\r\\v\\f\\x1c\\x1d\\x1e\\x85\\u2028\\u2029]", text)
    return text, lambdas, None if odd else text.splitlines(keepends=True)


def _mistake_code(fn) -> list:
    """The functions that hold a mistake's own code: ``fn``, or where ``fn`` is a check's
    probe around it (chapter 08: ``_freq_probe(wrong)``, code the kit has), what it wraps."""
    found, todo = [], [fn]
    while todo:
        f = todo.pop()
        if "_probe.<locals>" in getattr(f, "__qualname__", "") or getattr(
                f, "__module__", "").endswith("_drivers"):
            todo += [c.cell_contents for c in (f.__closure__ or ())
                     if inspect.isfunction(c.cell_contents)]
        else:
            found.append(f)
    return found


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def mistake_sources(folder: Path, chapters) -> list[str]:
    """Catalogued mistakes (of the kit's chapters) whose source is in a kit file."""
    texts = {p.relative_to(folder).as_posix(): _squash(p.read_text(errors="replace"))
             for p in sorted(Path(folder).rglob("*")) if p.is_file()
             and p.suffix in (".py", ".md", ".ipynb")}
    for p in sorted(Path(folder).rglob("*.json")):  # its text: names, messages, hint sources
        strings = set()
        _strings(json.loads(p.read_text()), strings)
        texts[p.relative_to(folder).as_posix()] = _squash("\n".join(sorted(strings)))
    public = "".join(_squash(p.read_text()) for p in sorted((REPO / "notebooks").rglob("*.ipynb")))
    found = []
    for ch in chapters:
        for ex in TABLES[ch].exercises:
            for m in ex.mistakes:
                for fn in _mistake_code(m.fn):
                    src = _source_of(fn)
                    src = None if src is None else _squash(src)
                    if src is None or len(src) < 25 or src in public:
                        continue  # (a one-liner the release notebooks show anyway)
                    for where, text in texts.items():
                        if src in text:
                            found.append(f"{ex.key}: mistake {m.name!r} in {where}")
    return found


# ---------------------------------------------------------------- verdicts
def solution_module(chapter: str, folder: Path) -> Path:
    """The chapter's setup cell and answer cells (``solutions/NN/NN.py``) as one module."""
    from autograder.release import chapter_source, read_chapter

    nb = read_chapter(chapter_source(chapter))
    parts = []
    for c in nb.cells:
        nbg = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and (nbg.get("grade_id") == "setup" or nbg.get("solution")):
            parts.append(c.source)
    path = Path(folder) / f"kit_answers_{chapter}.py"
    path.write_text("\n\n".join(parts) + "\n")
    return path


MUTANTS = '''
"""A wrong answer outside any catalogue: the answer's result, changed by a rule of its type."""
import numpy as np
import torch


def mutate(out):
    if type(out) is tuple and out:
        return (mutate(out[0]), *out[1:])
    if type(out) is list:
        return out + [out[-1]] if out else [0]
    if type(out) is dict:
        return {**out, "(an extra key)": 1}
    if isinstance(out, torch.Tensor):
        if out.is_floating_point():
            return out * 1.37 + 0.011
        return out + 1
    if isinstance(out, np.ndarray):
        return (out * 1.37 + 0.011).astype(out.dtype) if out.dtype.kind == "f" else out + 1
    if isinstance(out, bool):
        return not out
    if isinstance(out, (int, float)):
        return out * 1.37 + 0.5
    if isinstance(out, (str, bytes)):
        return out + out[:1] + type(out)("?" if type(out) is str else b"?")
    return None


def mutant(fn):
    def wrong(*args, **kwargs):
        return mutate(fn(*args, **kwargs))
    wrong.__name__ = fn.__name__
    return wrong
'''

RUNNER = '''
import contextlib, io, json, os, sys
kit, extra, plan_path = sys.argv[1], sys.argv[2], sys.argv[3]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path[:0] = [kit, extra]
import importlib

import autograder
mods = [autograder]
if os.path.isdir(os.path.join(kit, "transformer_ref")):
    import transformer_ref
    mods.append(transformer_ref)
else:  # not in the kit: not reachable from elsewhere either
    try:
        import transformer_ref
    except ImportError:
        pass
    else:
        raise AssertionError(f"transformer_ref imported from {transformer_ref.__file__}")
for m in mods:
    assert os.path.realpath(m.__file__).startswith(os.path.realpath(kit)), m.__file__
from autograder.checks import _codec, _kit
from autograder.checks._core import CheckFailed

plan = json.load(open(plan_path))
import kit_mutants


def verdict(fn, arg):
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            fn(arg)
    except CheckFailed as e:
        return ["fail", str(e)]
    except Exception as e:
        return ["error", f"{type(e).__name__}: {e}"]
    ok = [ln for ln in buf.getvalue().splitlines() if ln.startswith("\\u2714")]
    return ["ok", ok[-1] if ok else buf.getvalue()]


results = {}
for item in plan:
    module = importlib.import_module("autograder.checks." + item["module"])
    check = getattr(module, item["public"])
    answers = importlib.import_module(item["answers"])
    answer = getattr(answers, item["function"])
    results[item["key"] + "|answer"] = verdict(check, answer)
    results[item["key"] + "|mutant"] = verdict(check, kit_mutants.mutant(answer))
    # a wrapped check (08: the notebook's check runs the student's function in an experiment)
    # is given the mistake as the registered check sees it: the experiment's result
    registered = module._CHECKS[item["public"]] if item["wrapped"] else check
    for name, table in item["mistakes"].items():
        results[item["key"] + "|mistake:" + name] = verdict(registered, _kit._lookup(table))
print(json.dumps(results))
for name, m in list(sys.modules.items()):
    f = getattr(m, "__file__", None) or ""
    f = os.path.realpath(f)  # nothing from the repository (its virtual environment aside)
    assert f.startswith(os.path.realpath(sys.prefix)) or not f.startswith(
        os.path.realpath(sys.argv[4]) + os.sep), (name, f)
'''


def _verdict(fn, arg):
    import contextlib
    import io

    from autograder.checks._core import CheckFailed

    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            fn(arg)
    except CheckFailed as e:
        return ["fail", str(e)]
    except Exception as e:  # noqa: BLE001
        return ["error", f"{type(e).__name__}: {e}"]
    ok = [ln for ln in buf.getvalue().splitlines() if ln.startswith("\u2714")]
    return ["ok", ok[-1] if ok else buf.getvalue()]


def _replay_table(check, m) -> dict | None:
    """What the repository's mistake ``m`` returns on the visible cases, keyed as ``_kit``
    looks it up (None: it does not run on one of them).

    A statistic's other generators (``case.samples``) are recorded only where ``_core._run``
    calls the function on them: on the visible cases up to the first that fails, where the
    output passes (``_samples_problem`` runs after ``_compare``). A kit check that asked for
    another would get no output (``NotPrecomputed``), and its verdict would differ from the
    repository's."""
    from autograder.checks import _codec, _core
    from autograder.checks._kit import digest

    table = {}
    failed = False  # a visible case before this one failed: the run stopped there
    for c in check.cases:
        if c.hidden:
            continue
        args = c.call() if c.call is not None else c.args
        key = digest(args, c.kwargs)
        try:
            rec = {"out": _codec.encode(_mistake_output(m, c))}
            if c.kind == "grad":
                grads = _core._mistake_grads(m, c)
                rec.update(grads=[None if g is None else _codec.encode(g) for g in grads],
                           probe=_codec.encode(c.probe), grad_args=list(c.grad_args))
        except Exception:  # noqa: BLE001
            return None
        table[key] = rec
        if failed or c.kind == "grad":
            continue
        try:
            failed = _core._compare(c.expected, _codec.decode(rec["out"]), c) is not None
        except Exception:  # noqa: BLE001
            failed = True
        if failed:  # the check fails here, and calls fn on no other generator
            continue
        for build in c.samples:  # a statistic's other generators: the check calls fn there
            more = build()
            try:
                out = m.fn(*_core._copy(more), **{k: _core._copy(v) for k, v in c.kwargs.items()})
                table[digest(more, c.kwargs)] = {"out": _codec.encode(out)}
            except Exception:  # noqa: BLE001
                return None
    return table


_REPOSITORY: dict = {}  # (key, the answers' source) -> _repository_verdicts(...)


def _repository_verdicts(public, answer, check, kit_mutants) -> tuple[dict, dict]:
    """({what: verdict} of the repository's check on the answer, its mutant and the mistakes
    it names, {mistake: its replay table for the kit})."""
    from autograder.checks import _core

    verdicts = {"answer": _verdict(public, answer),
                "mutant": _verdict(public, kit_mutants.mutant(answer))}
    mistakes = {}
    for m in check.mistakes:
        v = _verdict(lambda f, c=check: _core._run(c, f), m.fn)
        if f"Likely mistake: {m.name}." not in v[1]:
            continue  # the repository's check does not name it on these cases
        table = _replay_table(check, m)
        if table is None:
            continue
        mistakes[m.name] = table
        verdicts[f"mistake:{m.name}"] = v
    return verdicts, mistakes


def compare_verdicts(kit_dir: Path, chapters, tmp: Path) -> tuple[dict, dict]:
    """({(key, what): verdict} in the kit, the same in the repository). The repository's are
    judged with the metamorphic probes off: a kit's checks are data and run no probe
    (``autograder/checks/_metamorphic.py``), so a message a probe would add is not expected
    there."""
    from autograder.checks import _core, _metamorphic

    tmp = Path(tmp)
    (tmp / "kit_mutants.py").write_text(MUTANTS)
    sys.path.insert(0, str(tmp))
    try:
        import kit_mutants

        want, plan = {}, []
        for ch in chapters:
            path = solution_module(ch, tmp)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            answers = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(answers)
            module = importlib.import_module(f"autograder.checks.{TABLES[ch].module}")
            data = {d["key"]: d for d in json.loads(
                (Path(kit_dir) / "autograder" / "checks" / "kit_data"
                 / f"{TABLES[ch].module}.json").read_text())["checks"]}
            for ex in TABLES[ch].exercises:
                if data[ex.key].get("absent"):
                    continue
                # the repository's side does not depend on the kit: judged once per process
                # for these answers (a second kit's test compares with the same verdicts)
                memo = (ex.key, path.read_text())
                if memo not in _REPOSITORY:
                    with _metamorphic.disabled():
                        _REPOSITORY[memo] = _repository_verdicts(
                            getattr(module, f"check_{ex.function}"),
                            getattr(answers, ex.function), _core.get_check(ex.key),
                            kit_mutants)
                verdicts, mistakes = _REPOSITORY[memo]
                want.update({(ex.key, what): v for what, v in verdicts.items()})
                plan.append({"module": TABLES[ch].module, "public": f"check_{ex.function}",
                             "key": ex.key, "answers": path.stem, "function": ex.function,
                             "mistakes": mistakes, "wrapped": bool(data[ex.key].get("wrapper"))})
    finally:
        sys.path.remove(str(tmp))
        sys.modules.pop("kit_mutants", None)
    (tmp / "plan.json").write_text(json.dumps(plan))
    (tmp / "runner.py").write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COURSE_"))}
    proc = subprocess.run(
        [sys.executable, "-I", "-B", str(tmp / "runner.py"), str(kit_dir), str(tmp),
         str(tmp / "plan.json"), str(REPO)],
        cwd=kit_dir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    raw = json.loads(proc.stdout.strip().splitlines()[-1])
    got = {tuple(k.split("|", 1)): _no_address(v) for k, v in raw.items()}
    return got, {k: _no_address(v) for k, v in want.items()}


def _no_address(verdict: list) -> list:
    """A message without memory addresses (``<... object at 0x7f...>`` differs between two
    runs of the same check in the repository too)."""
    return [verdict[0], re.sub(r" at 0x[0-9a-f]+>", " at 0x…>", verdict[1])]


# ---------------------------------------------------------------- installing
def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(folder: Path) -> dict[str, str]:
    """{normalised name: version} of the kit's dependencies (``name==version`` each; a
    dependency written otherwise maps to "")."""
    import tomllib

    deps = tomllib.loads((Path(folder) / "pyproject.toml").read_text())["project"][
        "dependencies"]
    found = [re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:==\s*([^\s;,]+)\s*$)?", d) for d in deps]
    return {_norm(m[1]): m[2] or "" for m in found}


def install_problems(folder: Path) -> list[str]:
    """What is wrong with how the kit at ``folder`` installs: a dependency not pinned as the
    course's lock pins it, a module the kit's code imports that no dependency provides, torch
    other than the course's 2.13.0, no JupyterLab, a README that does not install torch from
    PyTorch's CPU index, a ``constraints.txt`` that is not the lock."""
    from importlib.metadata import packages_distributions

    from autograder import kit

    folder = Path(folder)
    lock = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            lock[_norm(name)] = version.strip()
    deps = pinned(folder)
    problems = [f"{name}=={v}: the lock pins {lock.get(name)}" for name, v in deps.items()
                if lock.get(name) != v or not v]
    if deps.get("torch") != "2.13.0":
        problems.append(f"torch {deps.get('torch')}, not the course's 2.13.0")
    if "jupyterlab" not in deps:
        problems.append("no jupyterlab")
    provides = packages_distributions()
    for module in sorted(kit.imported(folder)):
        if not any(_norm(d) in deps for d in provides.get(module, ())):
            problems.append(f"the kit imports `{module}` and no dependency provides it")
    line = f"pip install torch=={deps.get('torch')} --index-url {kit.TORCH_CPU_INDEX}"
    if line not in (folder / "README.md").read_text():
        problems.append(f"README does not say `{line}`")
    if (folder / "constraints.txt").read_bytes() != (REPO / "constraints.txt").read_bytes():
        problems.append("constraints.txt is not the course's lock")
    return problems


_EXECUTE = r"""
import json, sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells.append(nbformat.v4.new_code_cell(
    "import autograder, pathlib\n"
    "print('autograder from', pathlib.Path(autograder.__file__).resolve().parent.parent)"))
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
out = []
for c in nb.cells:
    if c.cell_type != "code":
        continue
    text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
    error = next((o.ename + ": " + o.evalue for o in c.outputs if o.output_type == "error"), None)
    out.append({"text": text, "error": error})
print(json.dumps(out))
"""


def run_later_chapters(kit_dir: Path, chapters, failing: str) -> dict:
    """Execute ``chapters``' notebooks in the kit at ``kit_dir`` (its folder first on the
    kernel's path), every chapter's answers saved beside them (``helpers.chapters``'s
    filled release) except ``failing``'s, saved with its catalogued mistake; smoke-sized
    (``COURSE_SMOKE=1``). ``{chapter: [{"text", "error"} per code cell]}``; the last cell
    prints where ``autograder`` came from."""
    from helpers.chapters import MISTAKES, filled_release

    for ch in TABLES:
        nb = filled_release(ch)
        if ch == failing:
            gid, old, new = MISTAKES[ch][:3]
            (cell,) = [c for c in nb.cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == gid]
            assert old in cell.source
            cell.source = cell.source.replace(old, new)
        nbformat.write(nb, kit_dir / f"{ch}.ipynb")
    env = {**os.environ, "PYTHONPATH": str(kit_dir), "COURSE_SMOKE": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1"}
    out = {}
    for ch in chapters:
        proc = subprocess.run([sys.executable, "-c", _EXECUTE, str(kit_dir / f"{ch}.ipynb"),
                               str(kit_dir)], cwd=kit_dir, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[ch] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out
