"""Cascade diagnosis (issue 18 item 3): a check whose exercise calls the student's earlier
function checks that function first and, when it fails, says so, naming it and its exercise.

Each case below is the solution notebook's own code up to the later exercise (the student
who solved everything), with ONE earlier function replaced by a wrong one written the way a
student would. The later function itself is the solution: only the earlier one is wrong.
"""

import json

import pytest

from autograder import mutation as M
from autograder.checks import CheckFailed, _core, _judge, _probe, hidden_check, table
from autograder.checks._core import get_check

WRONG = {
    # softmax without subtracting the max: overflows to nan on large scores
    "softmax": "def softmax(x, axis=-1):\n"
    "    e = np.exp(x)\n"
    "    return e / e.sum(axis=axis, keepdims=True)\n",
    # the diagonal masked too: a token cannot see itself
    "causal_mask": "def causal_mask(T):\n"
    "    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)\n",
    # each pair counted once per distinct word, not once per occurrence of the word
    "count_pairs": "def count_pairs(word_counts):\n"
    "    pairs = {}\n"
    "    for word in word_counts:\n"
    "        for pair in zip(word, word[1:]):\n"
    "            pairs[pair] = pairs.get(pair, 0) + 1\n"
    "    return pairs\n",
    # merges the leftmost known pair first instead of the lowest-ranked one
    "encode_piece": "def encode_piece(piece, ranks):\n"
    "    parts = [piece[i:i + 1] for i in range(len(piece))]\n"
    "    while True:\n"
    "        known = [i for i in range(len(parts) - 1) if parts[i] + parts[i + 1] in ranks]\n"
    "        if not known:\n"
    "            break\n"
    "        i = known[0]\n"
    "        parts[i:i + 2] = [parts[i] + parts[i + 1]]\n"
    "    return [ranks[p] for p in parts]\n",
    # positions always counted from 0: with a cache, token t gets position 0
    "gpt_logits": "def gpt_logits(idx, model, start=0, cache=None):\n"
    "    positions = torch.arange(idx.shape[1])\n"
    "    x = model.wte(idx) + model.wpe(positions)\n"
    "    for i, blk in enumerate(model.blocks):\n"
    "        x = blk(x, is_causal=True, cache=None if cache is None else cache[i])\n"
    "    return model.lm_head(model.ln_f(x))\n",
    # summed over the positions instead of averaged: the loss grows with B * T
    "cross_entropy": "def cross_entropy(logits, targets):\n"
    "    z = logits.reshape(-1, logits.shape[-1])\n"
    "    logp = torch.log_softmax(z, dim=-1)\n"
    "    return -logp[torch.arange(z.shape[0]), targets.reshape(-1)].sum()\n",
    # targets not shifted: y is x itself, the model learns to copy its input
    "get_batch": "def get_batch(data, batch_size, block_size, generator=None):\n"
    "    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)\n"
    "    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64))\n"
    "                     for i in ix.tolist()])\n"
    "    return x, x.clone()\n",
}

A01 = table.rows("01_attention")
UNSCALED = A01["self_attention_unscaled"].key  # Exercise 3.1, which calls softmax

GAPS = [  # (notebook, later exercise's check key, the earlier function made wrong, its exercise)
    ("01", UNSCALED, "softmax", "Exercise 2.1"),
    ("02", table.keys("02_masking")["decoder_self_attention_mask"], "causal_mask", "Exercise 1.1"),
    ("06", table.keys("06_transformer")["incremental_logits"], "gpt_logits", "Exercise 4.1"),
    ("07", table.keys("07_bpe")["train_classic_bpe"], "count_pairs", "Exercise 2.1"),
    ("07", table.keys("07_bpe")["train_bpe_naive"], "count_pairs", "Exercise 2.1"),
    ("07", table.keys("07_bpe")["encode"], "encode_piece", "Exercise 5.1"),
]


def _student(notebook: str, key: str, wrong: str | None):
    """The solution's function for ``key``, defined after the notebook's earlier code, with
    the earlier function ``wrong`` replaced by its wrong version."""
    ex = next(e for e in M.exercises(M.notebooks(notebook)[0]) if e.key == key)
    ns = M._base_namespace(ex)
    if wrong is not None:
        exec(WRONG[wrong], ns)
    return M._define(ex, ns, ex.cell)


