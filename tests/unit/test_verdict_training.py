"""Trusted verdicts for notebook 08 (training): drivers in the kernel, judgement in the grader.

The probe (``_probe.run``) is called in-process on plain functions, as the graded kernel does
with the stub's ``probe`` (``_training_drivers``); the verdict (``_judge.judge``) only sees
the JSON record it wrote, and turns the drivers' plain data into the checks' outputs itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import torch

from autograder.checks import _training_drivers, table, training
from autograder.checks._core import CheckFailed, _run, get_check
from autograder.checks._judge import case_inputs, judge
from autograder.grading.autograde import kernel_package
from autograder.grading.parent import flags as source_flags

from helpers import answer_sets
from helpers.adversarial.training_class import QUANTILES
from helpers.verdict import record

REPO = Path(__file__).resolve().parents[2]
CHAPTER = table.chapter("08_training")
K = table.keys("08_training")  # {function: check key}
KEYS = list(K.values())
# the functions a check is given, when not the one function (checkpoint: save and load)
ARGS = {e.key: e.arguments for e in CHAPTER.exercises if e.arguments}


@pytest.fixture(scope="module")
def solutions() -> dict:
    return answer_sets.solutions("08_training")


def _record(tmp_path: Path, key: str, *fns) -> dict:
    """What a graded kernel records for ``key``: the stub's probe, then the generic probe."""
    return record(tmp_path, get_check(key), _training_drivers.probe(key, *fns))


def _fns(solutions, key):
    names = ARGS.get(key, (get_check(key).name,))
    return [solutions[n] for n in names]


@pytest.mark.parametrize("key", KEYS)
def test_solution_passes(tmp_path, solutions, key):
    v = judge(get_check(key), _record(tmp_path, key, *_fns(solutions, key)))
    assert v.passed, v.message
    assert "cases match the reference" in v.message


def test_blank_is_not_implemented_and_nothing_recorded_is_missing(tmp_path):
    def blank(*a, **k):
        raise NotImplementedError()

    v = judge(get_check(K["train_step"]), _record(tmp_path, K["train_step"], blank))
    assert not v.passed and v.diagnosis == "not implemented"
    assert judge(get_check(K["checkpoint"]), None).diagnosis == "output missing"


def test_the_case_inputs_hold_no_expected_value():
    check = get_check(K["checkpoint"])
    text = json.dumps(case_inputs(check))
    # the state to save is an input; the losses after the restore are not in it
    for case in check.cases:
        losses = case.expected[0]
        assert f'"{float.hex(float(losses[0]))}"' not in text
    inputs = case_inputs(get_check(K["estimate_loss"]))
    ((after_label, _),) = training.DRIVEN[K["estimate_loss"]].extra
    assert inputs["cases"][-1]["label"] == after_label


@pytest.mark.parametrize("key,name", [
    (K["checkpoint"], "saved the model only"),
    (K["sample_next_token"], "top-p drops the token that crosses p"),
])
def test_catalogued_mistake_named_from_the_drivers_data(tmp_path, key, name):
    """The kernel runs the wrong student code; the grader names the mistake from plain data."""
    (mistake,) = [m for m in get_check(key).mistakes if m.name.startswith(name)]
    if key == K["checkpoint"]:
        fns = _mistake_fn(mistake.fn, "save_fn", "load_fn")
    else:
        fns = (_mistake_fn(mistake.fn, "sample_fn"),)
    v = judge(get_check(key), _record(tmp_path, key, *fns))
    assert not v.passed and v.diagnosis.startswith(name), v.message


def test_train_step_mistake_named_from_the_weights_after_the_steps(tmp_path, solutions):
    ce = solutions["cross_entropy"]

    def no_zero_grad(model, optimizer, x, y, grad_clip):  # gradients accumulate
        loss = ce(model(x), y)
        loss.backward()
        with torch.no_grad():
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.sqrt(sum((g * g).sum() for g in grads))
            for g in grads:
                g.mul_(min(1.0, grad_clip / (norm.item() + 1e-6)))
        optimizer.step()
        return loss.item()

    v = judge(get_check(K["train_step"]),
              _record(tmp_path, K["train_step"], no_zero_grad))
    assert not v.passed and v.diagnosis.startswith("forgot optimizer.zero_grad()"), v.message


def _mistake_fn(wrapped, *names):
    """The student-side function(s) inside a catalogued mistake's probe (its closure)."""
    cells = dict(zip(wrapped.__code__.co_freevars, wrapped.__closure__, strict=True))
    drive = cells["drive"].cell_contents
    inner = dict(zip(drive.__code__.co_freevars, drive.__closure__, strict=True))
    fns = tuple(inner[n].cell_contents for n in names)
    return fns if len(fns) > 1 else fns[0]


