"""Chapter 8 on a CPU (issue 32 item 8): the time cap sets the run's length from a measured
step time, and a plain progress line shows inside each chunk.

The trainer reads the time from ``Trainer.clock``; these tests put a fake clock there that
advances by a chosen cost per step and per evaluation, so a "slow machine" of seconds per step
runs a tiny model in milliseconds. Nothing here trains for long.
"""

from __future__ import annotations

import math

import pytest

from transformer_ref.train.config import TrainConfig
from transformer_ref.train.data import prepare_data
from transformer_ref.train.trainer import Trainer, get_lr, plan_schedule

from helpers.train import one_thread, tiny_cfg  # noqa: F401 - one_thread: a fixture


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def slow_trainer(tmp_path, step_s, eval_s, first_step_extra=0.0, eval_batch=0.0, **cfg_kw):
    """A tiny trainer on a fake clock: each step costs ``step_s``, each evaluation ``eval_s``
    (the first step ``first_step_extra`` more, as compilation would). ``step_s`` may be a
    function of the clock's time; ``eval_batch``: an evaluation's cost per batch of each split,
    in steps at that time (added to ``eval_s``)."""
    text = "To be, or not to be, that is the question.\n" * 40
    cfg = tiny_cfg(tmp_path, checkpoint=False, **cfg_kw)
    data = prepare_data("char", tmp_path / "data", train_text=text, val_text=text[:400])
    trainer = Trainer(cfg, data=data)
    clock = FakeClock()
    trainer.clock = clock
    real_step, real_eval = trainer.train_step, trainer.evaluate
    lrs = []

    def step():
        lrs.append(get_lr(trainer.step, trainer.cfg))  # the lr this step uses
        real_step()
        cost = step_s(clock.t) if callable(step_s) else step_s
        clock.t += cost + (first_step_extra if trainer.step == 1 else 0.0)

    def evaluate():
        out = real_eval()
        per_step = step_s(clock.t) if callable(step_s) else step_s
        clock.t += eval_s + eval_batch * per_step * trainer.cfg.eval_iters
        return out

    trainer.train_step, trainer.evaluate = step, evaluate
    return trainer, clock, lrs


# The CPU run of chapter 8 (3000 steps, warm-up 100, evaluation every 500) on a machine where a
# step takes 8 s: in the 8-minute cap the old loop stopped at step ~55, inside the warm-up.
SLOW = dict(max_iters=3000, warmup_iters=100, eval_interval=500, eval_iters=1, log_interval=10)


def test_today_a_slow_machine_stops_inside_the_warm_up(tmp_path):
    """What the issue reports, reproduced on the fake clock: the schedule follows max_iters."""
    trainer, clock, lrs = slow_trainer(tmp_path, step_s=8.0, eval_s=2.0, **SLOW)
    trainer.train(max_seconds=480)
    assert trainer.step < trainer.cfg.warmup_iters
    assert max(lrs) < trainer.cfg.learning_rate  # the peak never reached, the decay never begun


def test_fit_to_time_completes_warm_up_and_decay_on_a_slow_machine(tmp_path, capsys):
    budget = 480.0
    trainer, clock, lrs = slow_trainer(tmp_path, step_s=8.0, eval_s=2.0,
                                       first_step_extra=30.0, **SLOW)
    t0 = clock()
    plan = trainer.fit_to_time(budget, probe_steps=4)
    assert plan["cut"] and plan["step_seconds"] == pytest.approx(8.0)  # the first step untimed
    assert plan["eval_seconds"] == pytest.approx(2.0)
    cfg = trainer.cfg
    assert (cfg.max_iters, cfg.warmup_iters, cfg.eval_interval) == (
        plan["max_iters"], plan["warmup_iters"], plan["eval_interval"])
    assert 1 <= cfg.warmup_iters < cfg.max_iters < 60
    summary = trainer.train(max_seconds=budget - (clock() - t0))
    assert trainer.step == cfg.max_iters  # ran to the end of its schedule, not cut by the cap
    assert clock() - t0 <= budget
    assert max(lrs) >= 0.98 * cfg.learning_rate  # warm-up over: the cosine began at its peak
    assert lrs[-1] < cfg.min_lr + 0.02 * (cfg.learning_rate - cfg.min_lr)  # decay ran out
    assert get_lr(cfg.max_iters, cfg) == pytest.approx(cfg.min_lr)
    assert summary["eval"]["step"] == cfg.max_iters
    out = capsys.readouterr().out  # a line before the timing (issue 49: silent for minutes)
    assert out.index("timing up to 5 steps and one evaluation") < out.index(
        "measured 8.000 s per step, 2.0 s per evaluation")


