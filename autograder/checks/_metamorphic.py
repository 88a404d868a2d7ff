"""Metamorphic probes: a wrong answer named by how it responds to related inputs.

The catalogue (``Mistake``) names a wrong answer by recomputing it exactly; the symptoms
(``_symptoms``) by how the wrong output relates to the right one. A *probe* names what no one
listed: the failing function is called again on inputs derived from the failing case (the
mask opened, one future position perturbed, gamma doubled ...) and what it does there is
said in words ("your output does not change when the mask changes: the mask is ignored").

An exercise declares its probe family in its ``Check`` (``probes=(...)``, built with the
factories below): :func:`ignored` (an argument with no effect), :func:`invariant` (the output
moves where the right one does not), :func:`future_leak` (a causal mask letting a later
position through), :func:`phases` (which part of a piecewise answer is wrong), and, with no
extra call, :func:`keeps` (a property every right answer has), :func:`factor` (off by a
quantity of the exercise), :func:`answer_for` (the right answer for another input),
:func:`count_parts` (a count off by one of its parts) and :func:`seen` (a symptom the output
shows, read by the exercise: 07's counts and merges). A check may also build a
:class:`Probe` of its own (08's AdamW: the weights with every gradient 0). Order of naming, in
``_core._diagnosed_mistake``: the catalogue, then the probes, then the general symptoms. A
probe runs only after a case failed, never decides pass or fail, and is *sound*: it speaks
only where the reference answer behaves otherwise on the same variant (a correct answer
never triggers one: ``tests/unit/test_probes.py``).

Where probes run. A probe that needs the function's output on a variant can only get it where
the student's function can be called:

* the kernel's visible check (``_core._run``: it calls the function on each variant) and the
  mutation bench (``bench.mutation``, the same path);
* the graded kernel's recording (``_probe``): the grader writes each case's variant inputs
  next to the case (``_judge.case_inputs``: ``"variants"``), the kernel records the outputs
  there as for a case, and the trusted verdict (``_judge``) reads them as plain data, with the
  reference computed in the grader's own process. A probe with no variant (``factor``,
  ``answer_for``, ``keeps``, ``count_parts``, ``seen``) reads only the case's output and its
  inputs.
  Not for a chapter-08 check whose kernel side is a driver (``_judge.Driven`` with ``args`` or
  ``output``): its variants are run in the kernel's visible check only.

A probe's message shows no hidden case's data: positions, step numbers and the exercise's own
quantities only (values only for a visible case).

A student kit carries no probe (its checks are data: ``autograder/kit.py``): there the
catalogue and the symptoms name what they can. Every finding's explanation opens with
``Observed:`` (:data:`MARK`): ``bench.mutation`` counts the mutants only a probe names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from autograder.checks._symptoms import _close, _t

MARK = "Observed:"
_OFF = [False]


@contextlib.contextmanager
def disabled():
    """No probe runs while the block runs (``bench.mutation``: what would be named without)."""
    _OFF[0] = True
    try:
        yield
    finally:
        _OFF[0] = False


def active() -> bool:
    return not _OFF[0]


@dataclass(frozen=True)
class Finding:
    """What a probe observed: ``name`` (the suggestion, short) and ``explanation``."""

    name: str
    explanation: str


@dataclass(frozen=True)
class Probe:
    """One metamorphic relation of an exercise.

    ``variants(case)``: ``((args, kwargs), ...)`` the function is called on (``()`` when the
    probe does not apply to the case, or needs no call); ``read(case, got, outs)``: a
    :class:`Finding` or None, from the failing output ``got`` and the outputs on the variants
    (``None`` for a variant that raised).
    """

    name: str
    variants: Callable
    read: Callable


def _same(a, b) -> bool:
    """Whether two outputs agree up to rounding (arrays of one shape and dtype, or numbers)."""
    if type(a) in (int, float) and type(b) in (int, float):
        return math.isclose(a, b, rel_tol=1e-7, abs_tol=1e-12) or (a != a and b != b)
    ta, tb = _t(a), _t(b)
    if ta is None or tb is None:
        return False
    with torch._C.DisableTorchFunction(), np.errstate(all="ignore"):
        return _close(ta.detach(), tb.detach())


def _near(a, b) -> bool:
    """``_same`` at a tolerance that float32 rounding of a transformed input stays within."""
    ta, tb = _t(a), _t(b)
    if ta is None or tb is None or ta.shape != tb.shape or ta.dtype != tb.dtype:
        return False
    loose = ta.dtype in (torch.float32, torch.float16, torch.bfloat16)
    with torch._C.DisableTorchFunction():
        return bool(torch.allclose(ta.detach().double(), tb.detach().double(),
                                   rtol=1e-3 if loose else 1e-6, atol=1e-4 if loose else 1e-9,
                                   equal_nan=True))


def _value(case, arg):
    """The case's value of argument ``arg`` (a position or a keyword), or a KeyError."""
    if type(arg) is int:
        if arg < len(case.args):
            return case.args[arg]
        raise KeyError(arg)
    return case.kwargs[arg]


