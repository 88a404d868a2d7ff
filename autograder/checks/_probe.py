"""The kernel side of a graded check: run the student's function, record plain data, judge nothing.

In a kernel that ``course-grade`` starts for a converted chapter (``COURSE_PROBE_DIR`` set,
the chapter's check module replaced by a stub without expected values), the locked test
cell's ``_hidden_check("attention.softmax", softmax)`` ends up here. :func:`run` reads the
case *inputs* the grader wrote (``in/<key>.json``, see ``_codec``), calls the function on each,
and sends the grading process a record (:func:`send`): per case the output (plain data), or
the exception's type and message, or "not implemented"; for a gradient case the input gradients of
``sum(output * probe)``; whether an input was changed in place; and the ATen operators that
ran in *any* thread while the function ran (PyTorch's profiler) and the torch functions
its own thread called (``backward``, ``grad``: no operator of their own), from which the
grader decides "built with a forbidden built-in". The grader compares all of it with expected
values it computes itself, in a process where no student code runs (``_judge``).

Nothing here is trusted: the student's code can patch this module or send a record itself.
The grader accepts one record per key, only from the key's own test cell and only with that
cell's seal (a secret the grader writes into the cell as the kernel runs it), and only if the
cell then ends normally; a second sealed record makes the key's record malformed: 0. So a
record forged before the test cell is refused, and one forged during it (the seal read from
the running cell) must also stop the probe's own record without ending the cell in an error:
best-effort (``docs/reference/guarantees.md``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
import time
import traceback

import torch

from autograder.checks import _codec
from autograder.checks._names import calls_name
from autograder.checks._swap import given_function, swapped
from autograder.grading.record import MAX_RECORD, RECORD_MIME


def _ops_profiler():
    """A profiler context that records operators from every thread (None if unavailable)."""
    try:
        from torch._C._profiler import _ExperimentalConfig
        from torch.autograd.profiler import profile

        return profile(
            use_cpu=True,
            experimental_config=_ExperimentalConfig(profile_all_threads=True),
        )
    except Exception:  # noqa: BLE001 - then the grader sees no operator list
        return None


def _op_names(prof) -> list:
    """The names of the operators the profiler saw: read from its raw events (building its
    ``function_events`` tree costs about 40 times more and gives the same names)."""
    try:
        return [e.name() for e in prof.kineto_results.events()]
    except Exception:  # noqa: BLE001 - another profiler version
        return [e.name for e in prof.function_events]


class _Names(torch.overrides.TorchFunctionMode):
    """Records the ``__name__`` of every torch function called in this thread (``backward``,
    ``grad``, ``softmax`` ...): the names the in-kernel guard of ``_core`` switches off."""

    def __init__(self):
        super().__init__()
        self.names: set = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(str(getattr(func, "__name__", ""))[:80])
        return func(*args, **(kwargs or {}))


_REF_MARK = os.sep + "transformer_ref" + os.sep


class _Reference:
    """A trace hook (this thread and threads started during the call) that records the
    functions of the course's reference package (``transformer_ref``) entered: a chapter
    whose notebook imports it for its demonstrations has it in the kernel, and its checks
    (``reference_off``) get 0 if it ran (best-effort: only Python frames are seen).

    A global trace function is called once per Python frame entered and, returning None,
    never for its lines; a profile hook would also be called at every return and every call
    of a C function (each torch operator): chapter 08's train_step cases ran 2 s longer."""

    def __init__(self):
        self.seen: set = set()

    def __call__(self, frame, event, arg):
        if event == "call" and _REF_MARK in frame.f_code.co_filename:
            path = frame.f_code.co_filename.split(_REF_MARK, 1)[1]
            self.seen.add(f"transformer_ref/{path}:{frame.f_code.co_name}"[:120])

    def __enter__(self):
        self.previous = sys.gettrace(), threading.gettrace()
        sys.settrace(self)
        threading.settrace(self)
        return self

    def __exit__(self, *exc):
        sys.settrace(self.previous[0])
        threading.settrace(self.previous[1])


