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
import sys
from collections.abc import Callable
from dataclasses import dataclass

from autograder.checks import _codec, _symptoms
from autograder.checks._core import (
    Case,
    Check,
    _compare,
    _compare_arrays,
    _diagnosed_mistake,
    _exercise_of,
    _grad_mistake,
    _indent,
    _safe_match,
    _show,
    _small,
    _spread_problem,
    cascade_message,
    get_check,
    given_note,
    raised_line,
)
from autograder.checks._core import _fail as _core_fail


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str
    diagnosis: str = ""  # "" when passed; else a catalogued mistake's name or a failure kind


@dataclass(frozen=True)
class Driven:
    """How the grader judges a check whose kernel side is a *driver* (an experiment around the
    student's function that returns plain data, e.g. ``_training_drivers``). A chapter module
    lists them in ``DRIVEN = {key: Driven(...)}``.

    ``args(case)``: the driver's arguments for a case (default: the case's); ``output(case,
    raw)``: from what the driver returned, the output the case's ``expected`` is in the form
    of (it may raise ValueError/TypeError: the student's result is unusable); ``extra``:
    ``(label, args)`` more driver calls recorded for ``post(raw)`` -> ``(diagnosis, problem)``
    or None, judged after every case matched; ``reference``: parts of ``transformer_ref``
    (paths below it, prefixes) whose functions must not run while the student's code runs;
    ``redraw(case, args, out)`` -> ``(diagnosis, problem)`` or None, judged last: each case's
    output against the grader's own computation from the same fresh arguments
    (``case.call()``: 01's measurement re-drawn from the case's own generator).
    """

    args: Callable | None = None
    output: Callable | None = None
    extra: tuple = ()
    post: Callable | None = None
    reference: tuple = ()
    redraw: Callable | None = None


# what a graded kernel's stand-in for a reference implementation raises
# (autograder/grading/autograde/reference.py)
REFERENCE_UNAVAILABLE = "ReferenceUnavailable"


def _driven(check: Check) -> Driven | None:
    module = sys.modules.get(f"autograder.checks.{check.key.split('.')[0]}")
    return getattr(module, "DRIVEN", {}).get(check.key)


def case_inputs(check: Check) -> dict:
    """What the kernel's probe needs for ``check``: every case's inputs, no expected value."""
    cases = []
    driven = _driven(check)
    for case in check.cases:
        args = case.call() if case.call is not None else case.args
        if driven is not None and driven.args is not None:
            args = driven.args(case)
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
        if check.probes and _plain(driven) and case.kind != "grad":
            d["variants"] = _probe_variants(check, case)
        cases.append(d)
    for label, args in driven.extra if driven is not None else ():
        cases.append({"label": label, "kind": "extra", "args": _codec.encode(tuple(args)),
                      "kwargs": _codec.encode({}), "grad_args": []})
    # the probe watches transformer_ref for reference_off, and for a driven check's own list
    watch = bool(check.reference_off) or (driven is not None and bool(driven.reference))
    out = {"key": check.key, "name": check.name, "exercise": check.exercise, "cases": cases,
           "reference_off": watch,  # the probe watches transformer_ref
           "uses": [list(u) for u in check.uses]}
    timed = getattr(check.post, "trusted", None)  # a stage the grader can judge from a record
    if timed is not None:
        out["timed"] = {"args": _codec.encode(tuple(timed.args())), "runs": timed.runs,
                        "enough": float(timed.enough()),
                        **(timed.constants() if hasattr(timed, "constants") else {})}
    return out


def _plain(driven: Driven | None) -> bool:
    """Whether the kernel calls the function on a case's own arguments and the case's output is
    what it returns (no driver between): then the probes' variants can be recorded too."""
    return driven is None or (driven.args is None and driven.output is None)