def test_fit_to_time_keeps_a_run_that_fits(tmp_path):
    trainer, clock, _ = slow_trainer(tmp_path, step_s=0.1, eval_s=1.0, **SLOW)
    plan = trainer.fit_to_time(480.0, verbose=False)
    assert not plan["cut"]
    assert (trainer.cfg.max_iters, trainer.cfg.warmup_iters, trainer.cfg.eval_interval,
            trainer.cfg.eval_iters) == (3000, 100, 500, 1)


@pytest.mark.parametrize("step_s", [0.05, 0.3, 1.0, 4.0, 20.0])
def test_plan_fits_the_budget_and_completes_the_schedule(step_s):
    cfg = TrainConfig(max_iters=3000, warmup_iters=100, eval_interval=500, min_lr=1e-4,
                      learning_rate=3e-3, lr_decay_iters=None)
    plan = plan_schedule(cfg, step_s, 432.0, eval_seconds=3.0, done=11)
    assert plan["planned_seconds"] <= 432.0 or plan["max_iters"] == 12  # at least one step
    assert plan["max_iters"] <= 3000
    assert plan["warmup_iters"] < plan["max_iters"]
    fitted = TrainConfig(**{**cfg.to_dict(), **{k: plan[k] for k in (
        "max_iters", "warmup_iters", "lr_decay_iters", "eval_interval")}})
    assert get_lr(fitted.max_iters, fitted) == pytest.approx(fitted.min_lr)
    # the steps and evaluations the plan counts are the ones the run will make
    n_evals = math.ceil(fitted.max_iters / fitted.eval_interval)
    assert plan["planned_seconds"] == pytest.approx(
        (fitted.max_iters - 11) * step_s + n_evals * 3.0)
    if plan["cut"]:  # the shape is kept: warm-up the same share of the run
        share = plan["warmup_iters"] / plan["max_iters"]
        assert share == pytest.approx(100 / 3000, abs=1.0 / plan["max_iters"] + 1e-9)


def test_plan_drops_evaluations_that_would_eat_the_budget():
    cfg = TrainConfig(max_iters=3000, warmup_iters=100, eval_interval=500, eval_iters=20)
    plan = plan_schedule(cfg, 1.0, 400.0, eval_seconds=50.0)  # 6 evaluations = 300 s
    n_evals = math.ceil(plan["max_iters"] / plan["eval_interval"])
    # first fewer batches per evaluation: 100 s for 6 evaluations of 2.5 s a batch -> 6 batches
    assert plan["eval_iters"] == 6 and plan["eval_seconds"] == pytest.approx(15.0)
    assert n_evals == 6 and n_evals * 15.0 <= 0.25 * 400.0  # ... which is enough here
    assert plan["planned_seconds"] <= 400.0
    slower = plan_schedule(cfg, 1.0, 400.0, eval_seconds=200.0)  # 4 batches: 40 s each
    n_evals = math.ceil(slower["max_iters"] / slower["eval_interval"])
    assert slower["eval_iters"] == 4 and n_evals == 2  # ... then fewer evaluations
    assert slower["planned_seconds"] <= 400.0


def test_plan_scales_an_explicit_decay_end():
    cfg = TrainConfig(max_iters=1000, warmup_iters=50, lr_decay_iters=800, eval_interval=100)
    plan = plan_schedule(cfg, 1.0, 200.0)
    assert plan["cut"] and plan["warmup_iters"] < plan["lr_decay_iters"] <= plan["max_iters"]
    assert plan["lr_decay_iters"] == round(800 * plan["max_iters"] / 1000)