def _exception(e: BaseException) -> dict:
    frames = traceback.extract_tb(e.__traceback__)
    where = ""
    for fr in reversed(frames):
        f = fr.filename
        if "site-packages" in f or "/autograder/" in f:
            continue
        where = f"in `{fr.name}`, line {fr.lineno}: {(fr.line or '').strip()}"
        break
    try:
        msg = str(e)
    except Exception:  # noqa: BLE001 - a message that raises
        msg = "(its message could not be read)"
    return {
        "exc": type(e).__name__[:80],
        "msg": msg[:2000],
        "where": where[:300],
        "raised_in": (frames[-1].name if frames else "")[:80],
    }


def _enc(x):
    try:
        return _codec.encode(x)
    except _codec.CodecError as e:
        return {"$": "opaque", "type": f"value the grader cannot carry ({e})"}


def _call(fn, spec: dict, args_enc, names: set | None = None, ref: set | None = None) -> dict:
    """One call of ``fn`` on decoded inputs -> its record (status, out, grads, mutated);
    the torch functions it called go into ``names``, reference functions entered into
    ``ref`` (None: not watched; the hook slows Python code, so a timed run is not)."""
    args = _codec.decode(args_enc)
    kwargs = _codec.decode(spec["kwargs"])
    grad_args = spec.get("grad_args") or []
    if spec.get("kind") == "grad":
        args = tuple(a.requires_grad_(True) if i in grad_args else a for i, a in enumerate(args))
    rec: dict = {}
    if names is None:
        names = set()
    mode = _Names()
    watch = _Reference() if ref is not None else contextlib.nullcontext()
    try:
        with torch.enable_grad(), mode, watch:
            out = fn(*args, **kwargs)
    except NotImplementedError as e:
        rec.update(status="not_implemented", **_exception(e))
        return rec
    except KeyboardInterrupt:  # the grader's interrupt at the cell timeout: the cell stops
        raise
    except BaseException as e:  # noqa: BLE001 - the student's code raised (SystemExit too)
        rec.update(status="raised", **_exception(e))
        return rec
    finally:
        names |= mode.names
        if ref is not None:
            ref |= watch.seen
    rec["status"] = "ok"
    rec["out"] = _enc(out)
    if spec.get("kind") != "grad":
        after = [_enc(a) for a in args]
        rec["mutated"] = any(
            isinstance(b, dict) and b.get("$") in ("nd", "tensor") and a != b
            for a, b in zip(after, args_enc.get("v", []))
        )
        return rec
    first = out[0] if type(out) in (tuple, list) and len(out) > 0 else out
    rec["connected"] = type(first) is torch.Tensor and bool(first.requires_grad)
    rec["grads"] = [None] * len(grad_args)
    if rec["connected"]:
        probe = _codec.decode(spec["probe"])
        try:
            (first * probe).sum().backward()
        except Exception as e:  # noqa: BLE001
            rec.update(status="raised", **_exception(e))
            return rec
        rec["grads"] = [
            None if args[i].grad is None else _enc(args[i].grad) for i in grad_args
        ]
    return rec


def calibration(n: int = 500_000) -> int:
    """A fixed pure-Python workload (tuple keys in a dict, like a BPE trainer's pair counts).

    A timed stage times it next to the student's function, in the same process, so that a
    load that slows one slows the other: the grader times it next to its own baseline and
    compares the two ratios, never two clocks taken at different moments. ``calibration()``
    returns 65,511 (the distinct keys, 251 x 261)."""
    d: dict = {}
    for i in range(n):
        k = (i % 251, i % 261)
        d[k] = d.get(k, 0) + 1
    return len(d)


def _timed(fn, spec: dict) -> list:
    """A check's timed stage (e.g. chapter 07's speed challenge): up to ``runs`` calls on the
    same inputs, each with its output and the CPU seconds it took *as this kernel measured
    them* (``cpu_s``), and the CPU seconds of :func:`calibration` timed just before it
    (``cal_s``). It stops early once the best call takes at most ``enough`` times the best
    calibration. The grader can only take these times on trust: best-effort, see ``_judge``."""
    runs, best, cal = [], None, None
    enough = spec.get("enough")
    for _ in range(min(int(spec.get("runs", 1)), 6)):
        t0 = time.process_time()
        calibration()
        c = time.process_time() - t0
        t0 = time.process_time()
        rec = _call(fn, {"kwargs": _codec.encode({})}, spec["args"])
        rec["cpu_s"] = time.process_time() - t0
        rec["cal_s"] = c
        runs.append(rec)
        if rec["status"] != "ok":
            break
        best = rec["cpu_s"] if best is None else min(best, rec["cpu_s"])
        cal = c if cal is None else min(cal, c)
        if type(enough) is float and best <= enough * cal:
            break
    return runs