@pytest.mark.parametrize("notebook,key,wrong,exercise", GAPS, ids=[g[1] for g in GAPS])
def test_a_failing_earlier_function_is_named(notebook, key, wrong, exercise, monkeypatch):
    monkeypatch.setenv("COURSE_SMOKE", "1")
    fn = _student(notebook, key, wrong)
    with pytest.raises(CheckFailed) as info:
        hidden_check(key, fn)
    msg = str(info.value)
    check = get_check(key)
    assert msg.startswith(f"{check.exercise} `{check.name}` uses your `{wrong}` ({exercise}), "
                          "which fails its check"), msg
    assert f"{exercise} `{wrong}`" in msg  # the earlier check's own message follows


def test_the_earlier_checks_own_diagnosis_follows():
    try:
        hidden_check(UNSCALED,
                     _student("01", UNSCALED, "softmax"))
    except CheckFailed as e:
        msg = str(e)
    assert "  |   Likely mistake: unstable softmax overflowing." in msg, msg


def test_a_function_that_does_not_call_the_earlier_one_is_judged_alone(capsys):
    """The student inlined the softmax: a wrong `softmax` elsewhere in the notebook is not
    this exercise's business."""
    ns = M._base_namespace(next(e for e in M.exercises(M.notebooks("01")[0])
                                if e.key == UNSCALED))
    exec(WRONG["softmax"], ns)
    exec("def self_attention_unscaled(X, W_Q, W_K, W_V):\n"
         "    S = (X @ W_Q) @ np.swapaxes(X @ W_K, -1, -2)\n"
         "    e = np.exp(S - S.max(axis=-1, keepdims=True))\n"
         "    return e / e.sum(axis=-1, keepdims=True) @ (X @ W_V)\n", ns)
    assert not _core.calls_name(ns["self_attention_unscaled"], "softmax")
    hidden_check(UNSCALED, ns["self_attention_unscaled"])
    assert "✔" in capsys.readouterr().out


def test_trusted_verdict_names_the_failing_earlier_function(tmp_path):
    """The graded path of a converted chapter (01): the kernel's probe records the earlier
    function on its own check's cases, the grader judges it first."""
    later = get_check(UNSCALED)
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    for key in (UNSCALED, A01["softmax"].key,
                A01["dot_product_scores"].key):
        text = json.dumps(_judge.case_inputs(get_check(key)))
        (tmp_path / "in" / f"{key}.json").write_text(text)

    def verdict(wrong):
        _probe.run(str(tmp_path), later.key, _student("01", UNSCALED, wrong),
                   sink=(tmp_path / "out" / f"{later.key}.json").write_text)
        record = json.loads((tmp_path / "out" / f"{later.key}.json").read_text())
        return _judge.judge(later, record)

    v = verdict("softmax")
    assert not v.passed and v.diagnosis == "uses failing softmax (Exercise 2.1)", v
    assert v.message.startswith("Exercise 3.1 `self_attention_unscaled` uses your `softmax` "
                                "(Exercise 2.1), which fails its check"), v.message
    assert verdict(None).passed


def test_the_rows_diagnosis_names_the_cascade_as_a_failure_kind():
    """grades.csv's diagnosis (from the test cell's error) says which earlier function fails,
    not the earlier exercise's own mistake quoted under it; the report counts it as a
    failure kind, not as a catalogued mistake of this exercise."""
    from autograder.grading.parent.diagnosis import diagnose, is_failure_kind
    from autograder.grading.status import Kind

    try:
        hidden_check(UNSCALED,
                     _student("01", UNSCALED, "softmax"))
    except CheckFailed as e:
        msg = str(e)
    d = diagnose(Kind.GRADED, "0", "2", [{"output_type": "error", "ename": "CheckFailed",
                                        "evalue": msg}])
    assert d == "uses failing softmax (Exercise 2.1)" and is_failure_kind(d)


GAPS_08 = [  # notebook 08: judged outside the kernel from what its drivers record
    (table.keys("08_training")["train_step"], "cross_entropy", "Exercise 2.1"),
    (table.keys("08_training")["estimate_loss"], "get_batch", "Exercise 1.1"),
]


