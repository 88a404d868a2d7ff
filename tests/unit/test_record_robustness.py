"""A malformed record scores its key 0 ("malformed record"); it never stops a notebook's grading.

A record is the kernel's data, which the student's code can write: ``sealed.parse_record``
bounds it before parsing (nesting, NaN/Infinity, long integers), ``_judge`` checks its schema,
and ``verdict._judged`` turns any exception while judging one key into that key's 0. The
records here are built in-process with the probe's own recorder (``_probe._call``) and then
spoiled by hand: no kernel, no sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.checks import _judge, _probe, table
from autograder.checks._judge import case_inputs, judge
from autograder.grading.autograde import records as sealed
from autograder.grading.autograde import verdict

from helpers.answer_sets import solutions

REPO = Path(__file__).resolve().parents[2]
_SOFTMAX = table.check("01_attention", "softmax")
_VARIANCE = table.check("01_attention", "score_variance")


def _record(check, fn) -> dict:
    """The record the probe makes of ``fn`` on ``check``'s cases (as ``_probe.run`` does)."""
    cases = []
    for c in case_inputs(check)["cases"]:
        r = {"label": c["label"], **_probe._call(fn, c, c["args"])}
        if r["status"] == "ok" and c.get("samples"):
            r["samples"] = [_probe._call(fn, c, s) for s in c["samples"]]
        cases.append(r)
    return {"key": check.key, "cases": cases, "ops": [], "functions": [], "reference": [],
            "uses": {}}


@pytest.fixture(scope="module")
def records() -> dict:
    return {c.key: _record(c, solutions("01_attention")[c.name]) for c in (_SOFTMAX, _VARIANCE)}