def _with(case, arg, value):
    args, kwargs = list(case.args), dict(case.kwargs)
    if type(arg) is int:
        args[arg] = value
    else:
        kwargs[arg] = value
    return tuple(args), kwargs


def _no_variants(case):
    return ()


# ---------------------------------------------------------------- an argument with no effect
def ignored(arg, what: str, change: Callable, ref: Callable, suggests: str,
            how: str = "", default=None) -> Probe:
    """``what`` (argument ``arg``: a position or a keyword) has no effect: the function's
    output is the same with ``change(value)`` in its place, while the reference's
    (``ref(*args, **kwargs)``) is not. ``how``: the change in words; ``default``: the value
    of a keyword the case leaves out (passed explicitly, changed)."""

    def variants(case):
        try:
            value = _value(case, arg)
        except KeyError:
            if default is None or type(arg) is int:
                return ()
            value = default
        new = change(value)
        return () if new is None else (_with(case, arg, new),)

    def read(case, got, outs):
        if not outs or outs[0] is None or not _same(outs[0], got):
            return None
        args, kwargs = variants(case)[0]
        if _same(ref(*args, **kwargs), case.expected):
            return None  # here the argument does not matter: nothing to say
        change_text = f" ({how})" if how else ""
        return Finding(
            f"{what} is ignored",
            f"{MARK} your output does not change when {what} changes{change_text}, "
            f"while the right answer does. {suggests}",
        )

    return Probe(f"{what} ignored", variants, read)


# ---------------------------------------------------------------- an invariance broken
def invariant(arg, transform: Callable, what: str, ref: Callable, suggests: str) -> Probe:
    """The right answer does not change when argument ``arg`` goes through ``transform``
    (``what``: that change in words, "x is scaled by 4"); the function's output does."""

    def variants(case):
        try:
            value = _value(case, arg)
        except KeyError:
            return ()
        return (_with(case, arg, transform(value)),)

    def read(case, got, outs):
        if not outs or outs[0] is None or _near(outs[0], got):
            return None
        args, kwargs = variants(case)[0]
        if not _near(ref(*args, **kwargs), case.expected):
            return None  # here the right answer is not invariant (an eps that matters)
        return Finding(
            f"output not invariant when {what}",
            f"{MARK} your output changes when {what}, while the right answer stays the same. "
            f"{suggests}",
        )

    return Probe(f"invariant when {what}", variants, read)


# ---------------------------------------------------------------- a future position let through
def future_leak(time_axis: Callable, perturb: Callable, ref: Callable, suggests: str,
                most: int = 6) -> Probe:
    """A causal function whose output at a position moves when only a later position of its
    input changes. ``time_axis(case)`` -> T (the number of positions) when the case is causal,
    else None; ``perturb(case, j)`` -> (args, kwargs) with only position j changed;
    ``ref``: the reference (to confirm position j is hidden from the earlier ones here).
    The output's positions are along axis -2 (attention) or given by ``out_axis``."""

    def positions(case):
        T = time_axis(case)
        return [] if not T or T < 2 else list(range(1, min(T, most + 1)))

    def variants(case):
        return tuple(perturb(case, j) for j in positions(case))

    def read(case, got, outs):
        g = _t(got)
        if g is None or g.dim() < 2:
            return None
        worst = None  # (offset, delta, i, j)
        for j, out in zip(positions(case), outs):
            o = _t(out)
            if o is None or o.shape != g.shape:
                continue
            r_new, r_old = _t(ref(*perturb(case, j)[0], **perturb(case, j)[1])), _t(case.expected)
            for i in range(j):
                if not (_same(r_new.select(-2, i), r_old.select(-2, i))):
                    continue  # the reference lets j reach i here: not a future position
                with torch._C.DisableTorchFunction():
                    delta = float((o.select(-2, i).double() - g.select(-2, i).double())
                                  .abs().nan_to_num(nan=math.inf).max())
                if delta > 1e-6 and not _same(o.select(-2, i), g.select(-2, i)):
                    found = (j - i, delta, i, j)
                    if worst is None or found[0] < worst[0]:
                        worst = found
        if worst is None:
            return None
        d, delta, i, j = worst
        return Finding(
            "the mask lets future positions through",
            f"{MARK} changing only position {j} moves your output at position {i}"
            f"{'' if case.hidden else f' (by up to {delta:.3g})'}, {d} step"
            f"{'s' if d > 1 else ''} ahead of it, though position {i} must not see it. "
            f"{suggests}",
        )

    return Probe("future position let through", variants, read)