# notebook 08's cells up to the exercise, and a tiny GPT trained: ~30 s
@pytest.mark.parametrize("key,wrong,exercise", GAPS_08, ids=[g[0] for g in GAPS_08])
def test_trusted_verdict_names_the_failing_earlier_function_in_08(
    key, wrong, exercise, tmp_path, monkeypatch
):
    """08's graded kernel hands the student's function to a driver (_training_drivers); the
    probe must still find the earlier function the student's code calls, record it on its
    own check's cases, and the grader judge that first."""
    from autograder.checks import _training_drivers, training  # noqa: F401  (registers)

    monkeypatch.setenv("COURSE_SMOKE", "1")
    later = get_check(key)
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    for k in [key] + [k for _, k in later.uses]:
        (tmp_path / "in" / f"{k}.json").write_text(json.dumps(_judge.case_inputs(get_check(k))))

    def verdict(wrong, given=None):
        student = _student("08", key, wrong).student  # (the in-kernel check's probe around it)
        fn = _training_drivers.probe(key, student)
        _probe.run(str(tmp_path), key, fn, sink=(tmp_path / "out" / f"{key}.json").write_text,
                   given=given)
        return _judge.judge(later, json.loads((tmp_path / "out" / f"{key}.json").read_text()))

    v = verdict(wrong)
    assert not v.passed and v.diagnosis == f"uses failing {wrong} ({exercise})", v
    assert v.message.startswith(f"{later.exercise} `{later.name}` uses your `{wrong}` "
                                f"({exercise}), which fails its check"), v.message
    assert verdict(None).passed
    # with the given earlier function release writes into the test cell: one mistake costs
    # one exercise
    v = verdict(wrong, _given_of("08", key))
    assert v.passed and f"judged with the given `{wrong}` in its place, and passes" in v.message