def _probe_variants(check: Check, case: Case) -> list:
    """The inputs of ``case``'s probe variants (``_metamorphic``) for the kernel to record:
    ``[{"probe": i, "args", "kwargs"}, ...]``; the verdict reads the outputs back
    (:func:`_variant_outputs`)."""
    out = []
    for i, p in enumerate(check.probes):
        try:
            variants = p.variants(case)
        except Exception:  # noqa: BLE001 - a probe that does not apply to this case
            continue
        for args, kwargs in variants:
            out.append({"probe": i, "args": _codec.encode(tuple(args)),
                        "kwargs": _codec.encode(dict(kwargs))})
    return out


def _variant_outputs(check: Check, r: dict) -> Callable:
    """``variants(i)`` for ``_core._diagnosed_mistake``: the recorded outputs of probe i's
    variants (None for one that raised), or None when the record has none for it."""
    recs = r.get("variants")
    given = [v.get("probe") for v in _case_spec(check, r.get("label"))]

    def outs(i):
        if type(recs) is not list or len(recs) != len(given):
            return None
        found = []
        for probe, v in zip(given, recs):
            if probe != i:
                continue
            try:
                ok = type(v) is dict and v.get("status") == "ok"
                found.append(_codec.decode(v.get("out")) if ok else None)
            except Exception:  # noqa: BLE001 - an output the grader cannot read: none
                found.append(None)
        return found or None

    return outs


def _case_spec(check: Check, label) -> list:
    case = next((c for c in check.cases if c.label == label), None)
    return [] if case is None or not check.probes else _probe_variants(check, case)


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
        try:
            cls = type(name, (Exception,), {})
        except (ValueError, TypeError):  # a NUL, a lone surrogate: not a class's name
            return Exception(msg)
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
    except (_codec.CodecError, ValueError, TypeError, KeyError, OverflowError) as e:
        return None, f"its recorded output could not be read ({e})"


def _output(driven: Driven | None, case: Case, enc):
    """(output, problem, exception): the recorded output, through ``driven.output`` if any; an
    exception there is the student's result being unusable (reported like one it raised)."""
    out, bad = _decode(enc)
    if bad or driven is None or driven.output is None:
        return out, bad, None
    try:
        return driven.output(case, out), None, None
    except Exception as e:  # noqa: BLE001 - e.g. a loss that is not a number
        return None, None, e


def _reference_calls(driven: Driven | None, record: dict) -> list[str]:
    """The recorded calls into the parts of transformer_ref ``driven`` rules out.

    >>> _reference_calls(Driven(reference=("transformer_ref/train/",)), {"reference": [
    ...     "transformer_ref/train/data.py:get_batch", "transformer_ref/models.py:forward"]})
    ['transformer_ref/train/data.py:get_batch']
    """
    refs = record.get("reference")
    if driven is None or not driven.reference or type(refs) is not list:
        return []
    return [r for r in refs if type(r) is str and r.startswith(driven.reference)]


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


def _recorded_grad_mistake(check: Check, case: Case, r: dict):
    """``_core._grad_mistake`` on a grad case's record (its output and gradients)."""
    out, bad = _decode(r.get("out"))
    grads = r.get("grads")
    if bad or type(grads) is not list:
        return None
    decoded = []
    for enc in grads:
        g, bad = (None, "none") if enc is None else _decode(enc)
        if bad:
            return None
        decoded.append(g)
    return _grad_mistake(check, case, out, tuple(decoded))


def _said(case: Case, r: dict) -> str:
    """`` (the message)`` of the exception recorded in ``r``; nothing on a hidden case."""
    return "" if case.hidden else f" ({str(r.get('msg'))[:160]})"


def _fail(check: Check, case: Case, body: str, diagnosis: str, n_visible: int) -> Verdict:
    text = str(_core_fail(check, case, body))
    if case.hidden and n_visible:
        text = f"The visible cases pass; the hidden case “{case.label}” fails.\n{text}"
    return Verdict(False, text, diagnosis)


class Malformed(Exception):
    """A record that is not what the probe writes (a value of the wrong type, a name no
    exception has, a number out of range): its key scores 0 as "malformed record"."""


