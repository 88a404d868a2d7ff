"""The exercise table: every chapter's exercises, stated once.

One row per exercise: its number, title, the function the student writes, points and
expected minutes. Everything else is derived from the row:

* the nbgrader grade ids ``ex<N>_<M>_<function>`` (test cell) and ``ex<N>_<M>_solution``
  (answer cell), and the check key ``<module>.<function>``;
* in the chapter source ``solutions/NN_x/NN_x.py``, filled in by ``python -m
  autograder.release``: each test cell (its nbgrader metadata, the visible
  ``check_<function>(...)`` call and the hidden ``_hidden_check(key, ...)``), each answer
  cell's grade id, each exercise heading's title, points and minutes, and the points summary
  in the first cell;
* in the chapter's check module, each ``Check``'s key, exercise label and name
  (:func:`identity`) and the keys of the earlier exercises it uses (:func:`uses`);
* ``course-check``'s labels and the tests' maps from check keys to declarations
  (:func:`keys`).

The cases (visible and hidden) and the mistake catalogue stay in the chapter's check module,
in the ``Check(...)`` declaration registered under the key: the trusted verdict code reads them
there. :meth:`Exercise.declaration` returns it, so the table shows them too::

    python -m autograder.checks.table 01_attention

A cross-check (``tests/unit/test_exercise_table.py``) makes sure the declarations, the sources and
the generated notebooks agree with this table.

>>> ex = exercise("01_attention", "2.1")
>>> ex.grade_id, ex.key, ex.points
('ex2_1_softmax', 'attention.softmax', 2)
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    number: str  # "2.1": section 2, first exercise
    title: str  # the heading's text: "### Exercise 2.1 — <title>  *(2 points, ~15 min)*"
    function: str  # what the student writes; also the check's name
    points: int
    minutes: int  # expected time, shown in the heading
    tag: str = ""  # after the number in the heading: "(challenge)"
    note: str = ""  # after the minutes in the heading and the points summary: "harder"
    # names the check is called with, when not the one function (a tuple of them)
    arguments: tuple[str, ...] = ()
    module: str = ""  # the chapter's check module (set by Chapter)

    @property
    def grade_id(self) -> str:
        return f"ex{self.number.replace('.', '_')}_{self.function}"

    @property
    def solution_id(self) -> str:
        """The grade id of the exercise's answer cell (nbgrader ``solution: true``)."""
        return f"ex{self.number.replace('.', '_')}_solution"

    @property
    def key(self) -> str:
        """The check's registry key, ``<module>.<function>``."""
        return f"{self.module}.{self.function}"

    @property
    def label(self) -> str:
        return f"Exercise {self.number}"

    def undefined(self, error: str) -> str | None:
        """The function of this exercise that ``error`` (``"NameError: name 'f' is not
        defined"``, as a cell's error output reads) says was never defined: its answer cell
        did not run, or defines another name.

        >>> exercise("01_attention", "2.1").undefined("NameError: name 'softmax' is not defined")
        'softmax'
        """
        m = re.fullmatch(r"NameError: name '(\w+)' is not defined", str(error).strip())
        return m.group(1) if m and m.group(1) in (self.arguments or (self.function,)) else None

    def declaration(self):
        """The registered ``Check`` (cases, mistakes) of this exercise."""
        from autograder.checks._core import get_check

        importlib.import_module(f"autograder.checks.{self.module}")
        return get_check(self.key)

    @property
    def visible_cases(self) -> tuple:
        return tuple(c for c in self.declaration().cases if not c.hidden)

    @property
    def hidden_cases(self) -> tuple:
        return tuple(c for c in self.declaration().cases if c.hidden)

    @property
    def mistakes(self) -> tuple:
        return self.declaration().mistakes


@dataclass(frozen=True)
class Chapter:
    module: str  # autograder/checks/<module>.py holds the declarations
    exercises: tuple[Exercise, ...]
    # the hidden test wraps the function in the chapter module's ``probe`` (chapter 08)
    probe: bool = False
    # the reference implementations of these exercises, which the kernel that runs a graded
    # call cannot import (autograder/grading/autograde/reference.py): "module" (all of it),
    # "module:function", "module:Class" (every method) or "module:Class.method"
    reference: tuple[str, ...] = ()

    def __post_init__(self):
        rows = tuple(Exercise(**{**e.__dict__, "module": self.module}) for e in self.exercises)
        object.__setattr__(self, "exercises", rows)

    @property
    def points(self) -> int:
        return sum(e.points for e in self.exercises)


