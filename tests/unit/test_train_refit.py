"""Chapter 8 on a real laptop (issue 49 item 4): the run's schedule is re-fitted to the time
left after every chunk (``transformer_ref.train.budget``), so warm-up and decay complete in
the budget whatever the machine does meanwhile; the reference trainer never changes the
caller's config.

A fake run advances a fake clock by a chosen cost per step (a function of the time so far, so
a machine can slow down mid-run) and per evaluation; nothing here trains or reads real time.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_ref.train.budget import expected_val, fit_run, outlook, refit
from transformer_ref.train.config import TrainConfig, preset
from transformer_ref.train.trainer import get_lr

BASE = preset("cpu_char")  # 3000 steps, warm-up 100, 6 evaluations: notebook 08's cpu run


class FakeRun:
    """``cfg``, ``step``, ``one_step``, ``evaluate`` and ``history`` on a fake clock: a step
    costs ``step_cost(t)`` seconds at clock time ``t``, an evaluation ``eval_s``."""

    def __init__(self, step_cost, eval_s=2.0, cfg=BASE):
        self.cfg = dataclasses.replace(cfg)
        self.step, self.t, self.eval_s, self.step_cost = 0, 0.0, eval_s, step_cost
        self.threads = 2  # set by fit_run through set_threads where a test passes threads
        self.lrs, self.history, self.log = [], {"eval": []}, []

    def clock(self) -> float:
        return self.t

    def one_step(self) -> float:
        self.lrs.append(get_lr(self.step, self.cfg))  # the rate this step trains with
        self.log.append(("step", self.step))
        takes_threads = self.step_cost.__code__.co_argcount >= 2  # cost(t, threads)
        self.t += self.step_cost(self.t, self.threads) if takes_threads else self.step_cost(self.t)
        self.step += 1
        return 4.0

    def evaluate(self) -> dict:
        self.log.append(("eval", self.step))
        self.t += self.eval_s * self.cfg.eval_iters / BASE.eval_iters  # per batch
        return {"train": 3.0, "val": 3.1}


def fitted(step_cost, seconds=480.0, eval_s=2.0, **kw):
    run = FakeRun(step_cost, eval_s)
    said, saved = [], []

    def say(line):
        said.append((len(run.log), line))

    kw.setdefault("threads", None)  # the thread count is left alone unless a test tries it
    summary = fit_run(run, BASE, seconds, clock=run.clock, say=say,
                      after_chunk=lambda r: saved.append(r.step),
                      set_threads=lambda n: setattr(run, "threads", n), **kw)
    return run, summary, said, saved


def assert_schedule_completed(run, summary, seconds, last_step_s):
    cfg = run.cfg
    assert run.step == cfg.max_iters == summary["step"]  # ran to the end of its schedule
    assert 1 <= cfg.warmup_iters < cfg.max_iters
    peak, low = cfg.learning_rate, cfg.min_lr
    assert max(run.lrs) >= 0.97 * peak  # the warm-up reached the peak
    assert run.lrs[-1] <= low + 0.05 * (peak - low)  # the cosine ran down to min_lr
    assert get_lr(cfg.max_iters, cfg) == pytest.approx(low)
    assert summary["seconds"] <= seconds + last_step_s  # in the budget (a step's overrun)
    assert summary["evals"][-1]["step"] == run.step  # the last evaluation is the final model


@pytest.mark.parametrize("name,cost", [
    ("steady laptop", lambda t: 0.2),
    ("slow laptop", lambda t: 1.5),
    ("two hogs start at 2 min", lambda t: 0.2 if t < 120 else 0.6),
    ("slows 4x for the last third", lambda t: 0.3 if t < 320 else 1.2),
    ("the hogs stop", lambda t: 0.8 if t < 200 else 0.2),
])
def test_warm_up_and_decay_complete_in_the_budget(name, cost):
    run, summary, _, _ = fitted(cost)
    assert_schedule_completed(run, summary, 480.0, cost(480.0))


def test_a_machine_that_slows_down_gets_a_shorter_run_not_a_cut_one():
    run, summary, _, _ = fitted(lambda t: 0.2 if t < 120 else 0.6)
    lengths = [p["max_iters"] for p in summary["plans"]]
    assert lengths[0] > 1.5 * lengths[-1]  # planned at 0.2 s a step, re-fitted at 0.6
    steady, _, _, _ = fitted(lambda t: 0.2)
    assert run.step < steady.step
    assert_schedule_completed(run, summary, 480.0, 0.6)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), base_s=st.floats(0.05, 3.0), swing=st.floats(1.0, 4.0))
def test_any_sequence_of_chunk_timings(seed, base_s, swing):
    """Step times that wander by up to ``swing``x (changing every 30 s of clock time)."""
    rng = random.Random(seed)
    factors = [rng.uniform(1.0, swing) for _ in range(40)]
    cost = lambda t: base_s * factors[min(39, int(t // 30))]  # noqa: E731
    run, summary, _, _ = fitted(cost)
    assert_schedule_completed(run, summary, 480.0, base_s * swing)
    steps = [e["step"] for e in summary["evals"][:-1]]  # none right after another (the
    # final one is at the end, wherever the last re-plan put the end)
    assert min(b - a for a, b in zip(steps, steps[1:])) >= run.cfg.max_iters / 6 / 4
    # the warm-up, once over, is frozen: no plan after it puts the rate back into a warm-up
    warm = run.cfg.warmup_iters
    assert all(p["warmup_iters"] == warm for p in summary["plans"] if p["step"] >= warm)
    assert all(p["warmup_iters"] >= p["step"] or p["warmup_iters"] == warm
               for p in summary["plans"])


def test_progress_before_the_first_step_is_timed_and_after_every_chunk():
    run, summary, said, saved = fitted(lambda t: 0.5, seconds=300.0)
    first_at, first = said[0]
    assert first_at == 0 and "timing" in first  # before any step ran
    assert "s a step" in said[1][1] and said[1][0] <= 10  # the timing's result within steps
    # no gap over ~10 s of clock time between lines once training runs
    steps_between = [b - a for (a, _), (b, _) in zip(said, said[1:])]
    assert max(steps_between) <= 10 / 0.5 + 2  # 20 steps of 0.5 s, plus an evaluation
    assert summary["step"] == run.step


def test_checkpoint_after_every_chunk():
    run, summary, said, saved = fitted(lambda t: 0.5, seconds=300.0)
    chunks = [line for _, line in said if line.strip().startswith("step ")]
    assert len(saved) == len(chunks) >= 20  # one checkpoint per chunk of ~10 s
    assert saved == sorted(saved) and saved[-1] == run.step  # the last one is the final model


def test_evaluations_are_spread_over_the_run():
    run, summary, _, _ = fitted(lambda t: 0.2)
    steps = [e["step"] for e in summary["evals"][1:]]  # the first times an evaluation
    assert len(steps) == 6 and steps[-1] == run.step
    gaps = [b - a for a, b in zip([0, *steps], steps)]
    assert max(gaps) <= 2 * min(gaps)
    assert run.history["eval"] == summary["evals"]


def test_refit_keeps_a_finished_warm_up_and_ends_when_no_time_is_left():
    assert refit(BASE, 400, 40, 0.5, 100.0) == {"max_iters": 600, "warmup_iters": 40}
    assert refit(BASE, 400, 40, 0.5, 0.0) == {"max_iters": 400, "warmup_iters": 40}
    # still warming up (step 10 of 40) and the run shrinks: the warm-up shrinks with it
    assert refit(BASE, 10, 40, 1.0, 290.0) == {"max_iters": 300, "warmup_iters": 10}
    assert refit(BASE, 0, 100, 0.01, 1e6)["max_iters"] == 3000  # never past base.max_iters


def test_the_reference_trainer_never_changes_the_callers_config(tmp_path):
    """Issue 49: re-running notebook 08's training cell after the reference cell trained the
    reference's 78-step schedule: ``Trainer.fit_to_time`` changed the shared ``cfg``."""
    from transformer_ref.train import Trainer
    from transformer_ref.train.data import prepare_data

    from helpers.train import tiny_cfg

    text = "To be, or not to be, that is the question.\n" * 40
    cfg = tiny_cfg(tmp_path, checkpoint=False, max_iters=3000, warmup_iters=100)
    before = dataclasses.replace(cfg)
    data = prepare_data("char", tmp_path / "data", train_text=text, val_text=text[:400])
    trainer = Trainer(cfg, data=data)
    clock = iter(range(0, 10**6, 5))  # 5 s between readings: a slow machine
    trainer.clock = lambda: float(next(clock))
    plan = trainer.fit_to_time(120.0, probe_steps=2, verbose=False)
    assert plan["cut"] and trainer.cfg.max_iters == plan["max_iters"] < 3000
    assert cfg == before