# ---------------------------------------------------------------- the answer to another input
def answer_for(transform: Callable, what: str, ref: Callable, suggests: str) -> Probe:
    """The output is the right answer for a transformed input: ``got`` equals
    ``ref(*args, **kwargs)`` with ``(args, kwargs) = transform(case)`` (``what``: that input in
    words, "-x"), where the right answer for the case itself differs. No call of the function."""

    def read(case, got, outs):
        args, kwargs = transform(case)
        other = ref(*args, **kwargs)
        if _same(other, case.expected) or not _same(got, other):
            return None
        return Finding(
            f"the right answer for {what}",
            f"{MARK} your output is the right answer for {what}, not for the input given. "
            f"{suggests}",
        )

    return Probe(f"answer for {what}", _no_variants, read)


# ---------------------------------------------------------------- a factor the quantities explain
def factor(quantities: Callable, suggests: str) -> Probe:
    """The output is the right one times one of the exercise's quantities or its inverse:
    ``quantities(case)`` -> {text: value} (e.g. {"sqrt(d_k)": 2.83, "H": 4})."""

    def read(case, got, outs):
        e, g = _t(case.expected), _t(got)
        if e is None or g is None or e.shape != g.shape or e.dtype != g.dtype:
            return None
        if e.dtype == torch.bool or not e.is_floating_point():
            return None
        with torch._C.DisableTorchFunction():
            e, g = e.detach().double(), g.detach().double()
            big = e.abs() > 1e-9 * float(e.abs().max()) if e.numel() else e.bool()
            if int(big.sum()) < 1:
                return None
            r = float((g[big] / e[big]).mean())
        if not math.isfinite(r) or r == 0 or abs(r - 1) < 1e-6:
            return None
        for text, q in quantities(case).items():
            for times, label in ((q, f"{text}"), (1 / q, f"1/{text}")):
                if q != 1 and abs(r - times) <= 1e-4 * abs(times) and _close(g, e * times):
                    return Finding(
                        f"output off by a factor {label}",
                        f"{MARK} your output is the right one times {label} (= {times:.4g}). "
                        f"{suggests}",
                    )
        return None

    return Probe("off by a factor", _no_variants, read)


# ---------------------------------------------------------------- helpers for declarations
def _keep(mask) -> torch.Tensor:
    """A boolean "may attend" tensor of a boolean or additive (0 / -inf) mask."""
    m = _t(mask)
    return m if m.dtype == torch.bool else m == 0


def opened(mask):
    """The mask that keeps everything (bool True / additive 0), None if ``mask`` already does."""
    m = _t(mask)
    if m is None or bool(_keep(m).all()):
        return None
    out = torch.ones_like(m) if m.dtype == torch.bool else torch.zeros_like(m)
    return out.numpy() if type(mask) is np.ndarray else out


def causal_length(mask_of: Callable) -> Callable:
    """``time_axis`` for :func:`future_leak`: T when the case's mask (``mask_of(case)``,
    None for none) is square and keeps no later key than its query, else None."""

    def T(case):
        m = mask_of(case)
        if m is None:
            return None
        keep = _keep(m)
        if keep.dim() < 2 or keep.shape[-1] != keep.shape[-2]:
            return None
        n = keep.shape[-1]
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        return None if bool((keep & future).any()) else n

    return T


def perturb_at(*positions, axis: int = -2, amount: float = 1.0) -> Callable:
    """``perturb`` for :func:`future_leak`: ``amount`` added at index j along ``axis`` of the
    arguments at ``positions`` (copies), the other arguments as they are."""

    def perturb(case, j):
        args = list(case.args)
        for p in positions:
            x = _t(args[p]).clone()
            x.select(axis, j).add_(amount)
            args[p] = x.numpy() if type(args[p]) is np.ndarray else x
        return tuple(args), dict(case.kwargs)

    return perturb


# ---------------------------------------------------------------- a property the answer has
def keeps(holds: Callable, what: str, suggests: str) -> Probe:
    """A property every right answer has (``holds(case, out)`` -> bool, e.g. a rotation keeps
    each pair's length) that the output lacks. ``what``: the property in words."""

    def read(case, got, outs):
        if not holds(case, case.expected) or holds(case, got):
            return None
        return Finding(f"{what} not kept",
                       f"{MARK} your output does not keep {what}, which the right answer "
                       f"does. {suggests}")

    return Probe(f"keeps {what}", _no_variants, read)


