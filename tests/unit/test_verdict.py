"""Trusted verdicts without a kernel: codec, probe records, judge, kernel package, flags.

The probe (``_probe.run``) is called here in-process on plain functions, which is what the
graded kernel does; the verdict (``_judge.judge``) only sees the JSON record it wrote.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from autograder.checks import _codec, table
from autograder.checks._core import CheckFailed, _run, get_check
from autograder.checks._judge import judge
from autograder.grading.autograde import kernel_package, records
from autograder.grading.parent import flags as source_flags

from helpers.answer_sets import solutions
from helpers.verdict import kernel_package_prints, record

KEY = table.keys("01_attention")  # {function: check key}
_SOFTMAX = table.check("01_attention", "softmax")
_SDPA = table.check("01_attention", "scaled_dot_product_attention")
_VARIANCE = table.check("01_attention", "score_variance")
_COSINE = table.check("01_attention", "cosine_similarity_attention")

REPO = Path(__file__).resolve().parents[2]


def _record(tmp_path, check, fn) -> dict:
    return record(tmp_path, check, fn)


def _solution(name: str):
    return solutions("01_attention")[name]


# ---------------------------------------------------------------- codec
def test_codec_round_trip_and_builders():
    rng = np.random.default_rng(3)
    gen = torch.Generator().manual_seed(5)
    value = (np.arange(6, dtype=np.float32).reshape(2, 3), torch.tensor([1.5, float("nan")]),
             {"a": [1, b"x", "s", None, True]}, np.float64(2.5), rng, gen,
             torch.ones(2, dtype=torch.bfloat16))
    back = _codec.loads(_codec.dumps(value))
    assert back[0].dtype == np.float32 and np.array_equal(back[0], value[0])
    assert torch.equal(back[1].isnan(), value[1].isnan()) and back[1][0] == 1.5
    assert back[2] == {"a": [1, b"x", "s", None, True]} and type(back[3]) is np.float64
    assert back[4].standard_normal() == np.random.default_rng(3).standard_normal()
    assert torch.equal(torch.randn(3, generator=back[5]),
                       torch.randn(3, generator=torch.Generator().manual_seed(5)))
    assert back[6].dtype == torch.bfloat16


def test_codec_carries_no_objects():
    class Sneaky(torch.Tensor):
        pass

    out = _codec.loads(_codec.dumps(torch.zeros(2).as_subclass(Sneaky)))
    assert isinstance(out, _codec.Opaque) and out.type_name == "Sneaky"
    bad = {"$": "nd", "dtype": "float64", "shape": [3], "v": "AAAA"}
    with pytest.raises(_codec.CodecError):
        _codec.decode(bad)
    with pytest.raises(_codec.CodecError):
        _codec.decode({"$": "nd", "dtype": "object", "shape": [1], "v": ""})


# ---------------------------------------------------------------- probe + judge
def test_solution_passes_and_blank_is_not_implemented(tmp_path):
    v = judge(_SOFTMAX, _record(tmp_path, _SOFTMAX, _solution("softmax")))
    assert v.passed and "all 14 cases match the reference (5 of them hidden)" in v.message

    def blank(x, axis=-1):
        raise NotImplementedError()

    v = judge(_SOFTMAX, _record(tmp_path, _SOFTMAX, blank))
    assert not v.passed and v.diagnosis == "not implemented"


def test_gradient_case_judged_from_recorded_gradients(tmp_path):
    good = judge(_SDPA, _record(tmp_path, _SDPA, _solution("scaled_dot_product_attention")))
    assert good.passed

    def detached(q, k, v, mask=None, scale=None):
        return _solution("scaled_dot_product_attention")(q, k, v, mask, scale).detach()

    v = judge(_SDPA, _record(tmp_path, _SDPA, detached))
    assert not v.passed and v.diagnosis == "wrong gradient"
    # a visible case since issue 32 (the goal asks for gradients flowing to q, k, v)
    assert v.message.startswith("Exercise 5.1 `scaled_dot_product_attention` fails on gradients")

    def cosine_detached(q, k, v, mask=None, temperature=1.0, eps=1e-8):
        return _solution("cosine_similarity_attention")(q, k, v, mask, temperature, eps).detach()

    v = judge(_COSINE, _record(tmp_path, _COSINE, cosine_detached))  # its gradients: hidden
    assert not v.passed and v.diagnosis == "wrong gradient"
    assert v.message.startswith("The visible cases pass; the hidden case “gradients")


def test_catalogued_mistake_is_named_from_the_record(tmp_path):
    def naive(x, axis=-1):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)

    with np.errstate(all="ignore"):
        v = judge(_SOFTMAX, _record(tmp_path, _SOFTMAX, naive))
    assert v.diagnosis == "unstable softmax overflowing"
    assert "Likely mistake: unstable softmax overflowing" in v.message


def test_forbidden_builtin_in_a_worker_thread_is_seen(tmp_path):
    def threaded(x, axis=-1):
        box = {}
        t = threading.Thread(target=lambda: box.setdefault(
            "y", torch.softmax(torch.from_numpy(x), dim=axis).numpy()))
        t.start()
        t.join()
        return box["y"]

    v = judge(_SOFTMAX, _record(tmp_path, _SOFTMAX, threaded))
    assert v.diagnosis == "used forbidden built-in softmax"


def test_in_place_edit_of_an_input_fails(tmp_path):
    sol = _solution("softmax")

    def in_place(x, axis=-1):
        y = sol(x, axis)
        x[...] = 0
        return y

    assert judge(_SOFTMAX, _record(tmp_path, _SOFTMAX, in_place)).diagnosis == \
        "input changed in place"


def test_deterministic_near_miss_of_a_statistic_fails(tmp_path):
    def near(d_k, n, rng):
        return d_k * 1.001

    v = judge(_VARIANCE, _record(tmp_path, _VARIANCE, near))
    assert not v.passed and "different random generators" in v.message
    assert judge(_VARIANCE, _record(tmp_path, _VARIANCE, _solution("score_variance"))).passed
    # the in-kernel check (self-learners) rejects it too ...
    with pytest.raises(CheckFailed, match="different random generators"):
        _run(_VARIANCE, near, hidden=True)
    # ... which it did not before a statistic was measured on several generators
    old = dataclasses.replace(_VARIANCE, post=None, cases=tuple(
        dataclasses.replace(c, samples=()) for c in _VARIANCE.cases))
    _run(old, near, hidden=True)


def test_missing_or_forged_records_score_zero(tmp_path):
    assert judge(_SOFTMAX, None, "NameError: name 'softmax' is not defined").diagnosis == \
        "output missing"
    (tmp_path / f"{KEY['softmax']}.json").symlink_to("/etc/passwd")
    assert records.read_record(tmp_path, KEY["softmax"]) is None
    os.unlink(tmp_path / f"{KEY['softmax']}.json")
    (tmp_path / f"{KEY['softmax']}.json").write_text(
        json.dumps({"key": KEY["softmax"], "cases": [{"label": 3}]}))
    v = judge(_SOFTMAX, records.read_record(tmp_path, KEY["softmax"]))
    assert not v.passed and v.diagnosis == "output missing"


# ---------------------------------------------------------------- the kernel's package
def test_kernel_package_holds_no_expected_values(tmp_path):
    src = nbformat.read(REPO / "solutions/01_attention/01_attention.ipynb", as_version=4)
    spec = kernel_package.prepare(tmp_path, [src])
    assert spec is not None
    code = (
        "import autograder.checks as c, autograder.checks._core as core\n"
        "import autograder.checks.attention as a\n"
        "print(sorted(n for n in vars(a) if not n.startswith('__')), core.registered())\n"
    )
    out = kernel_package_prints(spec, code, tmp_path)
    assert "_SOFTMAX" not in out and "()" in out  # public check names only, empty registry
    assert "check_softmax" in out
    stub = Path(spec["package"]) / "checks" / "attention.py"
    assert "transformer_ref" not in stub.read_text()


def test_flags_name_each_evasion():
    from helpers.adversarial.verdict_class import ATTACKS

    want = {"time_transformer": "rewrites cells (input transformer)",
            "getattr_alias": "alias of getattr", "hex_exec": "decodes encoded code",
            "torch_library": "operator re-registration (torch.library)",
            "frames": "introspection of frames"}
    for student, source in ATTACKS.items():
        assert want[student] in source_flags._source_flags(source), student


def test_solutions_are_not_flagged():
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for c in nb.cells:
            if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("locked"):
                assert source_flags._source_flags(c.source) == set(), (path.name, c.source[:80])


def test_registry_lookup():
    check = get_check(KEY["softmax"])
    assert (check.key, check.name) == (KEY["softmax"], "softmax") and check.cases


# ---------------------------------------------------------------- chapter 04 (norms)
def test_norms_solutions_pass_from_records(tmp_path):
    import autograder.checks.layer_norm  # noqa: F401 (registers)

    ns = solutions("04_layer_norm")
    for key in table.keys("04_layer_norm").values():
        check = get_check(key)
        v = judge(check, _record(tmp_path, check, ns[check.name]))
        assert v.passed, v.message


def test_autograd_in_a_from_scratch_backward_is_seen(tmp_path):
    import autograder.checks.layer_norm  # noqa: F401 (registers)

    check = table.check("04_layer_norm", "layer_norm_backward")
    layer_norm = solutions("04_layer_norm")["layer_norm"]

    def by_autograd(dy, x, gamma, eps=1e-5):
        x = x.clone().requires_grad_(True)
        g = gamma.clone().requires_grad_(True)
        b = torch.zeros_like(gamma, requires_grad=True)
        out = layer_norm(x, g, b, eps=eps)
        return torch.autograd.grad(out, (x, g, b), dy)

    v = judge(check, _record(tmp_path, check, by_autograd))
    assert v.diagnosis == "used forbidden built-in grad", v.message