def _earlier(probe_dir: str, spec: dict, fn) -> dict:
    """{name: {"key", "cases"}}: the student's earlier functions that ``fn`` calls (the
    check's ``uses``), each recorded on its own check's cases, for the grader's cascade."""
    found = {}
    fn = getattr(fn, "student", fn)  # 08: a probe runs the student's function
    for name, key in spec.get("uses") or []:
        earlier = getattr(fn, "__globals__", {}).get(name)
        path = os.path.join(probe_dir, "in", f"{key}.json")
        if not (calls_name(fn, name) and callable(earlier) and os.path.exists(path)):
            continue
        with open(path) as f:
            up = json.load(f)
        cases = []
        for c in up["cases"]:  # as run() records them, samples included
            rec = {"label": c["label"], **_call(earlier, c, c["args"])}
            if rec["status"] == "ok" and c.get("samples"):
                rec["samples"] = [_call(earlier, c, s) for s in c["samples"]]
            cases.append(rec)
        found[name] = {"key": key, "cases": cases}
    return found


def _record_cases(fn, spec: dict) -> tuple[list, list | None, set, set | None]:
    """``fn`` on every case of ``spec``: (case records, ATen operators seen, torch functions
    called, reference functions entered or None when not watched)."""
    cases, ops, names = [], None, set()
    ref = set() if spec.get("reference_off") else None
    prof = _ops_profiler()
    if prof is not None:
        prof.__enter__()
    try:
        for c in spec["cases"]:
            rec = {"label": c["label"], **_call(fn, c, c["args"], names, ref)}
            if rec["status"] == "ok" and c.get("samples"):
                rec["samples"] = [_call(fn, c, s, names, ref) for s in c["samples"]]
            if rec["status"] == "ok" and c.get("variants"):  # the grader's probes (_metamorphic)
                rec["variants"] = [_call(fn, {"kind": c.get("kind"), "kwargs": v["kwargs"]},
                                         v["args"], names, ref) for v in c["variants"]]
            cases.append(rec)
    finally:
        if prof is not None:
            try:
                prof.__exit__(None, None, None)
                ops = sorted({n for n in _op_names(prof) if n.startswith("aten::")})
            except Exception:  # noqa: BLE001
                ops = None
    return cases, ops, names, ref


def _close(a, b) -> bool:
    """Whether two decoded results agree (arrays and tensors up to rounding)."""
    import math

    import numpy as np

    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point() or a.is_complex():
            return bool(torch.allclose(a.detach().double(), b.detach().double(), rtol=1e-5,
                                       atol=1e-6, equal_nan=True))
        return bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.kind in "fc":
            return bool(np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) or (a != a and b != b)
    return bool(a == b)


def _same_result(mine: dict, theirs: dict) -> bool:
    """Whether two records of one case agree: same status, and outputs (and gradients)
    close. Anything that cannot be compared counts as different."""
    try:
        if mine.get("status") != theirs.get("status"):
            return False
        if mine.get("status") != "ok":
            return mine.get("exc") == theirs.get("exc")
        for part in ("out", "grads"):
            if not _close(_codec.decode(mine.get(part)), _codec.decode(theirs.get(part))):
                return False
        return True
    except Exception:  # noqa: BLE001
        return False


def _given(probe_dir: str, spec: dict, fn, uses: dict, given: dict | None) -> dict:
    """{name: the given implementation} for each earlier function that ``fn`` calls (recorded
    in ``uses``) whose results on its own check's cases differ from the given one's
    (``given``: {name: source}, from the locked test cell's hidden part). Which ones differ
    is this kernel's guess; it only decides what else is recorded, and the grader judges
    the earlier function from its own record either way."""
    if not given or not uses:
        return {}
    target = getattr(fn, "student", fn)
    space = getattr(target, "__globals__", None)
    if type(space) is not dict:
        return {}
    found = {}
    for name, key in spec.get("uses") or []:
        source, mine = given.get(name), uses.get(name)
        if type(source) is not str or type(mine) is not dict:
            continue
        try:
            impl = given_function(target, name, source)
            with open(os.path.join(probe_dir, "in", f"{key}.json")) as f:
                up = json.load(f)
        except Exception:  # noqa: BLE001
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            theirs = [_call(impl, c, c["args"]) for c in up["cases"]]
        if len(theirs) != len(mine["cases"]) or not all(
                _same_result(m, t) for m, t in zip(mine["cases"], theirs)):
            found[name] = impl
    return found


