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


def fitted(step_cost, seconds=480.0, eval_s=2.0, sample_s=0.0, save_s=0.0, **kw):
    """``fit_run`` of a ``FakeRun``; ``run.said_at``: the clock time of each line. With
    ``sample_s``, ``after_eval`` does what the notebook's does: a line, a sample that takes
    ``sample_s``, the sample's line; ``after_chunk`` takes ``save_s``."""
    run = FakeRun(step_cost, eval_s)
    said, saved, run.said_at = [], [], []

    def say(line):
        said.append((len(run.log), line))
        run.said_at.append(run.t)

    def save(r):
        saved.append(r.step)
        run.t += save_s

    def sample(ev):
        say(f"--- step {run.step}: val {ev['val']:.3f}; your model writes: ---")
        run.t += sample_s
        say("To be, or not")

    if sample_s:
        kw["after_eval"] = sample
    kw.setdefault("threads", None)  # the thread count is left alone unless a test tries it
    summary = fit_run(run, BASE, seconds, clock=run.clock, say=say, after_chunk=save,
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


# --- issue 49: a progress line at least every 10 s, under load too -------------------------
# The gaps are measured on the fake clock from fit_run's start (a cell's start: the notebook
# prints nothing between its first line and the call) to its end, over every line: fit_run's
# and those of the notebook-like after_eval (a line, a sample of 1.5 s, the sample).

def gaps(run, summary) -> list[float]:
    times = [0.0, *run.said_at, summary["seconds"]]
    return [b - a for a, b in zip(times, times[1:])]


def assert_decay_ran_out(run):
    peak, low = run.cfg.learning_rate, run.cfg.min_lr
    assert max(run.lrs) >= 0.97 * peak
    assert run.lrs[-1] <= low + 0.01 * (peak - low)  # the last step's rate: min_lr
    assert get_lr(run.cfg.max_iters, run.cfg) == pytest.approx(low)


@pytest.mark.parametrize("before,jump_at", [(0.3, 200.3), (1.0, 137.7), (2.5, 251.1)])
def test_lines_at_most_10_s_apart_when_the_step_time_triples(before, jump_at):
    cost = lambda t: before if t < jump_at else 3 * before  # noqa: E731
    run, summary, said, _ = fitted(cost, eval_s=4.0, sample_s=1.5, save_s=0.2)
    assert max(gaps(run, summary)) <= 10.0
    assert_schedule_completed(run, summary, 480.0, 3 * before)
    assert_decay_ran_out(run)
    assert not any("since the last line" in line for _, line in said)
    chunk_lines = [t for t, (_, line) in zip(run.said_at, said) if "  step " in line]
    assert max(b - a for a, b in zip(chunk_lines, chunk_lines[1:])) > 5.0  # still chunks,
    # not a line after every step


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), start=st.floats(0.05, 3.3))
def test_lines_at_most_10_s_apart_whatever_the_load_does(seed, start):
    """Step times that change at random moments, each time by up to 3x either way (in
    0.05-3.3 s: no single step over 10 s; at most one change between two steps)."""
    rng = random.Random(seed)
    moments, costs, t, c = [], [], 0.0, start
    while t < 600:
        t += rng.uniform(3.4, 40.0)
        c = min(3.3, max(0.05, c * rng.choice([rng.uniform(1 / 3, 1), rng.uniform(1, 3)])))
        moments.append(t)
        costs.append(c)

    def cost(now):
        i = next((i for i, m in enumerate(moments) if m > now), len(moments))
        return start if i == 0 else costs[i - 1]

    run, summary, _, _ = fitted(cost, eval_s=3.0, sample_s=1.5, save_s=0.1)
    assert max(gaps(run, summary)) <= 10.0
    assert_schedule_completed(run, summary, 480.0, 3.3)
    assert_decay_ran_out(run)


def test_a_thread_count_10x_slower_is_timed_in_one_step_and_retried_after_a_line():
    slow = []

    def cost(t, threads):
        if threads == 2:
            slow.append(t)
            return 6.0
        return 0.6

    run, summary, said, _ = fitted(cost, threads=(1, 2), reprobe_chunks=4, sample_s=1.5)
    assert max(gaps(run, summary)) <= 10.0
    assert summary["threads"] == 1
    lines = [line for _, line in said]
    assert "  2 threads: 6.000 s a step" in lines  # one step told it: 10x the 0.600 s of 1
    retries = [i for i, line in enumerate(lines) if line.startswith("  trying 2 threads again")]
    assert len(retries) >= 5 and len(slow) == 1 + len(retries)  # a step each, said before it
    assert_schedule_completed(run, summary, 480.0, 6.0)
    assert_decay_ran_out(run)


def test_a_step_longer_than_10_s_is_said_in_the_line_after_it():
    run, summary, said, _ = fitted(lambda t, n: 0.5 if n == 1 else 14.0, threads=(1, 2),
                                   reprobe_chunks=5)
    over = [i for i, g in enumerate(gaps(run, summary)) if g > 10.0]
    assert over  # the probe's step of 14 s cannot be cut ...
    for i in over:  # ... and the line that ends each such gap says so
        assert " s since the last line: one step took 14.0 s; this machine" in said[i][1]
    assert_schedule_completed(run, summary, 480.0, 14.0)


@pytest.mark.parametrize("eval_s", [8.0, 20.0])  # 20 batches of 0.4 s and of 1 s (2 steps)
def test_evaluations_of_several_seconds_are_cut_to_fit_between_lines(eval_s):
    run, summary, said, _ = fitted(lambda t: 0.5, eval_s=eval_s, sample_s=1.5, save_s=0.2)
    assert max(gaps(run, summary)) <= 10.0
    assert len(summary["evals"]) == 7  # the timing's and six in the run
    assert run.cfg.eval_iters == min(20, int(7.0 / (eval_s / 20)))  # as many as fit 7 s
    assert_schedule_completed(run, summary, 480.0, 0.5)
    assert_decay_ran_out(run)


def test_an_evaluation_slower_than_sized_still_says_it_runs():
    """On the real clock, an evaluation that runs past the pace's target (the learner's own
    ``evaluate``, one call that cannot be cut) gets 'still evaluating' lines while it runs;
    on a fake clock (every test above) no thread is started."""
    import time

    from transformer_ref.train.budget import _evaluated, _Pace

    class Slow:
        step, history = 88, None

        def evaluate(self):
            time.sleep(0.6)  # 6x the target below
            return {"train": 2.0, "val": 2.1}

    lines: list[str] = []
    pace = _Pace(lines.append, time.perf_counter, target=0.1, max_gap=0.3)
    out, took = _evaluated(Slow(), pace)
    assert out == {"train": 2.0, "val": 2.1, "step": 88} and took["eval"] >= 0.6
    assert lines[0] == "evaluating at step 88 ..."
    assert lines[1:3] == ["  still evaluating at step 88 ..."] * 2  # at least two beats
    lines.clear()
    _evaluated(Slow(), _Pace(lines.append, lambda: 0.0, target=0.1, max_gap=0.3),
               announce=False)
    assert lines == []  # a fake clock: nothing said while it ran