def test_driver_data_that_is_not_a_result_reads_like_the_in_kernel_check():
    """The grader turns the drivers' data into outputs; what cannot be one raises as the
    in-kernel probe did (the judge reports it as 'your function raised ...')."""
    step = training.DRIVEN[K["train_step"]].output
    resume = training.DRIVEN[K["checkpoint"]].output
    freq = training.DRIVEN[K["sample_next_token"]].output
    (resume_case, *_) = get_check(K["checkpoint"]).cases
    freq_case = SimpleNamespace(args=(torch.zeros(1, 3),))  # logits (1, 3)
    with pytest.raises(TypeError, match="train_step should return the loss as a number, got str"):
        step(None, {"losses": [1.5, "2.0"], "weights": None})
    with pytest.raises(ValueError, match="the experiment's record is malformed"):
        step(None, [1.5])
    with pytest.raises(TypeError, match=r"return the step \(an int\), got float"):
        resume(resume_case, {"step": 3.0, "model": {}, "optimizer": {},
                             "generator": None, "in_place": True})
    with pytest.raises(ValueError, match="replaced the model's parameters"):  # not said in place
        resume(resume_case, {"step": 3, "model": {}, "optimizer": {}, "generator": None})
    with pytest.raises(ValueError, match="should be int64, got torch.int32"):
        freq(freq_case, torch.zeros(40_000, 1, dtype=torch.int32))


def test_estimate_loss_mode_and_autograd_judged_outside(tmp_path, solutions):
    sol = solutions["estimate_loss"]

    def stays_eval(model, data, batch_size, block_size, eval_iters, generator=None):
        out = sol(model, data, batch_size, block_size, eval_iters, generator)
        model.eval()
        return out

    v = judge(get_check(K["estimate_loss"]),
              _record(tmp_path, K["estimate_loss"], stays_eval))
    assert not v.passed and v.diagnosis == "model left in eval mode", v.message
    assert "Likely mistake: model left in eval mode." in v.message, v.message

    def with_grad(model, data, batch_size, block_size, eval_iters, generator=None):
        with torch.enable_grad():
            was = model.training
            model.eval()
            losses = []
            for _ in range(eval_iters):
                x, y = solutions["get_batch"](data, batch_size, block_size, generator)
                losses.append(solutions["cross_entropy"](model(x), y).item())
            model.train(was)
            return sum(losses) / len(losses)

    v = judge(get_check(K["estimate_loss"]),
              _record(tmp_path, K["estimate_loss"], with_grad))
    assert v.diagnosis == "forward passes with autograd on", v.message
    assert "Likely mistake: forward passes with autograd on." in v.message, v.message


def test_reference_called_by_the_student_scores_zero(tmp_path):
    from transformer_ref.sampling import sample_next_token as reference
    from transformer_ref.train.data import get_batch as reference_get_batch

    def get_batch(data, batch_size, block_size, generator=None):
        return reference_get_batch(data, batch_size, block_size, "cpu", generator)

    v = judge(get_check(K["get_batch"]), _record(tmp_path, K["get_batch"],
                                                       get_batch))
    assert v.diagnosis == "used the reference implementation", v.message
    assert "in transformer_ref/train/data.py" in v.message
    v = judge(get_check(K["sample_next_token"]),
              _record(tmp_path, K["sample_next_token"], reference))
    assert v.diagnosis == "used the reference implementation", v.message


def test_sampler_built_from_the_probabilities_is_not_a_sample(tmp_path):
    """Ids laid out in proportion to the filtered probabilities match every frequency within
    the tolerance, with any generator: judged over several generators, they do not spread.
    The answer is the sandbox class's (``training_class.QUANTILES``: the solution's filters,
    then each row's ids laid out by the driver's ``N_DRAWS``)."""
    ns = {"torch": torch}
    exec(QUANTILES, ns)
    quantiles = ns["sample_next_token"]
    check = get_check(K["sample_next_token"])
    v = judge(check, _record(tmp_path, K["sample_next_token"], quantiles))
    assert not v.passed and v.diagnosis == "not a measurement", v.message
    assert "different random generators" in v.message
    # the in-kernel check (self-learners) rejects it too
    with pytest.raises(CheckFailed, match="different random generators"):
        _run(check, training.probe(K["sample_next_token"], quantiles), hidden=True)


