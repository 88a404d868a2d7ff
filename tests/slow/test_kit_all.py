"""The whole course's student kit (every chapter; ``tests/slow/test_kit.py`` covers 01-04).

The same proofs on the kit ``python -m autograder.release --kit OUT`` writes by default: no
answer, no hidden case, no mistake source; every visible check that is in the kit gives the
repository's verdicts and messages on the answers, the catalogued mistakes and a wrong answer,
with only the kit on ``sys.path``; what the kit cannot run is listed in its README.
"""

from __future__ import annotations

import json

import pytest

from autograder import kit
from autograder.checks import table
from autograder.checks.table import TABLES

from helpers import kit_support

CHAPTERS = sorted(TABLES)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit") / "course-kit"
    kit.build(out)
    return out


def test_no_answers_no_hidden_cases(built):
    assert kit_support.answer_definitions(built, CHAPTERS) == []
    assert kit_support.solution_regions(built) == []
    assert kit_support.hidden_leaks(built, CHAPTERS) == []
    assert kit_support.mistake_sources(built, CHAPTERS) == []


def test_same_verdicts_as_the_repository(built, tmp_path):
    got, want = kit_support.compare_verdicts(built, CHAPTERS, tmp_path)
    assert got.keys() == want.keys()
    for k in want:
        if k[1] == "mutant":
            assert want[k][0] == "fail", k
    assert {k[0].split(".")[0] for k in want if k[1] == "mutant"} == {
        TABLES[c].module for c in CHAPTERS}
    assert {k: (got[k], want[k]) for k in want if got[k] != want[k]} == {}


def test_readme_lists_every_check_that_does_not_run(built):
    text = (built / "README.md").read_text()
    for ch in CHAPTERS:
        data = json.loads((built / "autograder" / "checks" / "kit_data"
                           / f"{TABLES[ch].module}.json").read_text())
        for d in data["checks"]:
            if d.get("absent") or d.get("post_note"):
                assert f"{ch} {d['exercise']} `{d['name']}`" in text


def test_chapter_08_without_06_runs_its_experiments(tmp_path):
    """Without chapter 06 in the kit, the GPT's forward pass may go in: 08's train_step and
    estimate_loss checks (experiments on transformer_ref's GPT) then run in the kit too."""
    out = tmp_path / "kit-08"
    kit.build(out, ["08_training"])
    key = table.keys("autograder.checks.training")
    data = {d["key"]: d for d in json.loads(
        (out / "autograder" / "checks" / "kit_data" / "training.json").read_text())["checks"]}
    assert data[key["train_step"]].get("wrapper")
    assert data[key["estimate_loss"]].get("wrapper")
    assert data[key["checkpoint"]].get("absent")
    assert kit_support.answer_definitions(out, ["08_training"]) == []
    (tmp_path / "run").mkdir()
    got, want = kit_support.compare_verdicts(out, ["08_training"], tmp_path / "run")
    assert {k[0] for k in want} >= {key["train_step"], key["estimate_loss"]}
    assert {k: (got[k], want[k]) for k in want if got[k] != want[k]} == {}
