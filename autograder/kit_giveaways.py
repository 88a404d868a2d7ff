"""Given code of the student kit that passes an exercise's visible check as it is (issue 48).

    python -m autograder.kit_giveaways           # rewrite docs/reference/kit_giveaways.md
    python -m autograder.kit_giveaways --check   # exit 1 where the file is not what a run finds

The kit (``autograder/kit.py``) hands students code besides the checks: the input objects of
some cases (``autograder/checks/_builders.py``) and, for demonstration cells, parts of
``transformer_ref``. :func:`find` runs every visible check of a kit, with only that kit on
``sys.path`` (``python -I``, the repository's editable install taken out: the checks are the
kit's, as a student runs them), once with each callable of that given code as the answer:

- every function and class defined in ``_builders`` and in each module of the kit's
  ``transformer_ref`` (stubbed references raise, as they do for a student);
- every method of those classes, as the class holds it (``Class.method``; static and class
  methods bound as the class binds them);
- every function held in a module-level dict, list or tuple (``_MASKS["causal"]``).

A check that returns without raising is a pass: that callable, as given, is an answer. A
call that cannot take the first visible case's inputs (``inspect.Signature.bind`` fails) fails
that case with a ``TypeError`` before anything else runs, so it is not made (a wrapped check,
chapter 08's experiments, is always called); each call has :data:`SECONDS` (a slower one
fails). The check library's own modules (``_core``, ``_kit``, the chapter modules, ``yours``,
the drivers) are the checks, not given code, and are not tried.

:func:`markdown` lists the passes per chapter: ``docs/reference/kit_giveaways.md`` is written
from the whole course's kit by :func:`main`, and ``tests/slow/test_kit_all.py`` compares it
with a run on the kit it builds (a new give-away fails that test until it is listed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reference" / "kit_giveaways.md"
SECONDS = 10  # one check on one candidate; longer fails it (a loop that never ends)

RUNNER = r'''
import contextlib, importlib, inspect, io, json, os, signal, sys
kit = sys.argv[1]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path[:] = [kit] + [p for p in sys.path if p and os.path.realpath(p) != os.getcwd()]
import autograder
assert os.path.realpath(autograder.__file__).startswith(os.path.realpath(kit)), autograder
from autograder.checks import _core

def given_modules():
    names = ["autograder.checks._builders"]
    top = os.path.join(kit, "transformer_ref")
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, f[:-3]), kit).replace(os.sep, ".")
                names.append(rel[:-len(".__init__")] if rel.endswith(".__init__") else rel)
    return names

def candidates():
    out = []
    for name in given_modules():
        module = importlib.import_module(name)
        for attr, v in list(vars(module).items()):
            where = f"{name}.{attr}"
            if getattr(v, "__module__", None) != name and not isinstance(v, (dict, list, tuple)):
                continue  # imported from elsewhere: listed where it is defined
            if inspect.isfunction(v):
                out.append((where, v))
            elif inspect.isclass(v):
                out.append((where, v))
                for m, f in list(vars(v).items()):
                    if isinstance(f, (staticmethod, classmethod)):
                        out.append((f"{where}.{m}", getattr(v, m)))
                    elif inspect.isfunction(f):
                        out.append((f"{where}.{m}", f))
            elif isinstance(v, (dict, list, tuple)):
                items = v.items() if isinstance(v, dict) else enumerate(v)
                for k, f in items:
                    if inspect.isfunction(f) and f.__module__ == name:
                        out.append((f"{where}[{k!r}]", f))
    return out

class TooSlow(Exception):
    pass

def alarm(signum, frame):
    raise TooSlow()

signal.signal(signal.SIGALRM, alarm)

def first_inputs(check):
    """(args, kwargs) of the check's first visible case (None where it has none)."""
    cases = [c for c in check.cases if not c.hidden]
    if not cases:
        return None
    return (cases[0].call() if cases[0].call is not None else cases[0].args), cases[0].kwargs

def cannot_take(inputs, fn):
    """True where fn cannot be called on ``inputs`` (the first case's)."""
    if inputs is None:
        return False
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        sig.bind(*inputs[0], **inputs[1])
    except TypeError:
        return True
    return False