# ---------------------------------------------------------------- one mistake, one exercise
def _given_of(notebook: str, key: str) -> dict:
    """The ``_given`` sources release wrote into the hidden part of ``key``'s test cell."""
    import ast

    import nbformat

    (path,) = (M.ROOT / "solutions").glob(f"{notebook}_*/{notebook}_*.ipynb")
    nb = nbformat.read(path, as_version=4)
    grade_id = next(e.grade_id for ch in table.TABLES.values() for e in ch.exercises
                    if e.key == key)
    (cell,) = [c for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_given":
            return ast.literal_eval(node.value)
    raise AssertionError(f"no _given in the test cell of {key}")


@pytest.mark.parametrize("notebook,key,wrong,exercise", GAPS, ids=[g[1] for g in GAPS])
def test_judged_with_the_given_earlier_function(notebook, key, wrong, exercise, monkeypatch,
                                                capsys):
    """The hidden check of the graded path, given the answers release wrote into the test
    cell: the later function, right in itself, passes with the given earlier one."""
    monkeypatch.setenv("COURSE_SMOKE", "1")
    given = _given_of(notebook, key)
    assert wrong in given and "BEGIN SOLUTION" not in given[wrong]
    hidden_check(key, _student(notebook, key, wrong), given=given)
    check = get_check(key)
    out = capsys.readouterr().out
    assert f"{check.exercise} `{check.name}` uses your `{wrong}` ({exercise}), which fails its " \
           f"check: it was judged with the given `{wrong}` in its place, and passes" in out, out


WRONG_UNSCALED = (  # scaled by 1/sqrt(d_k), which Exercise 3.1 leaves out
    "def self_attention_unscaled(X, W_Q, W_K, W_V):\n"
    "    Q, K, V = X @ W_Q, X @ W_K, X @ W_V\n"
    "    return softmax(dot_product_scores(Q, K) / np.sqrt(Q.shape[-1])) @ V\n")
SOFTMAX_IN_PLACE = (  # right values, but the student's input is changed in place
    "def softmax(x, axis=-1):\n"
    "    m = np.max(x, axis=axis, keepdims=True)\n"
    "    x -= np.where(np.isfinite(m), m, 0.0).astype(x.dtype)\n"
    "    e = np.exp(x)\n"
    "    total = e.sum(axis=axis, keepdims=True)\n"
    "    return e / np.where(total == 0, 1.0, total).astype(x.dtype)\n")


def _probe_dir(tmp_path, keys):
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    for key in keys:
        text = json.dumps(_judge.case_inputs(get_check(key)))
        (tmp_path / "in" / f"{key}.json").write_text(text)


def _recorded(tmp_path, key, fn, given):
    out = tmp_path / "out" / f"{key}.json"
    _probe.run(str(tmp_path), key, fn, sink=out.write_text, given=given)
    return json.loads(out.read_text())


def test_trusted_verdict_with_the_given_earlier_function(tmp_path):
    """The graded kernel records the later function a second time with the given earlier one
    where the student's differs; the grader judges that record when the earlier one fails,
    and the row names what happened. A later function wrong in itself still fails, with its
    own mistake."""
    later = get_check(UNSCALED)
    _probe_dir(tmp_path, [UNSCALED, A01["softmax"].key, A01["dot_product_scores"].key])
    given = _given_of("01", UNSCALED)

    rec = _recorded(tmp_path, UNSCALED, _student("01", UNSCALED, "softmax"), given)
    assert rec["given"]["names"] == ["softmax"]
    v = _judge.judge(later, rec)
    assert v.passed and v.diagnosis == "", v
    assert v.message.startswith("Exercise 3.1 `self_attention_unscaled` uses your `softmax` "
                                "(Exercise 2.1), which fails its check: it was judged with the "
                                "given `softmax` in its place, and passes (that mistake costs "
                                "only Exercise 2.1's points)."), v.message
    # the record without its given part: the earlier function's failure is named, as before
    v = _judge.judge(later, {k: x for k, x in rec.items() if k != "given"})
    assert not v.passed and v.diagnosis == "uses failing softmax (Exercise 2.1)", v

    ns = M._base_namespace(next(e for e in M.exercises(M.notebooks("01")[0])
                                if e.key == UNSCALED))
    exec(WRONG["softmax"], ns)
    exec(WRONG_UNSCALED, ns)
    rec = _recorded(tmp_path, UNSCALED, ns["self_attention_unscaled"], given)
    v = _judge.judge(later, rec)
    assert not v.passed and v.message.startswith(
        "Exercise 3.1 `self_attention_unscaled` uses your `softmax` (Exercise 2.1), which fails "
        "its check: it was judged with the given `softmax` in its place, and still fails:"), v
    assert v.diagnosis and not v.diagnosis.startswith("uses failing"), v
    # the student's earlier function left as it was
    assert ns["softmax"].__code__.co_filename == "<string>"


def test_no_second_record_when_the_earlier_function_gives_the_given_results(tmp_path):
    """A right softmax: nothing recorded twice. A softmax that fails its check for another
    reason (it changes its input in place) but returns the given values: not recorded twice
    either, and the later function, whose own results are right, passes."""
    later = get_check(UNSCALED)
    _probe_dir(tmp_path, [UNSCALED, A01["softmax"].key, A01["dot_product_scores"].key])
    given = _given_of("01", UNSCALED)
    rec = _recorded(tmp_path, UNSCALED, _student("01", UNSCALED, None), given)
    assert "given" not in rec and _judge.judge(later, rec).passed

    ns = M._base_namespace(next(e for e in M.exercises(M.notebooks("01")[0])
                                if e.key == UNSCALED))
    exec(SOFTMAX_IN_PLACE, ns)
    fn = M._define(next(e for e in M.exercises(M.notebooks("01")[0]) if e.key == UNSCALED),
                   ns, next(e for e in M.exercises(M.notebooks("01")[0])
                            if e.key == UNSCALED).cell)
    rec = _recorded(tmp_path, UNSCALED, fn, given)
    up = _judge.judge(get_check(A01["softmax"].key), {"cases": rec["uses"]["softmax"]["cases"]})
    assert not up.passed, "the in-place softmax fails its own check"
    assert "given" not in rec
    assert _judge.judge(later, rec).passed


def test_a_forged_given_part_is_not_read_while_the_earlier_function_passes(tmp_path):
    """A kernel that adds a "given" part holding right results to the record of a wrong later
    function, its softmax being right: the grader reads that part only when the earlier
    function fails its own check, so the later one still fails."""
    later = get_check(UNSCALED)
    _probe_dir(tmp_path, [UNSCALED, A01["softmax"].key, A01["dot_product_scores"].key])
    right = _recorded(tmp_path, UNSCALED, _student("01", UNSCALED, None), None)
    ns = M._base_namespace(next(e for e in M.exercises(M.notebooks("01")[0])
                                if e.key == UNSCALED))
    exec(WRONG_UNSCALED, ns)
    forged = _recorded(tmp_path, UNSCALED, ns["self_attention_unscaled"], None)
    forged["given"] = {"names": ["softmax"], "cases": right["cases"], "ops": right["ops"],
                       "functions": right["functions"], "reference": right["reference"]}
    v = _judge.judge(later, forged)
    assert not v.passed and "given" not in v.message, v