TABLES: dict[str, Chapter] = {
    "01_attention": Chapter(
        "attention",
        (
            Exercise("1.1", "all pairwise dot products", "dot_product_scores", 1, 5),
            Exercise("2.1", "a numerically stable softmax", "softmax", 2, 15),
            Exercise(
                "3.1",
                "self-attention in numpy (the wiki page [S3])",
                "self_attention_unscaled",
                2,
                10,
            ),
            Exercise("4.1", "measure Var(q · k)", "score_variance", 1, 5),
            Exercise("5.1", "scaled dot-product attention", "scaled_dot_product_attention", 4, 25),
            Exercise(
                "6.1",
                "[S1]'s formula, literally",
                "column_form_self_attention",
                3,
                15,
            ),
            Exercise("7.1", "cosine-similarity attention", "cosine_similarity_attention", 2, 10),
            Exercise("8.1", "how often does the diagonal win?", "self_score_dominance", 1, 5),
        ),
        reference=(
            "transformer_ref.attention",
            "transformer_ref.numpy_ref",
        ),
    ),
    "02_masking": Chapter(
        "masking",
        (
            Exercise("1.1", "the causal mask", "causal_mask", 1, 5),
            Exercise("1.2", "boolean to additive", "to_additive", 1, 5),
            Exercise("2.1", "padding mask from lengths", "padding_mask_from_lengths", 1, 5),
            Exercise("2.2", "padding mask from token ids", "padding_mask_from_ids", 1, 5),
            Exercise(
                "2.3", "the decoder's self-attention mask", "decoder_self_attention_mask", 1, 5
            ),
            Exercise("3.1", "masked attention that never gives `nan`", "masked_attention", 3, 15),
            Exercise("4.1", "perturb the future", "future_leak", 1, 5),
            Exercise("4.2", "the gradient view", "grad_of_position", 1, 5),
        ),
        reference=(
            "transformer_ref.masks",
            "transformer_ref.attention",
        ),
    ),
    "03_multihead_attention": Chapter(
        "multihead_attention",
        (
            Exercise(
                "1.1",
                "[S1]'s MSA as a loop over heads",
                "msa_loop",
                2,
                10,
            ),
            Exercise("2.1", "split the heads", "split_heads", 1, 5),
            Exercise("2.2", "merge the heads", "merge_heads", 1, 5),
            Exercise("3.1", "multi-head attention", "multi_head_attention", 4, 20),
            Exercise(
                "3.2", "parameters of a multi-head attention layer", "mha_parameter_count", 1, 3
            ),
            Exercise("3.3", "fused QKV", "fused_qkv", 1, 3),
            Exercise("5.1", "PyTorch's weights in our row form", "weights_from_torch", 2, 10),
        ),
        reference=("transformer_ref.mha",),
    ),
    "04_layer_norm": Chapter(
        "layer_norm",
        (
            Exercise("2.1", "LayerNorm in numpy", "layer_norm_np", 2, 10),
            Exercise("2.2", "LayerNorm in PyTorch", "layer_norm", 2, 5),
            Exercise(
                "3.1",
                "LayerNorm's gradient without autograd",
                "layer_norm_backward",
                4,
                25,
                note="harder",
            ),
            Exercise("4.1", "RMSNorm", "rms_norm", 1, 5),
        ),
        reference=(
            "transformer_ref.norms",
            "transformer_ref.numpy_ref:layer_norm",
        ),
    ),
    "05_feed_forward_blocks": Chapter(
        "feed_forward_blocks",
        (
            Exercise("1.1", "the feed-forward network", "feed_forward", 2, 10),
            Exercise("1.2", "FFN with `F.conv1d`", "ffn_as_conv1d", 2, 10),
            Exercise("1.3", "FFN parameter count", "ffn_param_count", 1, 5),
            Exercise("1.4", "SwiGLU", "swiglu_ffn", 1, 5),
            Exercise("2.1", "the post-LN block (the tutorial [S2])", "post_ln_block", 2, 5),
            Exercise(
                "2.2", "the pre-LN block (the lecture notes [S1])", "pre_ln_block", 2, 5
            ),
            Exercise("3.1", "gradient norm per block", "grad_norm_per_layer", 2, 10),
        ),
        reference=(
            "transformer_ref.ffn",
            "transformer_ref.blocks:SelfAttentionBlock.forward",
            "transformer_ref.blocks:pre_ln_block",
            "transformer_ref.blocks:post_ln_block",
        ),
    ),
    "06_transformer": Chapter(
        "transformer",
        (
            Exercise("1.1", "measure equivariance", "equivariance_gap", 1, 5),
            Exercise("2.1", "the sinusoidal table", "sinusoidal_encoding", 2, 10),
            Exercise("2.2", "rotary positions (RoPE)", "apply_rope", 2, 15),
            Exercise("3.1", "the decoder block", "decoder_block", 3, 15),
            Exercise("4.1", "the GPT forward pass", "gpt_logits", 3, 15),
            Exercise("5.1", "logits token by token", "incremental_logits", 2, 10),
        ),
        reference=(
            "transformer_ref.positional:sinusoidal_encoding",
            "transformer_ref.positional:apply_rope",
            "transformer_ref.positional:RotaryEmbedding.forward",
            "transformer_ref.blocks:DecoderBlock.forward",
            "transformer_ref.models:GPT.forward",
            "transformer_ref.models:gpt_logits",
        ),
    ),
    "07_bpe": Chapter(
        "bpe",
        (
            Exercise("2.1", "count the pairs", "count_pairs", 1, 5),
            Exercise("2.2", "apply one merge", "merge_pair", 1, 5),
            Exercise("2.3", "the training loop", "train_classic_bpe", 2, 10),
            Exercise("2.4", "encode a new word", "encode_word", 1, 5),
            Exercise("2.5", "decode", "decode_symbols", 1, 3),
            Exercise("3.1", "the naive byte-level trainer", "train_bpe_naive", 2, 12),
            Exercise("4.1", "the incremental trainer", "train_bpe_fast", 3, 25, tag="(challenge)"),
            Exercise("5.1", "encode one pre-token", "encode_piece", 2, 8),
            Exercise("5.2", "encode text", "encode", 2, 8),
            Exercise("5.3", "decode", "decode", 1, 4),
        ),
        reference=(
            "transformer_ref.bpe",
            "tiktoken",
        ),
    ),
    "08_training": Chapter(
        "training",
        (
            Exercise("1.1", "`get_batch`", "get_batch", 2, 10),
            Exercise("2.1", "`cross_entropy`", "cross_entropy", 2, 10),
            Exercise("3.1", "warm-up + cosine `get_lr`", "get_lr", 2, 10),
            Exercise("3.2", "one training step with gradient clipping", "train_step", 3, 15),
            Exercise("3.3", "AdamW from scratch", "AdamW", 3, 20),
            Exercise("4.1", "`estimate_loss`", "estimate_loss", 2, 10),
            Exercise(
                "5.1",
                "`save_checkpoint` and `load_checkpoint`",
                "checkpoint",
                3,
                10,
                arguments=("save_checkpoint", "load_checkpoint"),
            ),
            Exercise("6.1", "`sample_next_token`", "sample_next_token", 3, 20),
        ),
        probe=True,
        reference=(
            "transformer_ref.train.data:get_batch",
            "transformer_ref.train.data:batch_offsets",
            "transformer_ref.train.trainer:get_lr",
            "transformer_ref.train.trainer:Trainer",
            "transformer_ref.train.optim:AdamW",
            "transformer_ref.train.trainer:train_step",
            "transformer_ref.train.trainer:estimate_loss",
            "transformer_ref.train.checkpoint",
            "transformer_ref.sampling",
        ),
        # every train_step case builds an AdamW optimizer; PyTorch imports torch._dynamo at the
        # first one (about 3 s, most of the chapter's grading time in the kernel)
    ),
}