MALFORMED = "malformed record"


def malformed(check: Check, why: str) -> Verdict:
    """The verdict on a record of ``check`` that could not be judged, and why.

    >>> from autograder.checks.attention import _DOT
    >>> malformed(_DOT, "cases is not a list").diagnosis
    'malformed record'
    """
    return Verdict(False, f"✘ {check.exercise} `{check.name}`: the record of what your function "
                   f"returned could not be judged ({why}), so this check scores 0.", MALFORMED)


def judge(check: Check, record: dict | None, cell_error: str = "",
          inputs: dict | None = None) -> Verdict:
    """The verdict on ``check`` (visible and hidden cases) from the kernel's ``record``.

    ``cell_error``: how the test cell ended in the kernel (e.g. "NameError: name 'f' is not
    defined"), used to say why nothing was recorded. ``inputs``: the :func:`case_inputs` the
    grader wrote for the kernel (a timed stage reads its measured constants there). A record
    unlike the probe's is a failing "malformed record" (:class:`Malformed`).

    >>> from autograder.checks.attention import _DOT
    >>> judge(_DOT, {"key": _DOT.key, "cases": {"a": 1}}).diagnosis
    'malformed record'
    """
    if type(record) is dict and record.get("malformed"):  # refused by ``records.parse_record``
        return malformed(check, str(record["malformed"])[:200])
    try:
        return _judge(check, record, cell_error, inputs)
    except Malformed as e:
        return malformed(check, str(e))
    except OverflowError as e:  # a number of the output past float's range (a huge int)
        return malformed(check, f"a number out of range: {e}")


