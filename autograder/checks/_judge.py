"""The trusted side of a graded check: inputs for the kernel, a verdict from its records.

``course-grade`` imports a chapter's check module in *its* process (nbgrader's, where no
student code runs), writes each check's case inputs with :func:`case_inputs` for the kernel's
probe (``_probe``), and after the notebook ran turns the probe's record into a
:class:`Verdict` with :func:`judge`: the same comparison, tolerances, catalogue of mistakes
and messages as the in-kernel check (``_core``), applied to plain data.

>>> from autograder.checks.attention import _DOT
>>> judge(_DOT, None).diagnosis
'output missing'
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

from autograder.checks import _codec
from autograder.checks._core import (
    Case,
    Check,
    _compare,
    _compare_arrays,
    _diagnosed_mistake,
    _exercise_of,
    _indent,
    _safe_match,
    _show,
    _small,
    _spread_problem,
)
from autograder.checks._core import _fail as _core_fail


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str
    diagnosis: str = ""  # "" when passed; else a catalogued mistake's name or a failure kind


def case_inputs(check: Check) -> dict:
    """What the kernel's probe needs for ``check``: every case's inputs, no expected value."""
    cases = []
    for case in check.cases:
        args = case.call() if case.call is not None else case.args
        d = {
            "label": case.label,
            "kind": case.kind,
            "args": _codec.encode(tuple(args)),
            "kwargs": _codec.encode(dict(case.kwargs)),
            "grad_args": list(case.grad_args),
        }
        if case.kind == "grad":
            d["probe"] = _codec.encode(case.probe)
        if case.samples:
            d["samples"] = [_codec.encode(tuple(b())) for b in case.samples]
        cases.append(d)
    out = {"key": check.key, "name": check.name, "exercise": check.exercise, "cases": cases,
           "reference_off": bool(check.reference_off)}  # the probe watches transformer_ref
    timed = getattr(check.post, "trusted", None)  # a stage the grader can judge from a record
    if timed is not None:
        out["timed"] = {"args": _codec.encode(tuple(timed.args())), "runs": timed.runs}
    return out


def forbidden_ops(check: Check, ops) -> list[str]:
    """The recorded ATen operators that are a forbidden built-in of ``check``.

    >>> from autograder.checks.attention import _SOFTMAX
    >>> forbidden_ops(_SOFTMAX, ["aten::mul", "aten::_softmax", "aten::exp"])
    ['aten::_softmax']
    """
    names = set(check.forbidden)
    return [op for op in ops or () if op.split("::", 1)[-1].lstrip("_") in names
            or op.split("::", 1)[-1] in names]


def _exception(r: dict) -> BaseException:
    """A stand-in for the student's exception (its type by name, its message) for ErrorHints."""
    name, msg = str(r.get("exc", "Exception")), str(r.get("msg", ""))
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(name, (Exception,), {})
    try:
        return cls(msg)
    except Exception:  # noqa: BLE001 - an exception class with another signature
        try:  # (UnicodeDecodeError takes five arguments: an instance without them)
            e = cls.__new__(cls)
            e.args = (msg,)
            return e
        except Exception:  # noqa: BLE001
            return Exception(msg)


def _kind_of(problem: str) -> str:
    """A failure kind for the CSV from a comparison's message."""
    for pattern, kind in (
        (r"has shape", "wrong shape"),
        (r"has dtype", "wrong dtype"),
        (r"should be a", "wrong type"),
        (r"spread by", "not a measurement"),
        (r"is exactly", "not a measurement"),
        (r"gradient", "wrong gradient"),
    ):
        if re.search(pattern, problem):
            return kind
    return "output differs"


def _decode(enc):
    if _codec.carries_builders(enc):  # outputs are plain data: nothing is built from them
        return None, "its recorded output is not plain data (it describes an object to build)"
    try:
        return _codec.decode(enc), None
    except (_codec.CodecError, ValueError, TypeError, KeyError) as e:
        return None, f"its recorded output could not be read ({e})"


def _grad_problem(case: Case, r: dict) -> str | None:
    expected_out, expected_grads = case.expected
    out, bad = _decode(r.get("out"))
    if bad:
        return bad
    if type(out) in (tuple, list) and len(out) > 0:
        out = out[0]
    problem = _compare_arrays(expected_out, out, case)
    if problem:
        return problem
    if not r.get("connected"):
        return (
            "the output is not connected to the inputs' autograd graph "
            "(no gradient flows back: avoid .detach(), .numpy() and torch.no_grad())"
        )
    grads = r.get("grads")
    if type(grads) is not list or len(grads) != len(case.grad_args):
        return "its recorded gradients could not be read"
    for i, want, enc in zip(case.grad_args, expected_grads, grads):
        if enc is None:
            return f"no gradient reaches input {i + 1}"
        got, bad = _decode(enc)
        if bad:
            return bad
        problem = _compare_arrays(want, got, case, what=f"the gradient for input {i + 1}")
        if problem:
            return problem
    return None


def _fail(check: Check, case: Case, body: str, diagnosis: str, n_visible: int) -> Verdict:
    text = str(_core_fail(check, case, body))
    if case.hidden and n_visible:
        text = f"The visible cases pass; the hidden case “{case.label}” fails.\n{text}"
    return Verdict(False, text, diagnosis)