def chapter(name: str) -> Chapter:
    """The table of chapter ``name`` (a folder of solutions/, e.g. ``"01_attention"``)."""
    return TABLES[name]


def exercise(name: str, number: str) -> Exercise:
    return next(e for e in TABLES[name].exercises if e.number == number)


def rows(name: str) -> dict[str, Exercise]:
    """``{function: Exercise}`` of chapter ``name`` (see :func:`_chapter_of`): code that needs
    an exercise's grade id, answer cell id, key or points names its function and reads them.

    >>> rows("01_attention")["softmax"].grade_id
    'ex2_1_softmax'
    """
    return {e.function: e for e in _chapter_of(name).exercises}


def by_grade_id(grade_id: str) -> Exercise | None:
    """The exercise whose grade id is ``grade_id``, in any chapter (None if none)."""
    for ch in TABLES.values():
        for e in ch.exercises:
            if e.grade_id == grade_id:
                return e
    return None


def by_key(key: str) -> Exercise:
    """The exercise whose check is registered as ``key``."""
    for ch in TABLES.values():
        for e in ch.exercises:
            if e.key == key:
                return e
    raise KeyError(key)


def _chapter_of(name: str) -> Chapter:
    """The chapter ``name`` names: a folder of solutions/ (``"01_attention"``), its check
    module (``"attention"``) or that module's ``__name__`` (``"autograder.checks.attention"``)."""
    if name in TABLES:
        return TABLES[name]
    module = name.rpartition(".")[2]
    for ch in TABLES.values():
        if ch.module == module:
            return ch
    raise KeyError(f"no chapter in autograder/checks/table.py for {name!r}")