def test_kernel_package_has_the_drivers_and_no_expected_values(tmp_path):
    import ast

    nb = nbformat.read(REPO / "solutions/08_training/08_training.ipynb", as_version=4)
    spec = kernel_package.prepare(tmp_path, [nb])
    # the notebook imports transformer_ref: the kernel's copy has no code for the exercises
    assert spec is not None and spec["ref_package"]
    stub = Path(spec["package"]) / "checks" / f"{CHAPTER.module}.py"
    text = stub.read_text()
    assert "from autograder.checks._training_drivers import graded, probe" in text
    assert "Case(" not in text and "Mistake(" not in text
    drivers = (Path(spec["package"]) / "checks" / "_training_drivers.py").read_text()
    imported = {n.module for n in ast.walk(ast.parse(drivers)) if isinstance(n, ast.ImportFrom)}
    assert imported == {"__future__", "autograder.checks._core"}  # no GPT: TinyLM


def test_answer_using_the_setup_cells_reference_is_flagged():
    from autograder.grading.parent.course import describe

    source = nbformat.read(REPO / "solutions/08_training/08_training.ipynb", as_version=4)
    release = nbformat.read(REPO / "notebooks/08_training/08_training.ipynb", as_version=4)
    notebook = describe("08_training", "08_training", source, release)
    as_released = nbformat.writes(release).encode()
    get_batch = table.by_key(K["get_batch"])
    assert source_flags.flags(as_released, notebook) == {}  # the demos' own uses are not flagged
    sub = nbformat.reads(as_released.decode(), as_version=4)
    for cell in sub.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == get_batch.solution_id:
            cell.source = ("def get_batch(data, batch_size, block_size, generator=None):\n"
                           "    return reference_get_batch(data, batch_size, block_size, "
                           "generator=generator)\n")
        if "def small_run" in cell.source:  # a demo cell the student edited
            cell.source += "\nstep_of = reference_get_lr\n"
    flagged = source_flags.flags(nbformat.writes(sub).encode(), notebook)
    wide = ("notebook-wide: uses the reference implementation (reference_get_lr) "
            "(in a cell the student added)")
    assert flagged[get_batch.grade_id] == (
        f"flagged: uses the reference implementation (reference_get_batch); {wide}"), flagged
    assert flagged[table.by_key(K["cross_entropy"]).grade_id] == f"flagged: {wide}", flagged


@pytest.mark.parametrize("how", ["assign", "new-parameters"])
def test_load_that_swaps_the_parameters_scores_zero(tmp_path, solutions, how):
    """The notebook asks load_checkpoint to restore *in place*: one that puts new parameter
    objects in the model (load_state_dict(assign=True), nn.Parameter(...)) leaves the optimizer
    updating the old ones; the values alone would match."""

    def load(path, model, optimizer, generator):
        ck = torch.load(path)
        if how == "assign":
            model.load_state_dict(ck["model"], assign=True)
        else:
            for name, value in ck["model"].items():
                *parents, leaf = name.split(".")
                owner = model.get_submodule(".".join(parents))
                if isinstance(getattr(owner, leaf), torch.nn.Parameter):
                    setattr(owner, leaf, torch.nn.Parameter(value.clone()))
        optimizer.load_state_dict(ck["optimizer"])
        generator.set_state(ck["generator"])
        return ck["step"]

    save = solutions["save_checkpoint"]
    check = get_check(K["checkpoint"])
    v = judge(check, _record(tmp_path, K["checkpoint"], save, load))
    assert not v.passed and v.diagnosis == "parameters replaced, not loaded in place", v.message
    with pytest.raises(CheckFailed, match="parameters replaced, not loaded in place"):
        _run(check, training.probe(K["checkpoint"], save, load), hidden=True)


def test_a_sampler_that_ignores_the_given_generator_fails_kernel_and_grader(tmp_path):
    """Issue 49: `torch.multinomial(probs, 1)` (torch's global generator) gives the right
    frequencies and passed; drawn twice with generators in the same state it draws other
    tokens. The notebook's visible check and the grader's verdict name it."""
    from helpers.answers.training import sampler

    wrong = sampler(given=False)
    check = get_check(K["sample_next_token"])
    v = judge(check, _record(tmp_path, K["sample_next_token"], wrong))
    assert not v.passed and v.diagnosis == training.NOT_GIVEN, v.message
    assert "on two generators in the same state" in v.message
    with pytest.raises(CheckFailed) as info:
        training.check_sample_next_token(wrong)
    assert f"Likely mistake: {training.NOT_GIVEN}." in str(info.value)
    assert judge(check, _record(tmp_path, K["sample_next_token"], sampler())).passed
