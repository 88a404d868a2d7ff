"""Chapter 07 (BPE) judged outside the kernel: the probe records, the grader decides.

The right answers and the wrong implementations are those of ``test_checks_bpe.py`` (written
the way a student would, independently of the catalogue); here each goes through the trusted
path (``verdict_helpers.judged``), as ``course-grade`` does since chapter 07 is in
``exercises.CONVERTED``. Outputs are plain Python values (dicts of pair counts, merges lists,
token lists, bytes, str) compared exactly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import nbformat
import pytest

from autograder.checks import _codec
from autograder.checks import bpe as B
from autograder.grading import exercises
from autograder.grading.autograde import kernel_package

from helpers.answers.bpe import CHECKS, GOOD, KEY, WRONG
from helpers.verdict import judged

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "solutions/07_bpe/07_bpe.ipynb"


def _solutions() -> dict:
    nb = nbformat.read(SOURCE, as_version=4)
    ns: dict = {}
    exec("import re\nfrom collections import Counter\nimport regex\n"
         "from transformer_ref.bpe import GPT2_PATTERN\nEOW = '</w>'\n"
         "pretokenize = regex.compile(GPT2_PATTERN).findall", ns)
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        given = meta.get("locked") and "def pretoken_counts(" in c.source  # Ex 3.1's helpers
        if meta.get("solution") or given:
            exec(c.source, ns)
    return ns


def test_chapter_is_converted():
    assert "bpe" in exercises.CONVERTED
    src = nbformat.read(SOURCE, as_version=4)
    assert sorted(k for ks in exercises.converted_keys(src).values() for k in ks) == sorted(CHECKS)


def test_counters_travel_as_dicts():
    back = _codec.loads(_codec.dumps((Counter({("a", "b"): 2}), defaultdict(int, {1: 2}))))
    assert back == ({("a", "b"): 2}, {1: 2}) and all(type(d) is dict for d in back)


@pytest.mark.parametrize("key", sorted(GOOD))
def test_solution_and_a_different_right_answer_pass(key):
    check = CHECKS[key]
    for fn in (_solutions()[check.name], GOOD[key]):
        v = judged(check, fn)
        assert v.passed and v.diagnosis == "", v.message


# Exercise 4.1 shares 3.1's catalogue (and cases); its wrong trainers are naive-speed, and the
# probe times a function whose cases all ran (up to 4 x 200,000 characters): its speed stage
# is judged in tests/slow/test_bpe_speed.py.
TRAINERS = [w for w in WRONG if w[0] != KEY["train_bpe_fast"]]
FAST, NAIVE = CHECKS[KEY["train_bpe_fast"]], CHECKS[KEY["train_bpe_naive"]]


def test_the_fast_trainer_shares_the_naive_one_s_catalogue_and_cases():
    # the fast trainer's catalogue is the naive one's plus its own (an incremental update's
    # slips, e.g. the merged word's new pairs not counted)
    assert FAST.mistakes[:len(NAIVE.mistakes)] == NAIVE.mistakes
    assert len(FAST.mistakes) > len(NAIVE.mistakes)
    assert FAST.cases is NAIVE.cases


@pytest.mark.parametrize("key,wrong,name,_", TRAINERS,
                         ids=[f"{w[0][4:]}: {w[2]}" for w in TRAINERS])
def test_catalogued_mistake_is_named_from_the_record(key, wrong, name, _):
    v = judged(CHECKS[key], wrong)
    assert not v.passed and v.diagnosis == name, v.message
    assert f"Likely mistake: {name}." in v.message


def test_kernel_gets_no_reference_implementation(tmp_path):
    src = nbformat.read(SOURCE, as_version=4)
    spec = kernel_package.prepare(tmp_path, [src])
    assert spec["mount_ref"] is False
    ref = Path(spec["ref_package"])
    files = sorted(str(p.relative_to(ref)) for p in ref.rglob("*.py"))
    assert files == ["__init__.py", "bpe/__init__.py", "corpus.py"]
    assert "train_bpe" not in (ref / "bpe" / "__init__.py").read_text()
    stub = (Path(spec["package"]) / "checks" / "bpe.py").read_text()
    assert "EOW = '</w>'" in stub and f"SPEED_VOCAB = {B.SPEED_VOCAB}" in stub
    assert "transformer_ref" not in stub


def test_the_kernel_s_corpus_reads_the_plays_converted_once_per_class(tmp_path):
    # the kernel's copy of transformer_ref.corpus comes with the plays converted (built once
    # per class, by the real module): the notebook's load_shakespeare gives the same text
    # without converting the markdown again
    import subprocess
    import sys

    from transformer_ref import corpus

    src = nbformat.read(SOURCE, as_version=4)
    spec = kernel_package.prepare(tmp_path, [src])
    ref = Path(spec["ref_package"])
    assert (ref / corpus.CONVERTED).is_file()
    code = (
        "import hashlib, transformer_ref.corpus as c\n"
        f"assert c.__file__.startswith({str(ref)!r}), c.__file__\n"
        "c.markdown_to_plain = None  # would fail if called\n"
        "print(hashlib.sha256(c.load_shakespeare('all').encode()).hexdigest())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ref.parent)},
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    import hashlib

    assert out.stdout.strip() == hashlib.sha256(
        corpus.load_shakespeare("all").encode()).hexdigest()
