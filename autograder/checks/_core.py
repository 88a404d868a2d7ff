"""The machinery behind every check: cases, comparison, diagnosis, the built-in guard.

A *check* runs the student's function on seeded inputs (``Case``), compares each output
with the reference output at an explicit tolerance, and on a mismatch either names a known
mistake (``Mistake``: a wrong implementation whose output equals the student's) or says
where and by how much the output differs. Checks raise :class:`CheckFailed`; a function
that still raises ``NotImplementedError`` gives :class:`NotImplementedYet` instead.

Trust. Student code runs in the same kernel *before* the tests and can patch anything. So:

* everything this module compares with is bound here, at import time, which happens in the
  notebook's locked first cell before any student cell runs (``_isclose = torch.isclose``
  ...): a later ``np.allclose = lambda *a, **k: True`` or ``torch.isclose = ...`` changes
  nothing here;
* in a notebook, expected outputs are computed when the chapter's check module is imported
  (the same locked cell), so patching torch or ``transformer_ref`` later cannot move the
  target (elsewhere, where no student code runs first, on first use: ``_Cases``);
* outputs must be plain ``torch.Tensor`` / ``np.ndarray`` (no subclass can override
  comparisons), inputs are copies (no in-place edits of our data), and comparisons run
  with ``__torch_function__`` disabled (no mode can answer for us);
* hidden tests reach checks through :func:`hidden_check`, a registry filled at import time
  that refuses to be overwritten, not through the public names a student can rebind
  (``autograder.checks.check_softmax = lambda f: None`` only fools the visible check);
* this module refuses attribute assignment once loaded.

Not defended: deliberate tampering with private internals (``module.__dict__``,
``sys.modules``, ``gc``). Only running tests in a separate process from student code
could stop that; the instructor's grader can flag such submissions by their source.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import re
import sys
import threading
import traceback
import types
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from autograder.checks import _symptoms
from autograder.checks._names import calls_name
from autograder.checks._swap import given_function, swapped
from autograder.grading.env import PROBE_DIR as _PROBE_VAR

try:  # absent from a graded kernel whose chapter is judged outside it (see _probe)
    import transformer_ref
except ImportError:  # pragma: no cover - only in that kernel
    transformer_ref = None

__all__ = [
    "CheckFailed",
    "NotImplementedYet",
    "BuildItFromScratch",
    "Case",
    "Mistake",
    "ErrorHint",
    "Check",
    "register",
    "hidden_check",
    "requires",
    "install_notebook_display",
    "undefined_message",
]

# ---------------------------------------------------------------- trusted bindings
# Bound once, at import (the notebook's locked setup cell), before any student code runs.
_Tensor = torch.Tensor
_ndarray = np.ndarray
_isclose = torch.isclose
_all = torch.all
_any = torch.any
_abs = torch.abs
_sub = torch.sub
_argmax = torch.argmax
_logical_not = torch.logical_not
_count_nonzero = torch.count_nonzero
_from_numpy = torch.from_numpy
_as_tensor = torch.as_tensor
_equal = torch.equal
_clone = torch.clone
_t_detach = torch.Tensor.detach
_t_to = torch.Tensor.to
_t_item = torch.Tensor.item
_t_backward = torch.Tensor.backward
_t_requires_grad_ = torch.Tensor.requires_grad_
_t_sum = torch.sum
_mul = torch.mul
_unravel = np.unravel_index
_np_copy = np.array
_np_ascontig = np.ascontiguousarray
_np_errstate = np.errstate
_no_torch_function = torch._C.DisableTorchFunction
_enable_grad = torch.enable_grad
_float64 = torch.float64
_float = float
_isinstance = isinstance
_type = type
_len = len
_Number = (int, float, np.integer, np.floating)
_getprofile = sys.getprofile
_setprofile = sys.setprofile
_REF_DIR = (
    os.path.dirname(os.path.abspath(transformer_ref.__file__)) + os.sep
    if transformer_ref is not None
    else "\0"
)
# Set by course-grade in a graded kernel: hidden checks then only record what the student's
# function returns (``_probe``); the verdict is decided outside the kernel (``_judge``).
_PROBE_DIR = os.environ.get(_PROBE_VAR, "")

# Explicit tolerances per dtype: |got - expected| <= atol + rtol * |expected|.
TOLERANCE = {
    torch.float64: (1e-7, 1e-9),  # (rtol, atol)
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


# ---------------------------------------------------------------- exceptions
class CheckFailed(AssertionError):
    """A check found a problem; the message says which and how to look into it."""


class NotImplementedYet(CheckFailed):
    """The exercise still raises ``NotImplementedError``."""


class BuildItFromScratch(RuntimeError):
    """Raised by a PyTorch built-in that the current exercise asks you to write yourself."""


# ---------------------------------------------------------------- data
@dataclass(frozen=True)
class Case:
    """One call of the student's function and the answer it must give.

    ``kind``: ``"allclose"`` (tensors/arrays, or tuples of them, at the dtype's tolerance),
    ``"scalar"`` (a number within ``atol``), ``"exact"`` (plain Python values — int, str,
    bytes, lists/tuples, dicts — equal exactly), ``"statistic"`` (a measured number within
    ``rtol * |target| + atol`` of ``target`` that is not exactly ``target``: a measurement,
    not a formula), ``"grad"`` (the output and the gradients of ``sum(output * probe)``
    with respect to ``grad_args``). ``call`` optionally builds fresh arguments (e.g. a
    seeded random generator) in place of ``args``.

    A statistic may also list ``samples``: more argument builders (other seeds). The
    function's result on each must pass too, and the results together must spread at least
    like a sample of the right distribution (standard deviation ``spread``): a formula that
    returns a near-miss of the target (``d_k * 1.001``) gives the same number every time.
    """

    label: str
    args: tuple
    expected: Any
    kwargs: dict = field(default_factory=dict)
    hidden: bool = False
    kind: str = "allclose"
    rtol: float | None = None
    atol: float | None = None
    call: Callable | None = None
    grad_args: tuple = ()
    probe: Any = None
    samples: tuple = ()
    spread: float | None = None


@dataclass(frozen=True)
class Mistake:
    """A known wrong implementation. ``fn`` takes the same arguments as the exercise.

    ``grad``: the mistake is in the gradients (its outputs are right, e.g. a ``nan_to_num``
    patch over a nan forward pass): on a ``"grad"`` case whose outputs match, its gradients
    of ``sum(output * probe)`` are compared with the student's (:func:`_grad_mistake`).
    """

    name: str
    explanation: str
    fn: Callable
    grad: bool = False


@dataclass(frozen=True)
class ErrorHint:
    """A known exception: ``matches(exc)`` -> explanation shown with the error."""

    name: str
    explanation: str
    matches: Callable[[BaseException], bool]


# ---------------------------------------------------------------- cases built on first use
class _Pending:
    """A check's cases not built yet: ``build()`` returns them."""

    __slots__ = ("build",)

    def __init__(self, build: Callable):
        self.build = build


_BUILD_LOCK = threading.RLock()  # one build at a time (a build reseeds the global RNG)
_get_default_dtype, _set_default_dtype = torch.get_default_dtype, torch.set_default_dtype
_fork_rng = torch.random.fork_rng
_inference_mode = torch.inference_mode
_len_modes = torch._C._len_torch_function_stack
_pop_mode, _push_mode = torch.overrides._pop_mode, torch.overrides._push_mode
_np_get_state, _np_set_state = np.random.get_state, np.random.set_state
_py_getstate, _py_setstate = random.getstate, random.setstate


@contextlib.contextmanager
def _as_at_import():
    """The state a check module's import computed its cases in, whatever the caller set: no
    ``TorchFunctionMode`` (a check's guard, a default device), float32 by default, autograd
    on; the caller's random states (torch, numpy, ``random``) are kept as they were."""
    modes = [_pop_mode() for _ in range(_len_modes())]
    dtype = _get_default_dtype()
    np_state, py_state = _np_get_state(), _py_getstate()
    try:
        _set_default_dtype(torch.float32)
        with _fork_rng(devices=[]), _inference_mode(False), _enable_grad():
            yield
    finally:
        _np_set_state(np_state)
        _py_setstate(py_state)
        _set_default_dtype(dtype)
        for mode in reversed(modes):
            _push_mode(mode)


class _Cases:
    """``Check.cases``: given a tuple, that tuple; given a function, the tuple it returns,
    built on the first read (in :func:`_as_at_import`'s state) and kept.

    A chapter's expected values cost seconds (chapter 08 trains tiny GPTs): built on first use,
    only a process that reads them pays, once. A notebook builds them at registration, in the
    locked setup cell (see Trust above); :func:`build_cases` builds them all at once (the
    grader's warm process, before it forks). A case must not depend on another check's build
    (each seeds what it draws), so the order of the builds does not matter.

    >>> calls = []
    >>> c = Check("doc.lazy", "Exercise 0.0", "f",
    ...           cases=lambda: calls.append(1) or (Case("one", (1,), 1, kind="exact"),))
    >>> calls
    []
    >>> [case.label for case in c.cases], [case.label for case in c.cases], calls
    (['one'], ['one'], [1])
    """

    def __get__(self, check, owner=None):
        if check is None:
            raise AttributeError("cases")  # no class-level default: a required field
        value = check.__dict__["_cases"]
        if _type(value) is _Pending:
            with _BUILD_LOCK:
                value = check.__dict__["_cases"]
                if _type(value) is _Pending:
                    with _as_at_import():
                        built = tuple(value.build())
                    check.__dict__["_cases_build"] = value.build  # for fresh_cases
                    check.__dict__["_cases"] = value = built
        return value

    def __set__(self, check, value):
        if "_cases" in check.__dict__:
            raise FrozenInstanceError("cannot assign to field 'cases'")
        check.__dict__["_cases"] = _Pending(value) if callable(value) else value


def fresh_cases(check: Check) -> tuple | None:
    """``check``'s cases built again by the function it was given, in the import state, and
    not kept (None: it was given a tuple). The tests compare them with ``check.cases``."""
    value = check.__dict__["_cases"]
    build = value.build if _type(value) is _Pending else check.__dict__.get("_cases_build")
    if build is None:
        return None
    with _BUILD_LOCK, _as_at_import():
        return tuple(build())


@dataclass(frozen=True)
class Check:
    """Everything one exercise's check needs, fixed at import time (``cases``: a tuple of
    :class:`Case`, or a function returning them, called once on first use: :class:`_Cases`)."""

    key: str  # registry key, e.g. "attention.softmax"
    exercise: str  # "Exercise 2.1"
    name: str  # the student's function name
    cases: tuple = _Cases()
    mistakes: tuple = ()
    error_hints: tuple = ()
    forbidden: tuple = ()  # names of torch functions switched off while the check runs
    forbidden_hint: str = ""
    reference_off: bool = False  # calling into transformer_ref fails while the check runs
    # optional extra stage run after every case matched: post(fn, hidden) -> problem or None
    # (e.g. a speed measurement); it may print what it measured
    post: Callable | None = None
    # earlier exercises the solution calls: ((function name, check key), ...). When the
    # student's function calls its own `name`, that function's check runs first (cascade).
    uses: tuple = ()
    # how a failure message shows a case's call when the check runs the student's function
    # inside an experiment (a probe): call_text(case) -> "train_step(model, ...) 3 times ..."
    call_text: Callable | None = None
    # metamorphic probes (``_metamorphic``): after a failing case that no catalogued mistake
    # reproduces, the function on inputs derived from the case; they name, never judge
    probes: tuple = ()


# ---------------------------------------------------------------- the built-in guard
class _Forbid(TorchFunctionMode):
    """While active, any torch function whose ``__name__`` is forbidden raises.

    A ``TorchFunctionMode`` sees every torch call however it was reached
    (``F.softmax``, ``torch.softmax``, ``x.softmax``, an alias imported earlier).
    """

    def __init__(self, check: Check):
        super().__init__()
        self.check = check

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.check.forbidden:
            raise BuildItFromScratch(
                f"{self.check.exercise} asks you to build `{self.check.name}` from scratch, "
                f"so the PyTorch built-in `{name}` is switched off while this check runs. "
                f"{self.check.forbidden_hint}"
            )
        return func(*args, **(kwargs or {}))


# ---------------------------------------------------------------- helpers
def _copy(x):
    """A private copy of an argument, so the student cannot edit our inputs."""
    if _type(x) is _Tensor:
        return _t_detach(_clone(x))
    if _type(x) is _ndarray:
        return _np_copy(x, copy=True)
    if _type(x) is tuple:
        return tuple(_copy(a) for a in x)
    return x


def _same(a, b) -> bool:
    """Equality of two arguments, NaN == NaN (to detect in-place edits)."""
    if _type(a) is _ndarray:
        a, b = _from_numpy(a), _from_numpy(b) if _type(b) is _ndarray else b
    if _type(a) is not _Tensor:
        return True
    if _type(b) is not _Tensor or a.shape != b.shape or a.dtype != b.dtype:
        return False
    with _no_torch_function():
        if a.is_floating_point():
            return bool(_t_item(_all(_isclose(a, b, rtol=0.0, atol=0.0, equal_nan=True))))
        return bool(_equal(a, b))


def _as_float64(x) -> torch.Tensor:
    if _type(x) is _ndarray:
        x = _from_numpy(_np_ascontig(x))
    return _t_to(_t_detach(x), _float64)


def _dtype_name(x) -> str:
    return str(x.dtype).replace("torch.", "")


def _tol(x, case: Case):
    dtype = x.dtype if _type(x) is _Tensor else _as_tensor(np.zeros(0, dtype=x.dtype)).dtype
    rtol, atol = TOLERANCE.get(dtype, TOLERANCE[torch.float64])
    rtol = case.rtol if case.rtol is not None else rtol
    atol = case.atol if case.atol is not None else atol
    return rtol, atol


def _fmt_shape(x) -> str:
    return "(" + ", ".join(str(int(s)) for s in x.shape) + ")"


def _kind_name(x) -> str:
    if _type(x) is _Tensor:
        return "a torch.Tensor"
    if _type(x) is _ndarray:
        return "a numpy array"
    return f"a {_type(x).__name__}"


def _input_dtype(args) -> str | None:
    """The dtype's name of the first tensor or array among ``args`` (nested too), else None.

    >>> _input_dtype((3, (torch.zeros(2, dtype=torch.int64),), torch.zeros(1)))
    'int64'
    """
    for a in args if _type(args) in (tuple, list) else ():
        if _type(a) in (_Tensor, _ndarray):
            return _dtype_name(a)
        if _type(a) in (tuple, list):
            found = _input_dtype(a)
            if found is not None:
                return found
    return None


def _compare_arrays(expected, got, case: Case, what: str = "the output") -> str | None:
    """None if ``got`` matches ``expected`` (type, shape, dtype, values); else a description."""
    want = _type(expected)
    if _type(got) is not want:
        return f"{what} should be {_kind_name(expected)} but is {_kind_name(got)}" + (
            " (a subclass is not accepted)" if _isinstance(got, want) else ""
        )
    if tuple(got.shape) != tuple(expected.shape):
        return f"{what} has shape {_fmt_shape(got)}, expected {_fmt_shape(expected)}"
    if got.dtype != expected.dtype:
        if _input_dtype(case.args) == _dtype_name(expected):
            return (
                f"{what} has dtype {_dtype_name(got)} for {_dtype_name(expected)} inputs "
                f"(keep the input's dtype)"
            )
        return (
            f"{what} has dtype {_dtype_name(got)}; the exercise asks for "
            f"{_dtype_name(expected)}"
        )
    rtol, atol = _tol(expected, case)
    with _no_torch_function():
        e, g = _as_float64(expected), _as_float64(got)
        ok = _isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        if _t_item(_all(ok)):
            return None
        bad = _logical_not(ok)
        n_bad = int(_t_item(_count_nonzero(bad)))
        diff = _abs(_sub(g, e))
        diff = torch.where(bad, torch.nan_to_num(diff, nan=math.inf), torch.zeros_like(diff))
        flat = int(_t_item(_argmax(torch.nan_to_num(diff, posinf=1e308))))
        idx = tuple(int(i) for i in _unravel(flat, tuple(e.shape))) if e.dim() else ()
        ev, gv = _t_item(e[idx]), _t_item(g[idx])
    where = f"at index {idx}" if idx else ""
    values = "" if case.hidden else f": expected {ev:.6g}, got {gv:.6g}"  # a hidden case's
    return (  # data never reaches a page (issue 47)
        f"{what} differs {where}{values} "
        f"({n_bad} of {e.numel()} entries outside rtol={rtol:g}, atol={atol:g})"
    )


_dict_items = dict.items
_EXACT_SCALARS = (int, str, bytes, bool, float, type(None))


def _short_repr(x, limit: int = 60) -> str:
    r = repr(x)
    return r if _len(r) <= limit else r[: limit - 1] + "…"


def _compare_exact(expected, got, what: str = "the result") -> str | None:
    """None if plain value ``got`` equals ``expected`` exactly; else where they first differ.

    Containers are read through the built-in ``dict``/``list`` machinery (a subclass cannot
    answer for itself); ``Counter``/``defaultdict`` count as dicts and lists and tuples as
    each other. Scalars must have exactly the expected type (``True`` is not ``1``).

    >>> _compare_exact({(1, 2): 3}, {(1, 2): 2, (2, 2): 1})
    'the result has an unexpected key (2, 2) (1 more than expected)'
    >>> _compare_exact([b"ab", b"c"], [b"ab", b"d"])
    "item 1 of the result is b'd', expected b'c'"
    """
    te = _type(expected)
    if te is dict:
        if not _isinstance(got, dict):
            return f"{what} should be a dict, got {_kind_name(got)}"
        g = dict(_dict_items(got))
        extra = [k for k in g if k not in expected]
        missing = [k for k in expected if k not in g]
        if missing:
            return (
                f"{what} lacks the key {_short_repr(missing[0])} "
                f"({_len(missing)} of {_len(expected)} keys missing)"
            )
        if extra:
            return (
                f"{what} has an unexpected key {_short_repr(extra[0])} "
                f"({_len(extra)} more than expected)"
            )
        for k, v in _dict_items(expected):
            problem = _compare_exact(v, g[k], f"{what}[{_short_repr(k)}]")
            if problem:
                return problem
        return None
    if te in (list, tuple):
        if not _isinstance(got, (list, tuple)):
            return f"{what} should be a {te.__name__}, got {_kind_name(got)}"
        g = [*list.__iter__(got)] if _isinstance(got, list) else [*tuple.__iter__(got)]
        for i in range(min(_len(g), _len(expected))):
            problem = _compare_exact(expected[i], g[i], f"item {i} of {what}")
            if problem:
                if _type(expected[i]) in _EXACT_SCALARS and _type(g[i]) is _type(expected[i]):
                    return f"item {i} of {what} is {_short_repr(g[i])}, expected " + (
                        _short_repr(expected[i])
                    )
                return problem
        if _len(g) != _len(expected):
            nxt = (
                f"; the first extra item is {_short_repr(g[_len(expected)])}"
                if _len(g) > _len(expected)
                else f"; the first missing item is {_short_repr(expected[_len(g)])}"
            )
            return f"{what} has {_len(g)} items, expected {_len(expected)}{nxt}"
        return None
    if _type(got) is not te:
        return f"{what} should be a {te.__name__}, got {_kind_name(got)}: {_short_repr(got)}"
    if got != expected:
        return f"{what} is {_short_repr(got)}, expected {_short_repr(expected)}"
    return None


def _compare(expected, got, case: Case, strict: bool = True) -> str | None:
    """Compare a whole result: arrays, tuples of arrays, or numbers (per ``case.kind``).

    ``strict=False`` drops the "a measurement is not exactly the formula" rule (used when
    comparing with a catalogued mistake rather than with the right answer).
    """
    if case.kind == "exact":
        problem = _compare_exact(expected, got)
        if problem and case.hidden:  # its data never reaches a page (issue 47)
            return "the result differs from the expected one (a hidden case: its data is not shown)"
        return problem
    if case.kind in ("scalar", "statistic"):
        if _type(got) is _Tensor and got.dim() == 0:
            got = _t_item(got)
        if _type(got) is _ndarray and got.ndim == 0:
            got = got.item()
        if not _isinstance(got, _Number) or _isinstance(got, bool):
            return f"the result should be a number, got {_kind_name(got)}"
        got, target = _float(got), _float(expected)
        atol = case.atol if case.atol is not None else 1e-9
        rtol = case.rtol if case.rtol is not None else 0.0
        if not math.isfinite(got) or abs(got - target) > atol + rtol * abs(target):
            if case.hidden:  # neither its expected value nor what the function made of it
                return "the result is outside the tolerance of the hidden case's expected value"
            want = f"expected {target:.6g} (tolerance {atol + rtol * abs(target):.3g})"
            return f"the result is {got:.6g}, {want}"
        if strict and case.kind == "statistic" and got == target and case.hidden:
            return ("the result is exactly the formula's value: this is a measurement from "
                    "random samples, so it should be close to, not exactly, the formula")
        if strict and case.kind == "statistic" and got == target:
            return (
                f"the result is exactly {target:g}: this is a measurement from random samples, "
                "so it should be close to, not exactly, the formula"
            )
        return None
    if _type(expected) is tuple:
        if _type(got) not in (tuple, list) or _len(got) != _len(expected):
            return f"the result should be a tuple of {_len(expected)} items, got {_kind_name(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            problem = _compare_arrays(e, g, case, what=f"item {i} of the result")
            if problem:
                return problem
        return None
    return _compare_arrays(expected, got, case)


def _describe(x) -> str:
    if _type(x) in (_Tensor, _ndarray):
        return f"{_fmt_shape(x)} {_dtype_name(x)}"
    if _type(x) is tuple:
        return "(" + ", ".join(_describe(a) for a in x) + ")"
    r = repr(x)
    if _len(r) > 120:  # a training text or a big dict: say what it is, not all of it
        size = f" of length {_len(x)}" if hasattr(x, "__len__") else ""
        r = f"{r[:50]}… ({_type(x).__name__}{size})"
    return r


def _small(x) -> bool:
    """Small enough to print in a failure message."""
    if _type(x) in (_Tensor, _ndarray):
        return x.ndim <= 2 and int(np.prod(x.shape)) <= 16
    if _type(x) is tuple:
        return all(_small(a) for a in x)
    return True


def _show(x) -> str:
    if _type(x) is _Tensor:
        x = _t_detach(x).numpy()
    if _type(x) is _ndarray:
        return np.array2string(x, precision=4, suppress_small=True)
    if _type(x) is tuple:
        return "\n".join(_show(a) for a in x)
    return repr(x)


def _signature(check: Check, case: Case) -> str:
    parts = [_describe(a) for a in case.args]
    parts += [f"{k}={_describe(v)}" for k, v in case.kwargs.items()]
    return f"{check.name}({', '.join(parts)})"


def _user_frame(tb) -> str:
    """'in `f`, line N: source' for the innermost frame outside the libraries, if any."""
    for fr in reversed(traceback.extract_tb(tb)):
        f = fr.filename
        if "site-packages" in f or "/autograder/" in f or "/transformer_ref/" in f:
            continue
        return f"in `{fr.name}`, line {fr.lineno}: {(fr.line or '').strip()}"
    return ""


def _raised_in(tb) -> str:
    frames = traceback.extract_tb(tb)
    return frames[-1].name if frames else ""


def _call(check: Check, fn, case: Case):
    """Call the student's function on private copies of the inputs, guard on."""
    args = _copy(case.call() if case.call is not None else case.args)
    kwargs = {k: _copy(v) for k, v in case.kwargs.items()}
    if case.kind == "grad":
        args = tuple(_t_requires_grad_(a) if i in case.grad_args else a for i, a in enumerate(args))
    with _Forbid(check), _enable_grad(), _reference_off(check):
        out = fn(*args, **kwargs)
    return args, out


@contextlib.contextmanager
def _reference_off(check: Check):
    """Make any call into the course's reference package raise (a profile hook)."""
    if not check.reference_off:
        yield
        return

    def watch(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(_REF_DIR):
            raise BuildItFromScratch(
                f"{check.exercise} asks you to write `{check.name}` yourself, so the course's "
                "reference implementation (transformer_ref) is switched off while this check runs."
            )

    previous = _getprofile()
    _setprofile(watch)
    try:
        yield
    finally:
        _setprofile(previous)


def _check_grad(check: Check, case: Case, args, out) -> str | None:
    """Gradients of sum(out * probe) w.r.t. the inputs in ``case.grad_args``."""
    expected_out, expected_grads = case.expected
    if _type(out) in (tuple, list) and _len(out) > 0:
        out = out[0]  # functions returning (output, weights): the probe is on the output
    problem = _compare_arrays(expected_out, out, case)
    if problem:
        return problem
    if not out.requires_grad:
        return (
            "the output is not connected to the inputs' autograd graph "
            "(no gradient flows back: avoid .detach(), .numpy() and torch.no_grad())"
        )
    with _Forbid(check):
        _t_backward(_t_sum(_mul(out, case.probe)))
    for i, want in zip(case.grad_args, expected_grads):
        got = args[i].grad
        if got is None:
            return f"no gradient reaches input {i + 1}"
        problem = _compare_arrays(want, got, case, what=f"the gradient for input {i + 1}")
        if problem:
            return problem
    return None


# (id(mistake), id(case), default dtype) -> (mistake, case, its output): see _mistake_output
_MISTAKE_OUTPUTS: dict = {}


def _mistake_output(m: Mistake, case: Case):
    """What catalogued mistake ``m`` returns on ``case`` (on copies of its inputs, autograd
    off), computed once per process: a mistake is a function of the case's inputs, and a
    case is built once and frozen, so every diagnosis that holds ``m`` against ``case`` (the
    failing case, then the others when several mistakes fit) reads the same output. It is
    only read (compared, or nan-filled into a new array); a mistake that raises is not kept."""
    key = (id(m), id(case), _get_default_dtype())
    hit = _MISTAKE_OUTPUTS.get(key)
    if hit is not None:
        return hit[2]
    args = case.call() if case.call is not None else case.args
    with _np_errstate(all="ignore"), torch.no_grad():
        out = m.fn(*_copy(args), **{k: _copy(v) for k, v in case.kwargs.items()})
    _MISTAKE_OUTPUTS[key] = (m, case, out)  # holding both: their ids are not reused
    return out


def _mistake_grads(m: Mistake, case: Case) -> tuple:
    """The gradients of ``sum(m.fn(...) * case.probe)`` w.r.t. ``case.grad_args`` (a grad case)."""
    args = case.call() if case.call is not None else case.args
    leaves = tuple(_t_requires_grad_(_copy(a)) if i in case.grad_args else _copy(a)
                   for i, a in enumerate(args))
    with _np_errstate(all="ignore"), _enable_grad():
        out = m.fn(*leaves, **{k: _copy(v) for k, v in case.kwargs.items()})
        if _type(out) in (tuple, list) and _len(out) > 0:
            out = out[0]
        _t_backward(_t_sum(_mul(out, case.probe)))
    return tuple(leaves[i].grad for i in case.grad_args)


def _grad_mistake(check: Check, case: Case, out, got_grads):
    """On grad case ``case``: the catalogued gradient mistake (``Mistake.grad``) whose
    gradients equal the student's ``got_grads``, when the student's output ``out`` is right
    (a wrong output is the other mistakes' to name); else the general symptom of the
    gradients (``_symptoms.diagnose_grads``: one cut from the graph), else None."""
    if case.kind != "grad":
        return None
    if _type(out) in (tuple, list) and _len(out) > 0:
        out = out[0]
    expected_out, expected = case.expected
    if _compare_arrays(expected_out, out, case) is not None:
        return None
    if _len(got_grads) != _len(expected) or any(_type(g) is not _Tensor for g in got_grads):
        return _symptoms.diagnose_grads(expected, got_grads)
    for m in check.mistakes:
        if not m.grad:
            continue
        try:
            grads = _mistake_grads(m, case)
        except Exception:  # the mistake cannot run on this case
            continue
        if any(_type(g) is not _Tensor for g in grads):
            continue
        if all(_compare_arrays(e, g, case) is None for e, g in zip(expected, grads)):
            continue  # indistinguishable from the right answer on this case
        if all(_compare_arrays(w, g, case) is None for w, g in zip(grads, got_grads)):
            return m
    return _symptoms.diagnose_grads(expected, got_grads)


def _diagnose(check: Check, fn, case: Case, got, cases: list, outputs=None) -> str:
    """Name the catalogued mistake that reproduces ``got`` on this case, if any.

    When several mistakes reproduce it (a nan row can come from two bugs), the one that
    also agrees with the student's function on the most other cases wins. ``outputs``
    ({case label: output}, the grader's records) stands in for calling ``fn`` again.
    """
    name = _diagnosed_mistake(check, fn, case, got, cases, outputs)
    if name is None:
        return ""
    best, partial = name
    text = f"Likely mistake: {best.name}. {best.explanation}"
    if partial:
        text += " (Your output also has nan where this mistake gives numbers: a second bug.)"
    return text


def _diagnosed_mistake(check: Check, fn, case: Case, got, cases: list, outputs=None,
                       variants=None):
    """(the Mistake, whether only where got is not nan) or None; see :func:`_diagnose`.

    When no catalogued mistake reproduces ``got``: the check's probes (``_metamorphic``: ``fn``
    on inputs derived from the case, or ``variants(i)``, the recorded outputs of probe i's
    variants), then the general symptoms."""
    if case.kind == "grad":
        return None
    candidates = []
    for m in check.mistakes:
        try:
            wrong = _mistake_output(m, case)
        except Exception:  # the mistake needs other shapes than this case has
            continue
        if _compare(case.expected, wrong, case) is None:
            continue  # indistinguishable from the right answer on this case
        if _compare(wrong, got, case, strict=False) is None:
            candidates.append(m)
    partial = False
    if not candidates:
        # Two bugs at once (e.g. an inverted mask *and* nan for fully masked rows): accept a
        # mistake that agrees with the student wherever the student's output is not nan.
        for m in check.mistakes:
            try:
                wrong = _mistake_output(m, case)
            except Exception:
                continue
            filled = _fill_nan(got, wrong)
            if filled is None or _compare(case.expected, wrong, case) is None:
                continue
            if _compare(wrong, filled, case, strict=False) is None:
                candidates.append(m)
        partial = True
    if not candidates and check.probes and _probe_ready(case, got):
        found = _probe_finding(check, fn, case, got, variants)
        if found is not None:
            return found, False
    if not candidates:  # no catalogued mistake: a general symptom (transposed, scaled, ...)
        symptom = _symptoms.diagnose(case.expected, got, case.kind)
        return None if symptom is None else (symptom, False)
    best = candidates[0]
    if _len(candidates) > 1:
        others = [c for c in cases if c is not case and c.kind != "grad"]
        if outputs is not None:
            outs = [outputs.get(c.label) for c in others]
        else:
            outs = []
            for c in others:
                try:
                    outs.append(_call(check, fn, c)[1])
                except Exception:
                    outs.append(None)
        scores = []
        for m in candidates:
            agree = 0
            for c, out in zip(others, outs):
                try:
                    agree += (
                        out is not None
                        and _compare(_mistake_output(m, c), out, c, strict=False) is None
                    )
                except Exception:
                    pass
            scores.append(agree)
        best = candidates[scores.index(max(scores))]
    return best, partial


def _probe_ready(case: Case, got) -> bool:
    """Whether probes may speak: an array output of the expected type, shape and dtype (a
    type, shape or dtype message names what the text states; a guess after it would mislead)."""
    e = case.expected
    if _type(e) not in (_Tensor, _ndarray):
        return True
    return _type(got) is _type(e) and tuple(got.shape) == tuple(e.shape) and got.dtype == e.dtype


def _probe_finding(check: Check, fn, case: Case, got, variants=None):
    """The first of ``check.probes`` that names ``got`` (a ``_metamorphic.Finding``) or None."""
    from autograder.checks import _metamorphic  # only a check with probes (none in a kit)

    def call(args, kwargs):
        try:
            with contextlib.redirect_stdout(_Sink()):
                return _call(check, fn, _metamorphic.variant_case(case, args, kwargs))[1]
        except Exception:  # noqa: BLE001 - a variant the function cannot take: no output
            return None

    return _metamorphic.find(check.probes, case, got, call if callable(fn) else None,
                             variants)


def _fill_nan(got, wrong):
    """``got`` with its nan entries taken from ``wrong``; None if not comparable or no nan."""
    if _type(got) in (tuple, list) and _type(wrong) in (tuple, list) and _len(got) == _len(wrong):
        parts = [_fill_nan(g, w) for g, w in zip(got, wrong)]
        if all(p is None for p in parts):
            return None
        return tuple(g if p is None else p for g, p, w in zip(got, parts, wrong))
    if _type(got) is not _type(wrong) or _type(got) not in (_Tensor, _ndarray):
        return None
    if tuple(got.shape) != tuple(wrong.shape) or got.dtype != wrong.dtype:
        return None
    with _no_torch_function():
        g, w = _as_float64(got), _as_float64(wrong)
        nan = torch.isnan(g)
        if not _t_item(_any(nan)) or _t_item(_all(nan)):
            return None
        filled = torch.where(nan, w, g)
    if _type(got) is _ndarray:
        return filled.numpy().astype(got.dtype)
    return _t_to(filled, got.dtype)


def _call_line(check: Check, case: Case) -> str:
    """The call a failure message shows; of a hidden case, the arguments' types and shapes
    only (its data never reaches a page)."""
    if case.hidden:
        return f"{check.name}({', '.join(_kind_of_arg(a) for a in case.args)})"
    return check.call_text(case) if check.call_text is not None else _signature(check, case)


def _kind_of_arg(x) -> str:
    """An argument as a hidden case's call line shows it: an array's shape and dtype, else its
    type's name."""
    return _describe(x) if _type(x) in (_Tensor, _ndarray) else _type(x).__name__


def raised_line(case: Case, name: str, message) -> str:
    """What a failure says the student's function raised: on a hidden case its type only, as
    its message may hold the case's data (issue 47: a function can raise its arguments).

    >>> raised_line(Case("v", (), None), "KeyError", KeyError("x"))
    "your function raised KeyError: 'x'"
    >>> raised_line(Case("h", (), None, hidden=True), "KeyError", KeyError("x"))
    'your function raised KeyError (a hidden case: its message is not shown)'
    """
    if case.hidden:
        return f"your function raised {name} (a hidden case: its message is not shown)"
    return f"your function raised {name}: {message}"


def _fail(check: Check, case: Case, body: str) -> CheckFailed:
    head = f"{check.exercise} `{check.name}` fails on {case.label}:"
    return CheckFailed(f"{head}\n  {body}\n  call: {_call_line(check, case)}")


def _fail_in_run(check: Check, case: Case, n_visible: int, body: str) -> CheckFailed:
    """``_fail``, saying plainly when the visible cases passed and a hidden one fails (the
    visible check's "✔ all N cases match" is then right above this message)."""
    if not (case.hidden and n_visible):
        return _fail(check, case, body)
    head = (
        f"{check.exercise} `{check.name}`: the visible cases pass; "
        f"a hidden case fails: {case.label}:"
    )
    return CheckFailed(f"{head}\n  {body}\n  call: {_call_line(check, case)}")


# ---------------------------------------------------------------- cascades
def cascade_message(check: Check, name: str, upstream: Check, failure: str) -> str:
    """What a check says when the student's function calls an earlier one that fails."""
    return (
        f"{check.exercise} `{check.name}` uses your `{name}` ({upstream.exercise}), which "
        f"fails its check: fix {upstream.exercise} first, then run this check again.\n"
        + _indent(failure.strip(), "  | ")
    )


def given_note(check: Check, failing: list, passed: bool) -> str:
    """What a check says when it judged the student's function with the given
    implementations of the earlier functions it calls (``failing``: [(name, its Check)]),
    because the student's fail their own checks."""
    yours = " and ".join(f"`{n}` ({u.exercise})" for n, u in failing)
    them = " and ".join(f"`{n}`" for n, _ in failing)
    head = (f"{check.exercise} `{check.name}` uses your {yours}, which "
            f"{'fails its' if len(failing) == 1 else 'fail their'} check: it was judged with "
            f"the given {them} in {'its' if len(failing) == 1 else 'their'} place")
    if passed:
        return (f"{head}, and passes (that mistake costs only "
                f"{' and '.join(u.exercise for _, u in failing)}'s points).")
    return f"{head}, and still fails:"


def _upstream_failure(check: Check, fn, hidden: bool) -> str | None:
    """The cascade message if ``fn`` calls one of ``check.uses`` whose check fails."""
    fn = getattr(fn, "student", fn)  # 08: a probe runs the student's function
    for name, key in check.uses:
        if not calls_name(fn, name):
            continue
        earlier = getattr(fn, "__globals__", {}).get(name)
        if not callable(earlier):
            continue
        upstream = get_check(key)
        try:
            with contextlib.redirect_stdout(_Sink()):
                _run(upstream, earlier, hidden=hidden)
        except NotImplementedYet:  # the call itself will say "finish ... first"
            continue
        except CheckFailed as e:
            return cascade_message(check, name, upstream, str(e))
    return None


def _failing_uses(check: Check, fn, hidden: bool) -> list:
    """[(name, Check)] of the earlier functions ``fn`` calls whose checks fail."""
    fn = getattr(fn, "student", fn)
    found = []
    for name, key in check.uses:
        earlier = getattr(fn, "__globals__", {}).get(name)
        if not (calls_name(fn, name) and callable(earlier)):
            continue
        try:
            with contextlib.redirect_stdout(_Sink()):
                _run(get_check(key), earlier, hidden=hidden)
        except NotImplementedYet:
            continue
        except CheckFailed:
            found.append((name, get_check(key)))
    return found


def _with_given(fn, sources: dict):
    """``fn``'s earlier functions replaced by the given ones (``sources``: {name: code})
    while the block runs."""
    return swapped(fn, {n: given_function(fn, n, src) for n, src in sources.items()})


class _Sink:
    def write(self, s):
        return len(s)

    def flush(self):
        pass


class _Kept(_Sink):
    def __init__(self):
        self.parts = []

    def write(self, s):
        self.parts.append(s)
        return len(s)


# ---------------------------------------------------------------- running a check
def _run(
    check: Check, fn, hidden: bool = False, cascade: bool = True, diagnose: bool = True
) -> None:
    # diagnose=False: a failing case's message says what differs but no catalogued mistake is
    # looked for (the verdict is the same; for callers that need only it: the mutation test)
    __tracebackhide__ = True  # noqa: F841  (IPython hides this frame)
    if not callable(fn):
        raise CheckFailed(f"{check.exercise}: pass your function `{check.name}` to the check")
    cascade = _upstream_failure(check, fn, hidden) if check.uses and cascade else None
    if cascade:
        if not hidden:  # the graded path judges with the given function (README)
            cascade += (f"\n(When graded, `{check.name}` is judged with the given earlier "
                        "function in place of yours, so a mistake there costs only its own "
                        "exercise's points.)")
        raise CheckFailed(cascade)
    # visible cases first: a hidden case that fails comes after all of them passed
    cases = sorted((c for c in check.cases if hidden or not c.hidden), key=lambda c: c.hidden)
    n_visible = sum(not c.hidden for c in cases)
    for case in cases:
        try:
            args, out = _call(check, fn, case)
        except NotImplementedError as e:
            where = _raised_in(e.__traceback__)
            extra = ""
            if where and where != check.name and where != getattr(fn, "__name__", ""):
                other = _exercise_of(check, where)
                extra = f" (it calls `{where}`, which is not implemented yet: finish {other} first)"
            raise NotImplementedYet(
                f"{check.exercise} `{check.name}` is not implemented yet{extra}. Replace "
                f"`raise NotImplementedError()` with your code, run that cell, then this one."
            ) from None
        except BuildItFromScratch as e:
            raise _fail_in_run(check, case, n_visible, str(e)) from None
        except Exception as e:  # the student's code raised: explain, no traceback wall
            hint = next((h for h in check.error_hints if _safe_match(h, e)), None)
            hint = hint or _symptoms.diagnose_error(type(e).__name__, str(e))
            body = raised_line(case, type(e).__name__, e)
            loc = _user_frame(e.__traceback__)
            if loc:
                body += f"\n  {loc}"
            if hint:
                body += f"\n  Likely mistake: {hint.name}. {hint.explanation}"
            raise _fail_in_run(check, case, n_visible, body) from None
        original = case.call() if case.call is not None else case.args
        if case.kind != "grad" and not all(_same(a, b) for a, b in zip(original, args)):
            raise _fail_in_run(
                check,
                case,
                n_visible,
                "your function changed its input in place; work on a copy "
                "(e.g. `x = x - m` instead of `x -= m`)",
            )
        if case.kind == "grad":
            try:
                problem = _check_grad(check, case, args, out)
            except BuildItFromScratch as e:
                problem = str(e)
        else:
            problem = _compare(case.expected, out, case)
            if problem is None and case.samples:
                problem = _samples_problem(check, fn, case, out)
        if problem:
            body = problem
            named = _diagnose(check, fn, case, out, cases) if diagnose else ""
            if diagnose and not named and case.kind == "grad":
                found = _grad_mistake(check, case, out, tuple(
                    getattr(args[i], "grad", None) for i in case.grad_args))
                named = f"Likely mistake: {found.name}. {found.explanation}" if found else ""
            if named:
                body += f"\n  {named}"
            elif _small(case.args) and case.kind == "allclose" and not case.hidden:
                body += (
                    "\n  input:\n"
                    + _indent(_show(tuple(case.args)))
                    + "\n  expected:\n"
                    + _indent(_show(case.expected))
                    + "\n  got:\n"
                    + _indent(_show(out))
                )
            raise _fail_in_run(check, case, n_visible, body) from None
    if check.post is not None:
        problem = check.post(fn, hidden)
        if problem:
            raise CheckFailed(f"{check.exercise} `{check.name}`: {problem}")
    n_hidden = sum(c.hidden for c in cases)
    extra = f" ({n_hidden} of them hidden)" if n_hidden else ""
    print(f"✔ {check.exercise} `{check.name}`: all {len(cases)} cases match the reference{extra}.")


def _samples_problem(check: Check, fn, case: Case, first) -> str | None:
    """A statistic on its other seeds (``case.samples``): each close, all spread like samples."""
    values = [first]
    for build in case.samples:
        args = _copy(build())
        kwargs = {k: _copy(v) for k, v in case.kwargs.items()}
        with _Forbid(check), _enable_grad(), _reference_off(check):
            out = fn(*args, **kwargs)
        problem = _compare(case.expected, out, case)
        if problem:
            return f"with another random generator: {problem}"
        values.append(out)
    return _spread_problem(case, values)


def _spread_problem(case: Case, values: list) -> str | None:
    """None if ``values`` (numbers) vary at least 1/30 as much as samples would.

    For 4 correct measurements the chance of a spread that small is about 1 in 10**4.

    >>> c = Case("v", (), 4.0, kind="statistic", spread=0.05)
    >>> _spread_problem(c, [4.004, 4.004, 4.004])[:39]
    'on 3 different random generators your r'
    >>> _spread_problem(c, [3.95, 4.06, 4.01]) is None
    True
    """
    if case.spread is None or _len(values) < 2:
        return None
    if _type(values[0]) in (_Tensor, _ndarray) and int(np.prod(values[0].shape)) > 1:
        return _array_spread_problem(case, values)
    vals = []
    for v in values:
        if _type(v) in (_Tensor, _ndarray):
            v = v.item()
        vals.append(_float(v))
    mean = sum(vals) / _len(vals)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (_len(vals) - 1))
    if sd >= case.spread / 30:
        return None
    shown = "not shown (a hidden case)" if case.hidden else ", ".join(f"{v:.6g}" for v in vals)
    return (
        f"on {_len(vals)} different random generators your results are {shown}: they spread "
        f"by {sd:.3g}, while measurements from samples spread by about {case.spread:.3g}. "
        "Measure it from the samples the generator gives, not from a formula"
    )


def _array_spread_problem(case: Case, values: list) -> str | None:
    """:func:`_spread_problem` for arrays of measurements (e.g. frequencies of draws): the
    entry that varies most across generators must vary at least 1/30 as much as ``spread``.

    >>> c = Case("f", (), None, spread=0.002)
    >>> _array_spread_problem(c, [np.array([0.25, 0.75])] * 3).startswith("on 3 different")
    True
    >>> _array_spread_problem(c, [np.array([0.25, 0.75]), np.array([0.252, 0.748])]) is None
    True
    """
    with _no_torch_function():
        rows = [_as_float64(v).reshape(-1) for v in values]
        if any(tuple(r.shape) != tuple(rows[0].shape) for r in rows):
            return None  # compared with the expected shape already
        sd = float(_t_item(torch.stack(rows).std(dim=0).max()))
    if sd >= case.spread / 30:
        return None
    return (
        f"on {_len(values)} different random generators your results are the same (they "
        f"spread by at most {sd:.3g}, while results of random draws spread by about "
        f"{case.spread:.3g}): draw them with the generator you are given, do not construct "
        "them from the probabilities"
    )


def _safe_match(hint: ErrorHint, e: BaseException) -> bool:
    try:
        return bool(hint.matches(e))
    except Exception:
        return False


def _indent(s: str, pad: str = "    ") -> str:
    return "\n".join(pad + ln for ln in s.splitlines())


# ---------------------------------------------------------------- registry
def _make_registry():
    checks: dict[str, Check] = {}

    def register(check: Check) -> Callable:
        """Record ``check`` (once per key) and return the public ``check_<name>(fn)``."""
        if check.key in checks:
            if checks[check.key] is not check:
                raise KeyError(f"check {check.key!r} is already registered")
        checks[check.key] = check
        if _in_notebook():  # the locked setup cell, before any student cell (Trust above)
            check.cases  # noqa: B018 - builds them

        def public(fn):
            __tracebackhide__ = True  # noqa: F841
            _run(check, fn, hidden=False)

        public.__name__ = public.__qualname__ = f"check_{check.name}"
        public.check_key = check.key  # which exercise a test cell's call is (undefined_message)
        public.__doc__ = (
            f"Run the visible check of {check.exercise}: ``check_{check.name}({check.name})``."
        )
        return public

    def hidden_check(key: str, fn, given: dict | None = None, diagnose: bool = True) -> None:
        """The graded path: visible and hidden cases of the check registered as ``key``.
        ``given`` ({name: source}): the given implementations of the earlier exercises the
        function calls, which it is judged with when the student's fail their checks.
        ``diagnose=False``: the same verdict, no catalogued mistake named (see ``_run``).
        In a graded kernel ``key`` ends in ``#<seal>``: the running test cell's secret, which
        its record must carry (``grading/autograde/records.py``)."""
        __tracebackhide__ = True  # noqa: F841
        key, _, seal = key.partition("#")
        if _PROBE_DIR and key not in checks:
            from autograder.checks import _probe  # a graded kernel: record, do not judge

            _probe.forget_cell(sys._getframe(1))  # the test cell's hidden text (issue 47)
            _probe.run(_PROBE_DIR, key, fn, given=given, seal=seal or None)
            return
        check = checks[key]
        failing = _failing_uses(check, fn, True) if check.uses else []
        if failing and given and all(n in given for n, _ in failing):
            try:
                with _with_given(fn, {n: given[n] for n, _ in failing}), \
                        contextlib.redirect_stdout(_Sink()):
                    _run(check, fn, hidden=True, diagnose=diagnose)
            except CheckFailed as e:
                raise CheckFailed(f"{given_note(check, failing, False)}\n{e}") from None
            print(given_note(check, failing, True))
            return
        if failing:  # as the grader: right results are right all the same (``_judge``)
            shown = _Kept()
            try:
                with contextlib.redirect_stdout(shown):
                    _run(check, fn, hidden=True, cascade=False, diagnose=diagnose)
            except CheckFailed:
                pass
            else:
                print("".join(shown.parts), end="")
                return
        _run(check, fn, hidden=True, diagnose=diagnose)

    def registered() -> tuple:
        return tuple(checks)

    def build_cases(*keys: str) -> int:
        """Build the cases of the registered checks (all, or those of ``keys``) now, not on
        first use: a process that forks its workers builds them once for all (``_Cases``).
        Returns how many checks.

        >>> build_cases() == len(registered())
        True
        """
        for key in keys or tuple(checks):
            checks[key].cases  # noqa: B018 - builds them
        return len(keys or checks)

    def get_check(key: str) -> Check:
        return checks[key]

    def find_check(key) -> Check | None:
        return checks.get(key) if _type(key) is str else None

    def checks_named(name: str) -> list:
        return [c for c in checks.values() if c.name == name]

    def exercise_of(check: Check, function_name: str) -> str:
        """The exercise of this chapter that asks for ``function_name`` (else the name)."""
        chapter = check.key.split(".")[0]
        for other in checks.values():
            if other.key.split(".")[0] == chapter and other.name == function_name:
                return other.exercise
        return f"`{function_name}`"

    return (register, hidden_check, registered, exercise_of, get_check, build_cases, find_check,
            checks_named)


def _in_notebook() -> bool:
    """Whether this process is an IPython kernel or shell (a student's notebook)."""
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    return get_ipython is not None and get_ipython() is not None


(register, hidden_check, registered, _exercise_of, get_check, build_cases, _find_check,
 _checks_named) = _make_registry()


# ---------------------------------------------------------------- notebook helpers
@contextlib.contextmanager
def requires(exercise: str):
    """Run a demo cell that uses the student's code; if unfinished, say what to do first.

    >>> with requires("Exercise 9.9"):
    ...     raise NotImplementedError()
    (Finish Exercise 9.9 first: this cell uses it. Then run this cell again.)

    A part an earlier chapter should provide that is neither the student's nor given
    (``yours.Unfinished``, in the student kit) names its own exercise; the reference code the
    student kit leaves out (``ReferenceUnavailable``: it is an exercise's answer) says so. In
    both cases the cell is skipped with one line, no traceback.
    """
    try:
        yield
    except NotImplementedError as e:
        finish = getattr(e, "finish", None)
        if _type(finish) is str:
            print(f"(This cell is skipped: {finish}. Then run this cell again.)")
        else:
            print(f"(Finish {exercise} first: this cell uses it. Then run this cell again.)")
    except RuntimeError as e:
        if _type(e).__name__ != "ReferenceUnavailable":  # grading/autograde/reference.py's
            raise
        what = str(e).split(" ")[0]
        print(f"(This cell is skipped: it runs {what}, the course's reference answer to an "
              "exercise of this kit, which the kit leaves out.)")


_CHECK_CALL = re.compile(r"\b(check_\w+)\s*\(([^()]*)\)")


def undefined_message(name, line: str = "", names: dict | None = None) -> str | None:
    """What to say when ``name`` is not defined and it is an exercise's function: the test
    cell's ``check_softmax(softmax)`` (``line``, read with the notebook's ``names``) or any
    cell that calls ``softmax``. None for any other name.

    >>> from autograder.checks.attention import check_softmax
    >>> undefined_message("softmax", "check_softmax(softmax)", {"check_softmax": check_softmax})
    'define `softmax` first: run the answer cell of Exercise 2.1 above'
    >>> undefined_message("sofmax") is None
    True
    """
    if _type(name) is not str:
        return None
    names = names if _type(names) is dict else {}
    found = None
    for m in _CHECK_CALL.finditer(line or ""):  # a test cell: the check it calls says which
        if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", m.group(2)):
            found = _find_check(getattr(names.get(m.group(1)), "check_key", None))
            if found is not None:
                break
    if found is None:
        named = _checks_named(name)
        mine = [c for c in named
                if getattr(names.get(f"check_{c.name}"), "check_key", None) == c.key]
        # the notebook's own exercise; else the one exercise of that name (none if several)
        found = mine[0] if mine else named[0] if _len(named) == 1 else None
    if found is None:
        return None
    return f"define `{name}` first: run the answer cell of {found.exercise} above"


def _show_check_failure(shell, etype, value, tb, tb_offset=None):
    """IPython handler: a failed check shows its message, not a traceback wall; a name that
    is an exercise's function and was never defined says which answer cell to run.

    It still publishes an *error* output (``_showtraceback``), which is what makes nbgrader
    score the test cell 0 and the notebook front-end mark the cell as failed.
    """
    if not issubclass(etype, CheckFailed):  # a NameError
        frames = traceback.extract_tb(tb) if tb is not None else []
        line = frames[-1].line if frames else ""
        text = undefined_message(getattr(value, "name", None), line,
                                 getattr(shell, "user_ns", None))
        if text is None:  # any other name: IPython's own traceback
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
            return None
        stb = [f"✘ {etype.__name__}: {text} ({value})"]
        shell._showtraceback(etype, value, stb)
        return stb
    mark = "…" if issubclass(etype, NotImplementedYet) else "✘"
    stb = [f"{mark} {etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def install_notebook_display() -> bool:
    """In IPython, show CheckFailed as its message only, and an exercise's function that was
    never defined as what to run (:func:`undefined_message`). Returns whether it was
    installed."""
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    shell = get_ipython() if get_ipython else None
    if shell is None:
        return False
    shell.set_custom_exc((CheckFailed, NameError), _show_check_failure)
    return True


# ---------------------------------------------------------------- seal this module
class _SealedModule(types.ModuleType):
    def __setattr__(self, name, value):
        raise AttributeError(f"{self.__name__} is read-only: the course checks depend on it")

    def __delattr__(self, name):
        raise AttributeError(f"{self.__name__} is read-only: the course checks depend on it")


sys.modules[__name__].__class__ = _SealedModule