def _judge(check: Check, record: dict | None, cell_error: str, inputs: dict | None) -> Verdict:
    head = f"{check.exercise} `{check.name}`"
    if record is None or type(record) is not dict:
        why = f" (the test cell stopped with {cell_error})" if cell_error else ""
        missing = _undefined_function(check, cell_error)
        if missing:
            return Verdict(
                False,
                f"✘ {head}: no result was recorded: `{missing}` is not defined when the test "
                f"cell runs: define it in the answer cell of {check.exercise}, under that "
                f"name{why}.",
                "output missing",
            )
        return Verdict(
            False,
            f"✘ {head}: no result was recorded: the test cell did not run your function to "
            f"the end{why}.",
            "output missing",
        )
    if record.get("too_large"):
        return Verdict(False, f"✘ {head}: your outputs are too large to grade.", "output too large")
    _check_record(record)
    cascade = _cascade(check, record, cell_error, inputs)
    if cascade is not None:
        return cascade
    # visible cases first, as the in-kernel check runs them (``_core._run``): the first failure
    # reported is the kernel's, and a hidden one fails only after every visible case passed
    cases = sorted(check.cases, key=lambda c: c.hidden)
    recs = {}
    for r in record.get("cases") or []:
        if type(r.get("label")) is str:  # (a case of another label: no result for this one)
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
    driven = _driven(check)
    refs = _reference_calls(driven, record)
    if refs:
        first = next((r for r in refs if ":<" not in r), refs[0])  # a function, not <listcomp>
        return Verdict(
            False,
            f"✘ {head}: the course's reference implementation ran while `{check.name}` was "
            f"checked ({first.split(':')[-1]} in {first.split(':')[0]}): "
            f"{check.exercise} asks you to write it yourself.",
            "used the reference implementation",
        )
    converted, outputs = {}, {}
    for case in cases:
        r = recs.get(case.label)
        if r and r.get("status") == "ok" and case.kind != "grad":
            converted[case.label] = _output(driven, case, r.get("out"))
            outputs[case.label] = converted[case.label][0]
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
        out, bad, exc = converted.get(case.label, (None, None, None))
        if exc is not None:  # the driver's data is not a usable result: as if it raised
            status, r = "raised", {"exc": type(exc).__name__, "msg": str(exc)[:2000]}
        if status == "raised" and r.get("exc") == REFERENCE_UNAVAILABLE:
            return _fail(
                check, case,
                "your function called the course's reference implementation, which the graded "
                f"kernel does not have{_said(case, r)}: {check.exercise} asks you to write it "
                "yourself",
                "used the reference implementation", n_visible)
        if status == "raised":
            exc = _exception(r)
            body = raised_line(case, r.get("exc"), r.get("msg"))
            if r.get("where"):
                body += f"\n  {r['where']}"
            hint = next((h for h in check.error_hints if _safe_match(h, exc)), None)
            hint = hint or _symptoms.diagnose_error(str(r.get("exc")), str(r.get("msg")))
            if hint:
                body += f"\n  Likely mistake: {hint.name}. {hint.explanation}"
            return _fail(check, case, body, hint.name if hint else f"raised {r.get('exc')}",
                         n_visible)
        if status != "ok":
            raise Malformed(f"case “{case.label}” has status {str(status)[:40]!r}")
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
                found = _recorded_grad_mistake(check, case, r)
                if found:
                    return _fail(check, case,
                                 f"{problem}\n  Likely mistake: {found.name}. {found.explanation}",
                                 found.name, n_visible)
                return _fail(check, case, problem, _kind_of(problem), n_visible)
            continue
        problem = bad or _compare(case.expected, out, case)
        if problem is None and case.samples:
            problem = _samples_problem(case, r, out, driven)
        if problem:
            body, diagnosis = problem, _kind_of(problem)
            found = None if bad else _diagnosed_mistake(
                check, None, case, out, cases, outputs,
                _variant_outputs(check, r) if check.probes and _plain(driven) else None)
            if found:
                m, partial = found
                body += f"\n  Likely mistake: {m.name}. {m.explanation}"
                if partial:
                    body += (" (Your output also has nan where this mistake gives numbers: a "
                             "second bug.)")
                diagnosis = m.name
            elif not bad and _small(case.args) and case.kind == "allclose" and not case.hidden:
                body += (
                    "\n  input:\n" + _indent(_show(tuple(case.args)))
                    + "\n  expected:\n" + _indent(_show(case.expected))
                    + "\n  got:\n" + _indent(_show(out))
                )
            return _fail(check, case, body, diagnosis, n_visible)
    if driven is not None and driven.post is not None:
        found = _post_problem(driven, recs)
        if found:
            return Verdict(False, f"✘ {head}: {found[1]}\n  Likely mistake: {found[0]}.",
                           found[0])
    if driven is not None and driven.redraw is not None:
        found = _redraw_problem(driven, cases, recs)
        if found:
            return Verdict(False, f"✘ {head}: {found[1]}\n  Likely mistake: {found[0]}.",
                           found[0])
    n_hidden = sum(c.hidden for c in cases)
    extra = f" ({n_hidden} of them hidden)" if n_hidden else ""
    text = f"✔ {head}: all {len(cases)} cases match the reference{extra}."
    timed = getattr(check.post, "trusted", None)
    if timed is not None:
        runs = record.get("timed")
        given = (inputs or {}).get("timed") if type(inputs) is dict else None
        problem, diagnosis, info = timed.judge(runs if type(runs) is list else [], given) \
            if given is not None else timed.judge(runs if type(runs) is list else [])
        if problem:
            return Verdict(False, f"✘ {head}: every case matches, but {problem}", diagnosis)
        text += f"\n  {info}"
    return Verdict(True, text)


def _undefined_function(check: Check, cell_error: str) -> str | None:
    """The function of ``check``'s exercise that ``cell_error`` says was never defined.

    >>> from autograder.checks.table import check
    >>> _undefined_function(check("01_attention", "softmax"), "NameError: name 'np' is not defined")
    """
    from autograder.checks import table

    try:
        return table.by_key(check.key).undefined(cell_error)
    except KeyError:  # a check the table does not list (a test's own)
        return None


