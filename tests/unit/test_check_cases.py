"""A check's cases are built on first use (``_core._Cases``), and the same whenever and
wherever they are built: alone or after every other check, in any order, whatever the
caller's random state, default dtype, autograd mode or torch function mode."""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import types
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from autograder.checks import _core, table
from autograder.checks._core import Case, Check, fresh_cases, get_check, registered

CHAPTER_MODULES = [ch.module for ch in table.TABLES.values()]
for _m in CHAPTER_MODULES:
    importlib.import_module(f"autograder.checks.{_m}")
ROOT = Path(__file__).resolve().parents[2]
GET_LR = table.keys("training")["get_lr"]


def _keys() -> list[str]:
    return [k for k in registered() if k.split(".")[0] in CHAPTER_MODULES]


def _given_a_tuple(key: str) -> bool:
    """Whether check ``key`` was declared with its cases (not a function building them)."""
    held = vars(get_check(key))
    return type(held["_cases"]) is tuple and "_cases_build" not in held


def same(a, b, where="") -> None:
    """``a`` and ``b`` equal bit for bit (tensors, arrays, generators, modules, cases)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        assert (a.dtype, a.shape, a.requires_grad) == (b.dtype, b.shape, b.requires_grad), where
        assert torch.equal(a.detach().flatten().view(torch.uint8),
                           b.detach().flatten().view(torch.uint8)), f"{where}: values differ"
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where
    elif isinstance(a, np.random.Generator):
        same(a.bit_generator.state, b.bit_generator.state, where)
    elif isinstance(a, torch.Generator):
        same(a.get_state(), b.get_state(), where)
    elif isinstance(a, torch.nn.Module):
        same(dict(a.state_dict()), dict(b.state_dict()), where)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys"
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, Case):
        for f in ("label", "args", "expected", "kwargs", "hidden", "kind", "rtol", "atol",
                  "grad_args", "probe", "spread"):
            same(getattr(a, f), getattr(b, f), f"{where}.{f}")
        if a.call is not None:
            same(a.call(), b.call(), f"{where}.call()")
        same([s() for s in a.samples], [s() for s in b.samples], f"{where}.samples")
    elif callable(a) or hasattr(a, "__dict__"):  # a function, a reference object: its kind
        assert type(a).__qualname__ == type(b).__qualname__, where
        if hasattr(a, "__dict__") and not callable(a):
            same(dict(vars(a)), dict(vars(b)), where)
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


class _Meddler(TorchFunctionMode):
    """A caller's torch function mode: it would change every result built under it."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 1 if isinstance(out, torch.Tensor) and out.is_floating_point() else out


@pytest.mark.parametrize("module", CHAPTER_MODULES)
def test_cases_built_again_in_a_meddled_state_are_the_same(module):
    """Each check's cases, built again with the global random states reseeded, float64 as
    the default dtype, autograd off and a mode that edits every result, equal bit for bit
    the ones this process built first (in whatever order its tests read them): a case
    draws nothing from another check's leftover random state, and the build does not see
    the caller's settings. The caller's settings are as they were afterwards."""
    keys = [k for k in _keys() if k.split(".")[0] == module]
    built = {k: get_check(k).cases for k in keys}
    torch.manual_seed(12345)
    np.random.seed(12345)
    before, np_before = torch.get_rng_state(), np.random.get_state()[1].copy()
    with torch.no_grad(), _Meddler():
        torch.set_default_dtype(torch.float64)
        try:
            again = {k: fresh_cases(get_check(k)) for k in keys}
        finally:
            torch.set_default_dtype(torch.float32)
        assert torch.is_grad_enabled() is False
        assert float(torch.zeros(1)) == 1.0  # the mode is on again
    assert torch.equal(torch.get_rng_state(), before)
    assert np.array_equal(np.random.get_state()[1], np_before)
    rebuilt = [k for k in keys if again[k] is not None]
    assert rebuilt == [k for k in keys if not _given_a_tuple(k)] and rebuilt
    for k in rebuilt:
        same(built[k], again[k], k)


def test_importing_the_check_modules_builds_no_case():
    """A process that imports every chapter's checks computes no expected value (nor pulls
    in torch._dynamo, which the first AdamW costs); reading one check's cases builds that
    check's only."""
    code = (
        "import importlib, sys\n"
        "from autograder.checks import table, _core\n"
        f"for m in {CHAPTER_MODULES!r}:\n"
        "    importlib.import_module('autograder.checks.' + m)\n"
        "built = lambda: [k for k in _core.registered()\n"
        "                 if type(_core.get_check(k).__dict__['_cases']) is tuple]\n"
        "print(built(), 'torch._dynamo' in sys.modules)\n"
        f"_core.get_check({GET_LR!r}).cases\n"
        "print(built())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    given_a_tuple = [k for k in _keys() if _given_a_tuple(k)]
    assert out.splitlines() == [f"{given_a_tuple} False",
                                f"{sorted(given_a_tuple + [GET_LR], key=_keys().index)}"]


def _lazy(calls: list, key: str = "lazy.f") -> Check:
    return Check(key, "Exercise 0.0", "f",
                 cases=lambda: calls.append(1) or (Case("one", (1,), 1, kind="exact"),))


def test_cases_are_built_once_on_first_read_and_frozen():
    calls = []
    check = _lazy(calls)
    assert calls == []
    assert check.cases is check.cases and calls == [1]
    assert [c.label for c in check.cases] == ["one"]
    with pytest.raises(FrozenInstanceError):
        check.cases = ()
    with pytest.raises(FrozenInstanceError):
        object.__setattr__(check, "cases", ())
    other = dataclasses.replace(check, cases=(Case("two", (2,), 2, kind="exact"),))
    assert [c.label for c in other.cases] == ["two"] and calls == [1]
    kept = dataclasses.replace(check, name="g")
    assert kept.cases is check.cases and calls == [1]
    assert [c.label for c in Check("t.f", "Exercise 0.0", "f", (Case("t", (), 0),)).cases] == ["t"]


def test_a_failed_build_is_tried_again():
    tries = []

    def build():
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("first try")
        return [Case("one", (1,), 1, kind="exact")]

    check = Check("lazy.f", "Exercise 0.0", "f", cases=build)
    with pytest.raises(RuntimeError):
        _ = check.cases
    assert isinstance(check.cases, tuple) and len(tries) == 2


def test_a_notebook_builds_them_when_registered(monkeypatch):
    """In IPython (a student's kernel) the cases are built when the check is registered, in
    the locked setup cell, before any student code can patch what they are computed with."""
    register = _core._make_registry()[0]
    calls = []
    register(_lazy(calls, "lazy.f"))
    assert calls == []  # not a notebook
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=object))
    register(_lazy(calls, "lazy.g"))
    assert calls == [1]