def passes(public, fn):
    sink = io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            public(fn)
        return True
    except Exception:
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

SECONDS = float(os.environ["KIT_GIVEAWAY_SECONDS"])
found, tried = [], 0
given = candidates()
data_dir = os.path.join(kit, "autograder", "checks", "kit_data")
for path in sorted(os.listdir(data_dir)):
    data = json.load(open(os.path.join(data_dir, path), encoding="utf-8"))
    module = importlib.import_module("autograder.checks." + data["module"])
    for d in data["checks"]:
        if d.get("absent"):
            continue
        public = getattr(module, d["public"])
        wrapped = bool(d.get("wrapper"))
        inputs = None if wrapped else first_inputs(_core.get_check(d["key"]))
        for where, fn in given:
            if not wrapped and cannot_take(inputs, fn):
                continue
            tried += 1
            if passes(public, fn):
                found.append({"chapter": data["chapter"], "exercise": d["exercise"],
                              "function": d["name"], "given": where})
print(json.dumps({"found": found, "candidates": len(given), "calls": tried}))
'''


def find(kit_dir: Path) -> dict:
    """``{"found": [{"chapter", "exercise", "function", "given"}, ...], "candidates": n,
    "calls": n}`` for the kit at ``kit_dir``: the given callables that pass a visible check
    (``given``: the module's dotted name and the callable's), how many were tried, and how many
    calls were made."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COURSE_"))}
    env["KIT_GIVEAWAY_SECONDS"] = str(SECONDS)
    with tempfile.TemporaryDirectory(prefix="kit-giveaways-") as cwd:  # files a call writes
        proc = subprocess.run(
            [sys.executable, "-I", "-B", "-c", RUNNER, str(Path(kit_dir).resolve())],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the give-away run failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def markdown(found: list[dict]) -> str:
    """The give-aways as ``docs/reference/kit_giveaways.md`` lists them (per chapter)."""
    from autograder.checks.table import TABLES

    lines = [
        "---", "orphan: true", "---", "",
        "# Given code that passes a visible check", "",
        "<!-- Written by `python -m autograder.kit_giveaways` (autograder/kit_giveaways.py); "
        "tests/slow/test_kit_all.py fails where a run on the kit finds anything else. -->", "",
        "The student kit (`python -m autograder.release --kit OUT`) ships given code besides "
        "the checks: the input objects of some cases (`autograder/checks/_builders.py`) and, "
        "for demonstration cells, parts of `transformer_ref` (the references of the kit's "
        "chapters stubbed). Every visible check of the whole course's kit was run with each "
        "function, class and method of that code as the answer; these passed, so a student "
        "who finds them has that exercise's answer. The kit's README names the `_builders` "
        "parts (and what else they hold) to the instructor; a kit of fewer chapters ships "
        "fewer of them, and leaves the other chapters' references in `transformer_ref` "
        "(its README says which).", "",
    ]
    by_chapter: dict[str, list[dict]] = {}
    for f in found:
        by_chapter.setdefault(f["chapter"], []).append(f)
    for chapter in TABLES:
        rows = sorted(by_chapter.get(chapter, []),
                      key=lambda f: ([int(p) for p in f["exercise"].split()[-1].split(".")],
                                     f["given"]))
        lines += [f"## {chapter}", ""]
        lines += [f"- {f['exercise']} `{f['function']}`: `{f['given']}`" for f in rows] or [
            "None found."]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from autograder import kit

    p = argparse.ArgumentParser(prog="python -m autograder.kit_giveaways",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true",
                   help="compare with docs/reference/kit_giveaways.md instead of writing it")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kit-") as tmp:
        built = kit.build(Path(tmp) / "course-kit")
        text = markdown(find(built)["found"])
    if args.check:
        same = DOC.is_file() and DOC.read_text(encoding="utf-8") == text
        print(f"{DOC.relative_to(ROOT)}: {'up to date' if same else 'differs from a run'}")
        return 0 if same else 1
    DOC.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