# the string fields of a case's record, each with the most characters the probe writes
# (twice or more: a limit of sanity, not of the probe's exact truncation); a label that is no
# case's (not a string, say) leaves that case without a result: "output missing"
_CASE_TEXT = {"status": 40, "exc": 200, "msg": 10_000, "where": 1_000, "raised_in": 200}


def _check_record(record: dict) -> None:
    """Raise :class:`Malformed` where ``record`` holds a value of a type the probe never
    writes there (the judge may then read every field by its type).

    >>> _check_record({"key": "k", "cases": [{"label": "a", "status": "ok", "out": None}]})
    >>> _check_record({"key": "k", "cases": [{"label": "a", "exc": "A\\x00"}]})
    Traceback (most recent call last):
    ...
    autograder.checks._judge.Malformed: an exception's name 'A\\x00'
    """
    cases = record.get("cases")
    if cases is not None and type(cases) is not list:
        raise Malformed(f"its cases are {_type_name(cases)}, not a list")
    for name in ("ops", "functions", "reference"):
        _strings(record.get(name), name)
    if record.get("uses") is not None and type(record["uses"]) is not dict:
        raise Malformed(f"its uses are {_type_name(record['uses'])}, not a dict")
    if record.get("given") is not None and type(record["given"]) is not dict:
        raise Malformed(f"its given part is {_type_name(record['given'])}, not a dict")
    if record.get("timed") is not None and type(record["timed"]) is not list:
        raise Malformed(f"its timed runs are {_type_name(record['timed'])}, not a list")
    for r in cases or ():
        _check_case(r)
        for s in r.get("samples") or ():
            _check_case(s)


def _check_case(r) -> None:
    """Raise :class:`Malformed` unless ``r`` is a case's record in the probe's form."""
    if type(r) is not dict:
        raise Malformed(f"a case's record is {_type_name(r)}, not a dict")
    for field, longest in _CASE_TEXT.items():
        v = r.get(field)
        if v is not None and (type(v) is not str or len(v) > longest):
            raise Malformed(f"a case's {field} is {_type_name(v)}" if type(v) is not str
                            else f"a case's {field} is {len(v):,} characters long")
    exc = r.get("exc")
    if exc is not None and not _a_name(exc):
        raise Malformed(f"an exception's name {exc[:40]!r}")
    for field in ("mutated", "connected"):
        if r.get(field) is not None and type(r[field]) is not bool:
            raise Malformed(f"a case's {field} is {_type_name(r[field])}, not true or false")
    for field in ("grads", "samples"):
        if r.get(field) is not None and type(r[field]) is not list:
            raise Malformed(f"a case's {field} are {_type_name(r[field])}, not a list")


def _a_name(text: str) -> bool:
    """Whether ``text`` can be an exception class's name (``type()`` takes it).

    >>> _a_name("ValueError"), _a_name("Bad\\x00Name"), _a_name("\\ud800")
    (True, False, False)
    """
    return text.isprintable()  # (not a NUL, a control character or a lone surrogate)


def _strings(values, what: str) -> None:
    """Raise :class:`Malformed` unless ``values`` is None or a list of strings."""
    if values is not None and (type(values) is not list
                               or not all(type(v) is str for v in values)):
        raise Malformed(f"its {what} are not a list of names")


def _type_name(x) -> str:
    """``x``'s JSON kind, for a message.

    >>> _type_name(1.5), _type_name([]), _type_name(None)
    ('a number', 'a list', 'null')
    """
    return {dict: "a dict", list: "a list", str: "a string", bool: "true or false",
            int: "a number", float: "a number"}.get(type(x), "null")


