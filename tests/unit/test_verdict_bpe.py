"""Chapter 07 (BPE) judged outside the kernel, what is its own: counters travel as dicts, the
fast trainer shares the naive one's catalogue, the kernel's package and corpus. Right answers
and catalogued mistakes from the record, in every chapter: ``test_verdict_chapters.py``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import nbformat

from autograder.checks import _codec
from autograder.checks import bpe as B
from autograder.grading.autograde import kernel_package

from helpers.answers.bpe import CHECKS, KEY

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "solutions/07_bpe/07_bpe.ipynb"


def test_counters_travel_as_dicts():
    back = _codec.loads(_codec.dumps((Counter({("a", "b"): 2}), defaultdict(int, {1: 2}))))
    assert back == ({("a", "b"): 2}, {1: 2}) and all(type(d) is dict for d in back)


FAST, NAIVE = CHECKS[KEY["train_bpe_fast"]], CHECKS[KEY["train_bpe_naive"]]


def test_the_fast_trainer_shares_the_naive_one_s_catalogue_and_cases():
    # the fast trainer's catalogue is the naive one's plus its own (an incremental update's
    # slips, e.g. the merged word's new pairs not counted)
    assert FAST.mistakes[:len(NAIVE.mistakes)] == NAIVE.mistakes
    assert len(FAST.mistakes) > len(NAIVE.mistakes)
    assert FAST.cases is NAIVE.cases


def test_kernel_gets_no_reference_implementation(tmp_path):
    src = nbformat.read(SOURCE, as_version=4)
    spec = kernel_package.prepare(tmp_path, [src])
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