def _text(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def _cell(folder: Path, data: dict[str, bytes], points: float = 1.0) -> dict:
    """The verdict on one test cell checking ``data``'s keys, each from the record bytes
    given, read and judged as ``decide`` does."""
    for key, text in data.items():
        (folder / f"{key}.json").write_bytes(text)
    return verdict._judge_cell(folder, folder, list(data), points, "")


def _spoiled(record: dict, **case) -> bytes:
    """``record`` with its first case's fields replaced by ``case``."""
    r = json.loads(json.dumps(record))
    r["cases"][0] = {"label": r["cases"][0]["label"], **case}
    return _text(r)


def _zero(v: dict) -> None:
    assert v["points"] == 0 and v["passed"] is False, v
    assert v["diagnosis"].startswith("malformed record"), v
    assert v["recorded"] is True, v  # a record was there: not a missing one
    v["message"].encode("utf-8")  # writable into the notebook


def test_correct_records_pass(tmp_path, records):
    v = _cell(tmp_path, {k: _text(r) for k, r in records.items()}, 2.0)
    assert v["passed"] and v["points"] == 2.0, v["message"]


def test_deep_nesting_is_refused_before_parsing(tmp_path, records):
    key = _SOFTMAX.key
    deep = b'{"key":"%s","cases":' % key.encode() + b"[" * 200_000 + b"]" * 200_000 + b"}"
    _zero(_cell(tmp_path, {key: deep}))
    # deeper than the bound, shallower than json's own recursion limit: the scan refuses it
    deeper = b'{"key":"%s","cases":[' % key.encode() + b"[" * 500 + b"]" * 500 + b"]}"
    assert "malformed" in sealed.parse_record(deeper, key)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_or_infinity_in_place_of_the_cases(tmp_path, constant):
    key = _SOFTMAX.key
    _zero(_cell(tmp_path, {key: b'{"key":"%s","cases":%s}' % (key.encode(), constant.encode())}))


def test_nan_in_place_of_an_int(tmp_path, records):
    r = json.loads(json.dumps(records[_SOFTMAX.key]))
    r["cases"][0]["out"]["shape"][0] = float("nan")  # a tensor's shape
    _zero(_cell(tmp_path, {_SOFTMAX.key: _text(r)}))


@pytest.mark.parametrize("cases", ["abc", {"a": 1}, 3, [1, 2], [["label", "ok"]]])
def test_cases_not_a_list_of_dicts(tmp_path, cases):
    _zero(_cell(tmp_path, {_SOFTMAX.key: _text({"key": _SOFTMAX.key, "cases": cases})}))


@pytest.mark.parametrize("name", ["Bad\x00Name", "\ud800", "E" * 5000, 7, ["ValueError"]])
def test_exception_name_no_class_can_have(tmp_path, records, name):
    bad = _spoiled(records[_SOFTMAX.key], status="raised", exc=name, msg="m")
    _zero(_cell(tmp_path, {_SOFTMAX.key: bad}))


@pytest.mark.parametrize("case", [
    {"status": 5}, {"status": "ok", "out": None, "mutated": "yes"},
    {"status": "raised", "exc": "ValueError", "msg": ["m"]},
    {"status": "not_implemented", "raised_in": {"f": 1}},
    {"status": "ok", "out": None, "samples": "x"}, {"status": "finished"},
])
def test_case_fields_of_the_wrong_type(tmp_path, records, case):
    _zero(_cell(tmp_path, {_SOFTMAX.key: _spoiled(records[_SOFTMAX.key], **case)}))


@pytest.mark.parametrize("field,value", [("ops", 3), ("functions", [1]), ("uses", [1]),
                                         ("reference", "transformer_ref"), ("timed", {})])
def test_record_fields_of_the_wrong_type(tmp_path, records, field, value):
    r = dict(records[_SOFTMAX.key], **{field: value})
    _zero(_cell(tmp_path, {_SOFTMAX.key: _text(r)}))


def test_a_4000_digit_int(tmp_path, records):
    r = json.loads(json.dumps(records[_VARIANCE.key]))
    for c in r["cases"]:  # as the probe encodes a Python int: float() of it overflows
        c["out"] = {"$": "int", "v": "9" * 4000}
    _zero(_cell(tmp_path, {_VARIANCE.key: _text(r)}))
    raw = _text(records[_SOFTMAX.key])[:-1] + b',"extra":' + b"7" * 4000 + b"}"  # a JSON int
    _zero(_cell(tmp_path, {_SOFTMAX.key: raw}))


def test_one_malformed_key_zeroes_its_cell_only(tmp_path, records):
    bad = _spoiled(records[_SOFTMAX.key], status="raised", exc="Bad\x00Name", msg="m")
    v = _cell(tmp_path, {_SOFTMAX.key: bad, _VARIANCE.key: _text(records[_VARIANCE.key])})
    _zero(v)
    assert "✔ Exercise" in v["message"]  # the other key was judged as usual


@pytest.mark.parametrize("error", [RuntimeError("a bug"), RecursionError("deep"),
                                   OverflowError("big"), KeyError("k")])
def test_any_exception_while_judging_one_key_scores_it_zero(records, error):
    def failing(*args):
        raise error

    v = verdict._judged(failing, _SOFTMAX.key, records[_SOFTMAX.key], "", None)
    assert not v.passed and v.diagnosis == "malformed record"
    assert type(error).__name__ in v.message  # the grader's own errors stay visible


def test_a_lone_surrogate_in_a_message_can_be_written(tmp_path, records):
    bad = _spoiled(records[_SOFTMAX.key], status="raised", exc="ValueError", msg="a\ud800b")
    v = _cell(tmp_path, {_SOFTMAX.key: bad})
    assert v["points"] == 0 and v["diagnosis"] == "raised ValueError"
    v["message"].encode("utf-8")


def test_missing_and_refused_records_differ(records):
    key = _SOFTMAX.key
    assert sealed.parse_record(b'{"key": "x.y", "cases": []}', key) is None  # another key
    assert sealed.parse_record(b'{"key": ', key) is None  # not JSON
    assert sealed.parse_record(b"[" + b"1" * 1001 + b"]", key) == {
        "key": key, "malformed": "an integer of 1,001 digits"}
    assert sealed.parse_record(_text(records[key]), key) == records[key]


def test_record_depth_reads_strings_and_escapes():
    assert sealed.record_depth(rb'{"a": "[[{{", "b": ["\"[[", "\\", [{}]]}') == 4
    assert sealed.record_depth(b'"' + b"\\\\" * 10 + b'"[[') == 2
    assert sealed.record_depth(b'["\\"]]]]"]') == 1


def test_real_records_are_far_below_the_bound():
    """The deepest output the codec carries (32 levels of dicts), in a sample of a case of an
    earlier function's record: the deepest place the probe writes."""
    x = 1
    for _ in range(32):
        x = {"k": x}
    out = _probe._enc(x)
    assert out.get("$") == "dict"  # carried, not opaque
    case = {"label": "a", "status": "ok", "out": out, "samples": [{"status": "ok", "out": out}]}
    rec = {"key": "k", "cases": [case], "uses": {"f": {"key": "g", "cases": [case]}}}
    depth = sealed.record_depth(_text(rec))
    assert depth < sealed.MAX_RECORD_DEPTH / 3, depth
    assert sealed.parse_record(_text(rec), "k") == rec


def test_judge_alone_names_a_malformed_record():
    assert judge(_SOFTMAX, {"key": _SOFTMAX.key, "malformed": "why"}).diagnosis == \
        "malformed record"
    assert judge(_SOFTMAX, {"key": _SOFTMAX.key, "cases": float("nan")}).diagnosis == \
        "malformed record"
    with pytest.raises(_judge.Malformed):
        _judge._check_record({"cases": [{"label": "a", "exc": "A\x00"}]})