def judge(check: Check, record: dict | None, cell_error: str = "") -> Verdict:
    """The verdict on ``check`` (visible and hidden cases) from the kernel's ``record``.

    ``cell_error``: how the test cell ended in the kernel (e.g. "NameError: name 'f' is not
    defined"), used to say why nothing was recorded.
    """
    head = f"{check.exercise} `{check.name}`"
    if record is None or type(record) is not dict:
        why = f" (the test cell stopped with {cell_error})" if cell_error else ""
        return Verdict(
            False,
            f"✘ {head}: no result was recorded: the test cell did not run your function to "
            f"the end{why}.",
            "output missing",
        )
    if record.get("too_large"):
        return Verdict(False, f"✘ {head}: your outputs are too large to grade.", "output too large")
    cases = list(check.cases)
    recs = {}
    for r in record.get("cases") or []:
        if type(r) is dict and type(r.get("label")) is str:
            recs.setdefault(r["label"], r)
    functions = record.get("functions")
    used = forbidden_ops(check, record.get("ops")) + [
        f"torch.{n}" for n in (functions if type(functions) is list else [])
        if type(n) is str and n in check.forbidden]
    if used:
        name = used[0].split("::", 1)[-1].removeprefix("torch.").lstrip("_")
        where = (f"operator {used[0]}, seen in any thread" if "::" in used[0]
                 else f"`{used[0]}` called")
        return Verdict(
            False,
            f"✘ {head}: {check.exercise} asks you to build `{check.name}` from scratch, but the "
            f"PyTorch built-in `{name}` ran while it was checked ({where}). "
            f"{check.forbidden_hint}",
            f"used forbidden built-in {name}",
        )
    ref = record.get("reference")
    if check.reference_off and type(ref) is list and ref:
        return Verdict(
            False,
            f"✘ {head}: {check.exercise} asks you to write `{check.name}` yourself, but the "
            f"course's reference implementation ran while it was checked ({str(ref[0])[:120]}"
            f"{f' and {len(ref) - 1} more' if len(ref) > 1 else ''}). Use the objects you are "
            "given and your own code.",
            "used the reference implementation",
        )
    outputs = {}
    for case in cases:
        r = recs.get(case.label)
        if r and r.get("status") == "ok" and case.kind != "grad":
            outputs[case.label] = _decode(r.get("out"))[0]
    n_visible = sum(not c.hidden for c in cases)
    for case in cases:
        r = recs.get(case.label)
        if r is None:
            return _fail(check, case, "no result was recorded for this case", "output missing",
                         n_visible)
        status = r.get("status")
        if status == "not_implemented":
            where = str(r.get("raised_in", ""))
            extra = ""
            if where and where != check.name:
                extra = (f" (it calls `{where}`, which is not implemented yet: finish "
                         f"{_exercise_of(check, where)} first)")
            return Verdict(
                False,
                f"… {head} is not implemented yet{extra}. Replace `raise NotImplementedError()` "
                "with your code, run that cell, then this one.",
                "not implemented",
            )
        if status == "raised":
            exc = _exception(r)
            body = f"your function raised {r.get('exc')}: {r.get('msg')}"
            if r.get("where"):
                body += f"\n  {r['where']}"
            hint = next((h for h in check.error_hints if _safe_match(h, exc)), None)
            if hint:
                body += f"\n  Likely mistake: {hint.name}. {hint.explanation}"
            return _fail(check, case, body, hint.name if hint else f"raised {r.get('exc')}",
                         n_visible)
        if status != "ok":
            return _fail(check, case, "its record is malformed", "output missing", n_visible)
        if r.get("mutated"):
            return _fail(
                check, case,
                "your function changed its input in place; work on a copy "
                "(e.g. `x = x - m` instead of `x -= m`)",
                "input changed in place", n_visible,
            )
        if case.kind == "grad":
            problem = _grad_problem(case, r)
            if problem:
                return _fail(check, case, problem, _kind_of(problem), n_visible)
            continue
        out, bad = _decode(r.get("out"))
        problem = bad or _compare(case.expected, out, case)
        if problem is None and case.samples:
            problem = _samples_problem(case, r, out)
        if problem:
            body, diagnosis = problem, _kind_of(problem)
            found = None if bad else _diagnosed_mistake(check, None, case, out, cases, outputs)
            if found:
                m, partial = found
                body += f"\n  Likely mistake: {m.name}. {m.explanation}"
                if partial:
                    body += (" (Your output also has nan where this mistake gives numbers: a "
                             "second bug.)")
                diagnosis = m.name
            elif not bad and _small(case.args) and case.kind == "allclose":
                body += (
                    "\n  input:\n" + _indent(_show(tuple(case.args)))
                    + "\n  expected:\n" + _indent(_show(case.expected))
                    + "\n  got:\n" + _indent(_show(out))
                )
            return _fail(check, case, body, diagnosis, n_visible)
    n_hidden = sum(c.hidden for c in cases)
    extra = f" ({n_hidden} of them hidden)" if n_hidden else ""
    text = f"✔ {head}: all {len(cases)} cases match the reference{extra}."
    timed = getattr(check.post, "trusted", None)
    if timed is not None:
        runs = record.get("timed")
        problem, diagnosis, info = timed.judge(runs if type(runs) is list else [])
        if problem:
            return Verdict(False, f"✘ {head}: every case matches, but {problem}", diagnosis)
        text += f"\n  {info}"
    return Verdict(True, text)


def _samples_problem(case: Case, r: dict, first) -> str | None:
    samples = r.get("samples")
    if type(samples) is not list or len(samples) != len(case.samples):
        return "its results on the other random generators were not recorded"
    values = [first]
    for s in samples:
        if type(s) is not dict or s.get("status") != "ok":
            return "with another random generator it did not return a result"
        out, bad = _decode(s.get("out"))
        problem = bad or _compare(case.expected, out, case)
        if problem:
            return f"with another random generator: {problem}"
        values.append(out)
    return _spread_problem(case, values)
