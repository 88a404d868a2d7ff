"""Chapter 07 (BPE) graded with trusted verdicts: two students, each row exact.

=================  ==========================================================  ================
student            what the submission does                                    expected
=================  ==========================================================  ================
given_redefined    the solution; its Exercise 3.1 answer cell also redefines   18/18, no flag
                   the given (locked) helpers ``pretoken_counts`` and
                   ``merge_ids`` (the same behaviour, written differently).
                   The source policy used to refuse that cell (3.1: 0)
reference          the solution, except Exercise 4.1 imports the reference      4.1: 0, output
                   trainer (``transformer_ref.bpe.train_bpe``) and, failing     missing, flagged
                   that, reads its source file: the graded kernel has neither;  on 4.1 only;
                   Exercise 5.2 encodes with ``tiktoken`` built from the given  5.2: 0 (used
                   ranks (the graded kernel's tiktoken has no code)             the reference);
                                                                                rest full
=================  ==========================================================  ================
"""

from __future__ import annotations

from pathlib import Path

from autograder.checks import table

from .verdict_class import Row
from helpers.synthetic_class import ClassBuilder

EX = table.rows("07_bpe")  # {function: exercise row} of the chapter

REDEFINED = '''

def pretoken_counts(text, special_tokens=()):
    pieces = [text]
    for tok in sorted(special_tokens, key=len, reverse=True):
        pieces = [part for piece in pieces for part in piece.split(tok)]
    counts = Counter()
    for piece in pieces:
        counts.update(pretokenize(piece))
    return counts


def merge_ids(word, a, b, new):
    out = []
    for x in word:
        if out and out[-1] == a and x == b:
            out[-1] = new
        else:
            out.append(x)
    return tuple(out)
'''

REFERENCE = '''
try:
    from transformer_ref.bpe import train_bpe as train_bpe_fast
except ImportError:
    import pathlib

    import transformer_ref

    _src = pathlib.Path(transformer_ref.__file__).parent / "bpe" / "train.py"
    _code = _src.read_text()  # not there either: the kernel's transformer_ref is data only
'''

TIKTOKEN = '''
def encode(text, ranks, special_tokens):
    # tiktoken's encoder built from the given ranks (the notebook's last section does it)
    enc = tiktoken.Encoding(name="mine", pat_str=GPT2_PATTERN, mergeable_ranks=dict(ranks),
                            special_tokens=dict(special_tokens))
    return enc.encode(text, allowed_special="all")
'''
ANSWERS = {EX["train_bpe_fast"].solution_id: REFERENCE, EX["encode"].solution_id: TIKTOKEN}


class BpeClassBuilder(ClassBuilder):
    def build_attacks(self, dest: Path) -> dict[str, dict[str, Row]]:
        full = self.full_marks(Row, "", "")
        expected: dict[str, dict[str, Row]] = {}

        put = self.writer(dest)

        put("given_redefined", self.answered(
            lambda gid, src: src + REDEFINED if gid == EX["train_bpe_naive"].solution_id else src))
        expected["given_redefined"] = dict(full)

        put("reference", self.answered(lambda gid, src: ANSWERS.get(gid, src)))
        expected["reference"] = dict(full)
        expected["reference"][EX["train_bpe_fast"].grade_id] = Row(
            "0", "graded", "output missing", "imports the reference implementation")
        expected["reference"][EX["encode"].grade_id] = Row(
            "0", "graded", "used the reference implementation", "")
        return expected