def test_progress_lines_inside_a_chunk(tmp_path, capsys):
    """Plain printed lines (no widget, so nbclient keeps them), about one per progress_seconds."""
    trainer, clock, _ = slow_trainer(tmp_path, step_s=1.0, eval_s=0.0, max_iters=60,
                                     warmup_iters=5, eval_interval=60, eval_iters=1,
                                     progress_seconds=10.0)
    trainer.train(num_steps=45)
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("step ") and "to go" in ln]
    assert len(lines) == 4  # at 10, 20, 30, 40 s; none at the chunk's end (the eval line is there)
    assert lines[0].split()[1] == "10/60"
    assert "this part ends at 45" in lines[0] and "~35 s to go" in lines[0]
    assert "\r" not in out


def test_no_progress_lines_by_default(tmp_path, capsys):
    trainer, clock, _ = slow_trainer(tmp_path, step_s=1.0, eval_s=0.0, max_iters=30,
                                     warmup_iters=5, eval_interval=30, eval_iters=1)
    trainer.train()
    assert "to go" not in capsys.readouterr().out


def test_long_checks_say_what_they_run_before_they_start(capsys):
    """Checks 3.2, 4.1, 5.1 and 6.1 take seconds: each prints one "running ..." line first."""
    from helpers.answers.training import GOOD, KEY, PUBLIC

    long_ones = {KEY[k] for k in ("train_step", "estimate_loss", "checkpoint",
                                  "sample_next_token")}
    for key in sorted(GOOD):
        PUBLIC[key](*GOOD[key])
        lines = capsys.readouterr().out.splitlines()
        if key in long_ones:
            assert len(lines) == 2, lines
            assert lines[0].startswith("running Exercise ") and "(takes ~" in lines[0], lines
            assert lines[1].startswith("✔"), lines
        else:
            assert [ln for ln in lines if ln.startswith("running")] == [], lines


def test_no_running_line_when_no_function_is_passed(capsys):
    from autograder.checks import CheckFailed
    from autograder.checks import training as TR

    with pytest.raises(CheckFailed, match="pass your function"):
        TR.check_train_step(None)
    assert "running" not in capsys.readouterr().out


def test_plan_counts_the_callers_work_after_each_evaluation():
    """The notebook samples text after each evaluation: that time is not cut by eval_iters."""
    cfg = TrainConfig(max_iters=3000, warmup_iters=100, eval_interval=500, eval_iters=20)
    bare = plan_schedule(cfg, 1.0, 400.0, eval_seconds=2.0)
    with_samples = plan_schedule(cfg, 1.0, 400.0, eval_seconds=2.0 + 8.0, fixed_eval_seconds=8.0)
    assert with_samples["max_iters"] < bare["max_iters"]
    n_evals = math.ceil(with_samples["max_iters"] / with_samples["eval_interval"])
    assert with_samples["planned_seconds"] == pytest.approx(
        with_samples["max_iters"] * 1.0 + n_evals * with_samples["eval_seconds"])
    assert with_samples["planned_seconds"] <= 400.0
    # evaluations over a quarter of the budget: the batches shrink, the 8 s stay
    squeezed = plan_schedule(cfg, 1.0, 400.0, eval_seconds=20.0 + 8.0, fixed_eval_seconds=8.0)
    assert squeezed["eval_seconds"] == pytest.approx(8.0 + squeezed["eval_iters"] * 1.0)
    assert squeezed["eval_iters"] < 20


def test_fit_to_time_counts_extra_seconds_per_evaluation(tmp_path):
    trainer, clock, _ = slow_trainer(tmp_path, step_s=8.0, eval_s=2.0, **SLOW)
    t0 = clock()
    plan = trainer.fit_to_time(480.0, probe_steps=4, verbose=False, extra_seconds_per_eval=20.0)
    assert plan["eval_seconds"] == pytest.approx(22.0)
    # the caller's 20 s after each of the run's evaluations, then the whole run fits
    n_evals = math.ceil(trainer.cfg.max_iters / trainer.cfg.eval_interval)
    trainer.train(max_seconds=480.0 - (clock() - t0) - 20.0 * n_evals)
    assert trainer.step == trainer.cfg.max_iters


# Issue 49: chapter 08's reference-trainer cell (fit_to_time, then train) on a loaded CPU prints
# a line at most 10 s apart. The lines' times are read from the fake clock as they are printed.
CPU = dict(max_iters=3000, warmup_iters=100, eval_interval=500, eval_iters=20, log_interval=10,
           progress_seconds=7.0)