def keys(name: str) -> dict[str, str]:
    """``{function: check key}`` of chapter ``name`` (see :func:`_chapter_of`), so code that
    needs a key names the function and takes the key from here.

    >>> keys("autograder.checks.attention")["softmax"]
    'attention.softmax'
    """
    return {e.function: e.key for e in _chapter_of(name).exercises}


def identity(name: str, function: str) -> dict:
    """What a ``Check`` declaration of exercise ``function`` takes from its row: ``key``,
    ``exercise`` (the label its messages show) and ``name`` (the function, or the first of
    the functions it is given). A check module writes ``Check(**identity(__name__, "softmax"),
    cases=..., mistakes=...)``.

    >>> identity("autograder.checks.attention", "softmax")
    {'key': 'attention.softmax', 'exercise': 'Exercise 2.1', 'name': 'softmax'}
    """
    (ex,) = [e for e in _chapter_of(name).exercises if e.function == function]
    return {"key": ex.key, "exercise": ex.label, "name": (ex.arguments or (ex.function,))[0]}


def uses(name: str, *functions: str) -> tuple[tuple[str, str], ...]:
    """``Check.uses`` for a solution that calls earlier exercises ``functions`` of the same
    chapter: ``((function, check key), ...)``.

    >>> uses("autograder.checks.bpe", "merge_pair")
    (('merge_pair', 'bpe.merge_pair'),)
    """
    k = keys(name)
    return tuple((f, k[f]) for f in functions)


def check(name: str, function: str):
    """The ``Check`` declaration of exercise ``function`` of chapter ``name``."""
    return _chapter_of(name).exercises[_functions(name).index(function)].declaration()


def _functions(name: str) -> list[str]:
    return [e.function for e in _chapter_of(name).exercises]


def declarations(name: str) -> dict:
    """``{check key: Check}`` for chapter ``name``: what the tests look checks up in."""
    return {e.key: e.declaration() for e in TABLES[name].exercises}


def describe(name: str) -> str:
    """The chapter's table as text: one block per exercise, with its cases and mistakes."""
    ch, out = TABLES[name], []
    out.append(
        f"{name}: {len(ch.exercises)} exercises, {ch.points} points "
        f"(checks in autograder/checks/{ch.module}.py)"
    )
    for e in ch.exercises:
        out.append(
            f"\n{e.label} — {e.title} ({e.points} pt, ~{e.minutes} min)\n"
            f"  function {e.function}, grade id {e.grade_id}, check {e.key}\n"
            f"  cases: {len(e.visible_cases)} visible, {len(e.hidden_cases)} hidden"
        )
        out += [f"  mistake: {m.name}" for m in e.mistakes]
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    for n in sys.argv[1:] or list(TABLES):
        print(describe(n))