# ---------------------------------------------------------------- what the output shows
def seen(name: str, look: Callable) -> Probe:
    """A symptom the wrong output itself shows, read by the exercise: ``look(case, out)`` ->
    ``(the finding's name, what is observed, what it suggests)`` or None (for exact outputs:
    counts all off by one, merges that are not the most frequent pair ...). Silent where the
    right answer would show it too. No call of the function."""

    def read(case, got, outs):
        found = look(case, got)
        if found is None or look(case, case.expected) is not None:
            return None
        short, observed, suggests = found
        return Finding(short, f"{MARK} {observed}. {suggests}")

    return Probe(name, _no_variants, read)


# ---------------------------------------------------------------- which part of a piecewise answer
def phases(points: Callable, ref: Callable, suggests: dict) -> Probe:
    """A piecewise function (a schedule) right in some of its phases and wrong in others.
    ``points(case)`` -> ((phase, args), ...): one input in each phase the case's settings
    have; ``suggests``: {phase: what to check there}. Named only when at least one phase is
    right and one wrong."""

    def variants(case):
        return tuple((args, dict(case.kwargs)) for _, args in points(case))

    def read(case, got, outs):
        wrong, right = [], []
        for (phase, args), out in zip(points(case), outs):
            want = ref(*args, **case.kwargs)
            (right if out is not None and _same(out, want) else wrong).append(
                (phase, args, out, want))
        if not wrong or not right:
            return None
        phase, args, out, want = wrong[0]
        seen = "" if case.hidden or out is None else (
            f" ({out:.6g} for {want:.6g} at step {args[0]})")
        return Finding(
            f"the {phase} is wrong",
            f"{MARK} your result is right in the {' and '.join(p for p, *_ in right)} but "
            f"wrong in the {' and '.join(p for p, *_ in wrong)}{seen}. {suggests[phase]}",
        )

    return Probe("phases", variants, read)


# ---------------------------------------------------------------- a count off by its parts
def count_parts(parts: Callable, suggests: str) -> Probe:
    """A count (an int) off by one of its parts, or two of them: ``parts(case)`` ->
    {name: how many it adds} (e.g. {"W1": d_model * d_ff, "b1": d_ff, ...})."""

    def read(case, got, outs):
        if type(got) not in (int, float) or type(case.expected) not in (int, float):
            return None
        diff = got - case.expected
        named = [(k, int(v)) for k, v in parts(case).items() if int(v) != 0]
        for times, how in ((-1, "leaves out"), (1, "counts one more"), (-2, "subtracts")):
            found = [(k, v) for k, v in named if diff == times * v]
            if found:  # parts of one size (W1 and W2) are named together: "W1 or W2"
                return _count_finding(how, " or ".join(k for k, _ in found), found[0][1],
                                      suggests)
        for i, (k, v) in enumerate(named):  # two parts left out (a layer's weight and bias)
            for k2, v2 in named[i + 1:]:
                if diff == -(v + v2):
                    return _count_finding("leaves out", f"{k} and {k2}", v + v2, suggests)
        return None

    return Probe("count off by a part", _no_variants, read)


def _count_finding(how: str, what: str, n: int, suggests: str) -> Finding:
    text = {"leaves out": f"leaves out {what} ({n:,} parameters)",
            "counts one more": f"counts {what} ({n:,}) once too often",
            "subtracts": f"subtracts {what} ({n:,}) where it should add it"}[how]
    return Finding(f"count {text.split(' (')[0]}",
                   f"{MARK} your count differs from the right one by exactly this part: it "
                   f"{text}. {suggests}")


# ---------------------------------------------------------------- running a family
def find(probes, case, got, call: Callable | None, outs_of: Callable | None = None):
    """The first probe's :class:`Finding` for failing ``case``, or None.

    ``call(args, kwargs)``: the student's function on a variant (its output, or None if it
    raised), or ``outs_of(i)``: the recorded outputs of probe ``i``'s variants (the verdict's
    records); neither: only probes without variants run."""
    if not probes or not active() or case.kind == "grad":
        return None
    for i, p in enumerate(probes):
        try:
            variants = p.variants(case)
            if variants:
                if call is not None:
                    outs = [call(a, k) for a, k in variants]
                elif outs_of is not None:
                    outs = outs_of(i)
                    if outs is None or len(outs) != len(variants):
                        continue
                else:
                    continue
            else:
                outs = []
            found = p.read(case, got, outs)
        except Exception:  # noqa: BLE001 - a probe that cannot read this case says nothing
            continue
        if found is not None:
            return found
    return None


def variant_case(case, args, kwargs):
    """``case`` with other arguments (for ``_core._call``)."""
    return dataclasses.replace(case, args=tuple(args), kwargs=dict(kwargs), call=None,
                               samples=(), hidden=case.hidden)