def test_expected_val_and_the_words_for_a_weak_run():
    table = {150: 2.6, 300: 2.3, 600: 2.0, 1500: 1.7}
    assert expected_val(300, table) == 2.3 and expected_val(50, table) == 2.6
    assert 2.0 < expected_val(450, table) < 2.3
    strong = outlook(1500, 0.3, 480.0, table=table)
    assert "1.70" in strong and "weak" not in strong
    weak = outlook(200, 2.4, 480.0, table=table)
    assert "weak model" in weak and "GPU" in weak and "MAX_SECONDS" in weak
    assert "smaller" in weak and "24 min" in weak  # 600 steps at 2.4 s reach 2.0 <= 2.1


def test_a_base_config_is_not_changed_by_a_fitted_run():
    before = dataclasses.replace(BASE)
    fitted(lambda t: 1.0)
    assert BASE == before and isinstance(BASE, TrainConfig)


def busy(t, threads, until=1e9):
    """Other programs keep both cores busy until ``until``: two threads wait for each other
    (7x slower than one, as measured on this course's 2-core machine under load)."""
    if t < until:
        return 2.0 if threads == 2 else 0.3
    return 0.15 if threads == 2 else 0.25  # idle: two threads are faster


def test_one_thread_when_other_programs_keep_the_cores_busy():
    run, summary, said, _ = fitted(busy, threads=(1, 2))
    assert summary["threads"] == 1 and run.threads == 1
    lines = [line for _, line in said[1:6]]
    assert lines == ["  timing 1 thread ...", "  1 thread: 0.300 s a step",
                     "  timing 2 threads ...", "  2 threads: 2.000 s a step",
                     "  0.300 s a step with 1 thread; timing an evaluation (4 batches) ..."]
    assert_schedule_completed(run, summary, 480.0, 2.0)
    assert run.step > 1000  # at 2.0 s a step it would be ~200


def test_back_to_two_threads_when_the_load_goes():
    run, summary, said, _ = fitted(lambda t, n: busy(t, n, until=150.0), threads=(1, 2),
                                   reprobe_chunks=3)
    assert summary["threads"] == 2
    assert any("with 2 threads against" in line and "using 2" in line for _, line in said)
    assert_schedule_completed(run, summary, 480.0, 2.0)
