"""The student kit's checks: visible cases and the mistake catalogue as plain data, no answers.

``python -m autograder.release --kit OUT`` (``autograder/kit.py``) writes, for each chapter
of the kit, ``autograder/checks/kit_data/<module>.json``: every *visible* case of every check
(its inputs, its expected value, kind and tolerances), and for each catalogued mistake its
name, its explanation and what it returns on each of those cases (its gradients too where a
case checks them), computed by the course's mistake functions before the kit was written.
The kit's chapter module (``autograder/checks/<module>.py`` in the kit) calls :func:`checks`,
which rebuilds each ``Check`` from that data and registers it with ``_core``'s own registry:
the student's function then runs through ``_core._run``, the very code of the in-notebook
check, so verdicts and messages are the repository's. A mistake is a lookup: called on a
case's inputs it gives back the recorded output (:func:`_lookup`); on anything else it
"cannot run", which ``_core`` already treats as "not this mistake".

This module holds no expected value and no mistake: only the code that reads them.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import json
import math
import os
import re

import numpy as np
import torch

from autograder.checks import _codec
from autograder.checks._core import Case, Check, ErrorHint, Mistake, get_check, register

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kit_data")
# what an error hint's ``matches`` source may use (the hints only read the exception)
_HINT_GLOBALS = {"re": re, "torch": torch, "np": np, "math": math}


def digest(args, kwargs) -> str:
    """The key of one call's inputs: the sha256 of their plain data (``_codec``)."""
    text = _codec.dumps((tuple(args), dict(kwargs)))
    return hashlib.sha256(text.encode()).hexdigest()


class NotPrecomputed(LookupError):
    """A catalogued mistake asked about inputs the kit has no recorded output for."""


class _Replay(torch.autograd.Function):
    """A recorded output whose backward gives the recorded gradients of its inputs."""

    @staticmethod
    def forward(ctx, value, grads, *leaves):
        ctx.grads = grads
        return value.clone()

    @staticmethod
    def backward(ctx, grad_output):
        # the recorded gradients are those of sum(output * probe): ``_core._mistake_grads``
        # (the only caller that goes backward through a mistake) uses that same probe
        return (None, None, *ctx.grads)


def _lookup(table: dict):
    """A mistake's stand-in: ``{digest of the inputs: record}`` -> a function of the inputs.

    A record is ``{"out": encoded output}`` (null: the mistake raised there) and, on a
    gradient case, ``"grads"`` and ``"grad_args"``: when the inputs track gradients, the
    output returned carries exactly the recorded gradients of ``sum(output * probe)``.
    """

    def mistake(*args, **kwargs):
        rec = table.get(digest(args, kwargs))
        if rec is None or rec.get("out") is None:
            raise NotPrecomputed("no recorded output for these inputs")
        out = _codec.decode(rec["out"])
        grads = rec.get("grads")
        if grads is None or not any(type(a) is torch.Tensor and a.requires_grad for a in args):
            return out
        first = out[0] if type(out) in (tuple, list) else out
        leaves = [args[i] for i in rec["grad_args"]]
        recorded = [None if g is None else _codec.decode(g) for g in grads]
        with torch.enable_grad():
            first = _Replay.apply(first, recorded, *leaves)
        if type(out) in (tuple, list):
            return type(out)((first, *out[1:]))
        return first

    return mistake


def _hint(d: dict) -> ErrorHint:
    namespace = {**_HINT_GLOBALS, "__builtins__": builtins}
    exec(d["source"], namespace)  # noqa: S102 - the course's own matcher, from the kit's data
    return ErrorHint(d["name"], d["explanation"], namespace[d["function"]])


def _builder(enc):
    def build():
        return _codec.decode(enc)

    return build


def _case(d: dict) -> Case:
    return Case(
        label=d["label"],
        args=_codec.decode(d["args"]),
        expected=_codec.decode(d["expected"]),
        kwargs=_codec.decode(d["kwargs"]),
        kind=d["kind"],
        rtol=d["rtol"],
        atol=d["atol"],
        call=None if d["call"] is None else _builder(d["call"]),
        grad_args=tuple(d["grad_args"]),
        probe=None if d["probe"] is None else _codec.decode(d["probe"]),
        samples=tuple(_builder(s) for s in d["samples"]),
        spread=d["spread"],
    )


def _note_stage(note: str):
    def post(fn, hidden):
        print(f"({note})")
        return None

    return post


def _uses(pairs) -> tuple:
    """The cascades whose earlier check is in the kit (its chapter module imported here)."""
    kept = []
    for name, key in pairs:
        module = key.split(".")[0]
        try:
            importlib.import_module(f"autograder.checks.{module}")
            get_check(key)
        except (ImportError, KeyError):
            continue
        kept.append((name, key))
    return tuple(kept)


def _check(d: dict) -> Check:
    cases = tuple(_case(c) for c in d["cases"])
    mistakes = tuple(Mistake(m["name"], m["explanation"], _lookup(m["table"]), grad=m["grad"])
                     for m in d["mistakes"])
    texts = d.get("call_text")
    return Check(
        key=d["key"],
        exercise=d["exercise"],
        name=d["name"],
        cases=cases,
        mistakes=mistakes,
        error_hints=tuple(_hint(h) for h in d["error_hints"]),
        forbidden=tuple(d["forbidden"]),
        forbidden_hint=d["forbidden_hint"],
        reference_off=d["reference_off"],
        post=_note_stage(d["post_note"]) if d.get("post_note") else None,
        uses=_uses(d["uses"]),
        call_text=(lambda case: texts[case.label]) if texts is not None else None,
    )


def _absent(name: str, exercise: str, why: str):
    def check(*fns):
        print(f"(The visible check of {exercise} `{name}` is not in this kit: {why})")

    check.__name__ = check.__qualname__ = f"check_{name}"
    check.absent, check.exercise = why, exercise  # no check runs (``yours`` reads it)
    return check


def checks(module: str) -> dict:
    """``{public name: check function}`` of the kit's chapter ``module``."""
    with open(os.path.join(DATA, f"{module}.json"), encoding="utf-8") as f:
        data = json.load(f)
    out = {}
    for d in data["checks"]:
        if d.get("absent"):
            out[d["public"]] = _absent(d["name"], d["exercise"], d["absent"])
        else:
            out[d["public"]] = register(_check(d))
    return out