def timed_lines(monkeypatch, clock) -> list:
    """(clock time, line) of every line the trainer prints from now on."""
    import transformer_ref.train.trainer as trainer_module

    lines = []
    monkeypatch.setattr(trainer_module, "print",
                        lambda *a, **k: lines.append((clock(), " ".join(map(str, a)))),
                        raising=False)
    return lines


def gaps(lines, t0) -> list:
    times = [t for t, _ in lines]
    return [b - a for a, b in zip([t0, *times], times)]


def run_ref_cell(trainer, clock, seconds, cap=True) -> dict:
    t0 = clock()
    trainer.fit_to_time(seconds, probe_steps=10)
    return trainer.train(max_seconds=seconds - (clock() - t0) if cap else None)


@pytest.mark.parametrize("batch", [0.5, 2.0])  # an evaluation batch: half a step, two steps
def test_reference_cell_lines_at_most_10_s_apart_when_steps_slow_down_3x(tmp_path, monkeypatch,
                                                                        batch):
    """1 s a step for the first 60 s, then 3 s (after the plan): every gap <= 10 s, the steps,
    the timing's evaluation and the run's evaluations (20 batches: 10-120 s whole) included."""
    trainer, clock, lrs = slow_trainer(tmp_path, step_s=lambda t: 1.0 if t < 1060.0 else 3.0,
                                       eval_s=0.0, eval_batch=batch, **CPU)
    lines = timed_lines(monkeypatch, clock)
    t0 = clock()
    run_ref_cell(trainer, clock, 240.0, cap=False)  # to the end of its schedule, however slow
    assert max(gaps(lines, t0)) <= 10.0, [(round(t - t0, 1), x[:50]) for t, x in lines]
    assert trainer.step == trainer.cfg.max_iters
    evals = [x for _, x in lines if x.startswith("  evaluating at step")]
    assert len(evals) == len(trainer.history["eval"]) >= 2
    assert max(lrs) >= 0.98 * trainer.cfg.learning_rate
    assert lrs[-1] < trainer.cfg.min_lr + 0.02 * (trainer.cfg.learning_rate - trainer.cfg.min_lr)
    assert sum("since the last line" in x for _, x in lines) == 0  # none came late


def test_reference_cell_a_slow_evaluation_gets_the_batches_that_fit(tmp_path, monkeypatch):
    """An evaluation batch of 3 steps (a full evaluation 60 s): the timing's evaluation and the
    run's get fewer batches, every gap <= 10 s, and warm-up and decay complete in the budget."""
    trainer, clock, lrs = slow_trainer(tmp_path, step_s=1.0, eval_s=0.0, eval_batch=3.0, **CPU)
    lines = timed_lines(monkeypatch, clock)
    t0 = clock()
    plan = trainer.fit_to_time(300.0, probe_steps=10)
    summary = trainer.train(max_seconds=300.0 - (clock() - t0))
    assert max(gaps(lines, t0)) <= 10.0, [(round(t - t0, 1), x[:50]) for t, x in lines]
    assert clock() - t0 <= 300.0
    cfg = trainer.cfg
    assert trainer.step == cfg.max_iters and summary["eval"]["step"] == cfg.max_iters
    assert max(lrs) >= 0.98 * cfg.learning_rate
    assert lrs[-1] < cfg.min_lr + 0.02 * (cfg.learning_rate - cfg.min_lr)
    assert all("(2 batches of each split)" in x for _, x in lines if "evaluating at" in x)
    assert cfg.eval_iters == plan["eval_iters"] > 2  # the plan's count is kept for later calls


def test_reference_cell_a_step_over_10_s_is_named(tmp_path, monkeypatch):
    """One step of 14 s cannot be cut: the line after it says how long it was and why."""
    trainer, clock, _ = slow_trainer(tmp_path, step_s=lambda t: 14.0 if 1100 <= t < 1101 else 1.0,
                                     eval_s=0.5, **CPU)
    lines = timed_lines(monkeypatch, clock)
    t0 = clock()
    run_ref_cell(trainer, clock, 240.0, cap=False)
    late = [(g, x) for g, (_, x) in zip(gaps(lines, t0), lines) if g > 10.0]
    assert len(late) == 1 and "one step took 14.0 s" in late[0][1], late