def _post_problem(driven: Driven, recs: dict) -> tuple[str, str] | None:
    """``driven.post`` on the extra calls' records: (diagnosis, problem) or None."""
    raws = []
    for label, _ in driven.extra:
        r = recs.get(label)
        if r is None or r.get("status") not in ("ok", "raised", "not_implemented"):
            return "output missing", f"no result was recorded for “{label}”"
        if r["status"] != "ok":
            return (f"raised {r.get('exc')}",
                    f"{label}: your function raised {r.get('exc')}: {r.get('msg')}")
        out, bad = _decode(r.get("out"))
        if bad:
            return "output missing", f"{label}: {bad}"
        raws.append(out)
    try:
        return driven.post(*raws)
    except Exception as e:  # noqa: BLE001 - a malformed record
        return "output missing", f"its record of “{driven.extra[0][0]}” is malformed ({e})"


def _cascade(check: Check, record: dict, cell_error: str = "",
             inputs: dict | None = None) -> Verdict | None:
    """When the student's function calls earlier exercises' functions (``check.uses``) whose
    recorded results fail those exercises' checks: the verdict on the function judged with
    the given implementations in their place (``record["given"]``, :func:`_probe.run`), so
    that one mistake costs one exercise; without that record, the verdict on its own results
    when they pass, else a failing verdict that names the earlier function. None when no
    earlier function fails."""
    uses = record.get("uses")
    if type(uses) is not dict:
        return None
    failing = []
    for name, key in check.uses:
        u = uses.get(name)
        if type(u) is not dict or u.get("key") != key:
            continue
        upstream = get_check(key)
        v = judge(upstream, {"cases": u.get("cases")})
        if v.diagnosis == MALFORMED:
            raise Malformed(f"in its part on `{name}`, which your function calls")
        # not implemented: the call itself says so; output missing: a recording problem
        if not v.passed and v.diagnosis not in ("not implemented", "output missing"):
            failing.append((name, upstream, v))
    if not failing:
        return None
    given = record.get("given")
    names = given.get("names") if type(given) is dict else None
    if type(names) is list and all(n in names for n, _, _ in failing):
        inner = {k: v for k, v in record.items() if k not in ("uses", "given", "timed")}
        inner.update({k: given[k] for k in ("cases", "ops", "functions", "reference", "timed")
                      if k in given})
        v = _judge(check, inner, cell_error, inputs)
        note = given_note(check, [(n, u) for n, u, _ in failing], v.passed)
        return Verdict(v.passed, f"{note}\n{v.message}", v.diagnosis)
    # no record with the given ones (the kernel found the student's earlier functions give
    # the given ones' results, or an older notebook): right results are right all the same
    own = _judge(check, {k: v for k, v in record.items() if k not in ("uses", "given")},
                 cell_error, inputs)
    if own.passed:
        return own
    name, upstream, v = failing[0]
    message = cascade_message(check, name, upstream, v.message)
    return Verdict(False, message, f"uses failing {name} ({upstream.exercise})")


def _redraw_problem(driven: Driven, cases, recs: dict) -> tuple[str, str] | None:
    """``driven.redraw`` on each case built from fresh arguments (``case.call``), from its
    record (every case matched already)."""
    for case in cases:
        r = recs.get(case.label) or {}
        if case.call is None or r.get("status") != "ok":
            continue
        out, bad = _decode(r.get("out"))
        found = ("output missing", bad) if bad else driven.redraw(case, case.call(), out)
        if found:
            return found
    return None


def _samples_problem(case: Case, r: dict, first, driven: Driven | None = None) -> str | None:
    samples = r.get("samples")
    if type(samples) is not list or len(samples) != len(case.samples):
        return "its results on the other random generators were not recorded"
    values = [first]
    for s in samples:
        if type(s) is not dict or s.get("status") != "ok":
            return "with another random generator it did not return a result"
        out, bad, exc = _output(driven, case, s.get("out"))
        if exc is not None:
            return "with another random generator: " + raised_line(
                case, type(exc).__name__, exc).removeprefix("your function raised ")
        problem = bad or _compare(case.expected, out, case)
        if problem:
            return f"with another random generator: {problem}"
        values.append(out)
    return _spread_problem(case, values)