def run(probe_dir: str, key: str, fn, sink=None, given: dict | None = None,
        seal: str | None = None) -> None:
    """Record ``fn`` on every case of ``key`` (visible and hidden) and send the record
    (:func:`send`, or ``sink(text)``: the tests judge records without a kernel).

    ``given`` ({name: source}): the given implementations of the earlier exercises ``fn``
    calls. Where the student's earlier function differs from the given one, ``fn`` is also
    recorded with the given one in its place (``record["given"]``), so that the grader can
    judge this exercise on its own when the earlier one fails its check (one mistake costs
    one exercise). ``seal``: the running test cell's secret, sent right after the key."""
    with open(os.path.join(probe_dir, "in", f"{key}.json")) as f:
        spec = json.load(f)
    uses = _earlier(probe_dir, spec, fn) if spec.get("uses") else {}
    cases, ops, names, ref = _record_cases(fn, spec)
    head = {"key": key, "seal": seal} if seal else {"key": key}
    record = {**head, "cases": cases, "ops": ops, "functions": sorted(names),
              "reference": sorted(ref or ())[:1000],  # (08: the model's own calls too)
              "uses": uses}
    if spec.get("timed") and all(c["status"] == "ok" for c in cases):
        record["timed"] = _timed(fn, spec["timed"])
    swap = _given(probe_dir, spec, fn, uses, given)
    if swap:
        with swapped(fn, swap):
            cases, ops, names, ref = _record_cases(fn, spec)
            other = {"names": sorted(swap), "cases": cases, "ops": ops,
                     "functions": sorted(names), "reference": sorted(ref or ())[:1000]}
            if spec.get("timed") and all(c["status"] == "ok" for c in cases):
                other["timed"] = _timed(fn, spec["timed"])
        record["given"] = other
    text = json.dumps(record, separators=(",", ":"))
    if len(text) > MAX_RECORD:
        text = json.dumps({**head, "too_large": len(text)}, separators=(",", ":"))
    (sink or send)(text)
    print(
        f"(course-grade recorded what `{spec['name']}` returns on {len(cases)} cases; "
        "the grade is decided outside this notebook)"
    )


def forget_cell(frame) -> None:
    """Take the source of the cell ``frame`` runs out of the line cache, where IPython keeps
    every cell's text (with or without its input history): a test cell's hidden part (the
    hidden cases' calls, the given earlier solutions) is then not there for the student's
    function, or a later cell, to read and print (issue 47). Files on disk stay (an entry
    with a modification time).

    >>> import linecache
    >>> linecache.cache["<cell-1>"] = (9, None, ["_given = 1\\n"], "<cell-1>")
    >>> forget_cell(type("F", (), {"f_code": compile("", "<cell-1>", "exec")})())
    >>> "<cell-1>" in linecache.cache
    False
    """
    import linecache

    name = getattr(getattr(frame, "f_code", None), "co_filename", None)
    entry = linecache.cache.get(name) if type(name) is str else None
    if type(entry) is tuple and len(entry) == 4 and entry[1] is None:
        linecache.cache.pop(name, None)


def send(text: str) -> None:
    """Send one record to the grading process: a ``display_data`` message of the record type on
    the kernel's IOPub channel, which the grader's executor takes out of the cell's outputs and
    seals (``autograder/grading/autograde/records.py``). Only a record sent while its own
    test cell runs is accepted, once."""
    from IPython.display import publish_display_data

    publish_display_data({RECORD_MIME: text})


def visible(name: str):
    """The ``check_<name>`` of a graded kernel: the grader runs the cases, not this kernel."""

    def check(fn, *more):  # check_checkpoint((save, load)) or (save, load)
        fns = (*fn, *more) if type(fn) in (tuple, list) else (fn, *more)
        if not fns or not all(callable(f) for f in fns):
            raise TypeError(f"pass your function `{name}` to the check")

    check.__name__ = check.__qualname__ = f"check_{name}"
    return check
