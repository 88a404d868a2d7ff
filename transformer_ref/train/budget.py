"""A training run held to a time budget, its schedule re-fitted after every chunk.

Notebook 08 trains for ``MAX_SECONDS`` on whatever machine the learner has, and a laptop's
speed changes while it trains (another program starts, the fan throttles the clock). So the
run is cut into chunks of about ``chunk_seconds`` and after each one the schedule is planned
again from the time a step took *in that chunk* and the time left (:func:`refit`): the run
gets as many steps as still fit, the warm-up keeps its share of the run until it is over (then
it is frozen), and the cosine always ends at ``min_lr`` on the run's last step. Every chunk
ends with a progress line and the caller's ``after_chunk`` (a checkpoint). Evaluations come at
``n_evals`` evenly spaced points of the re-fitted run, the last one at its end. Chunks,
timings and evaluations are sized so that the progress lines come at most ``max_gap`` (10 s)
apart, unless one step alone takes longer (the line after it says so).

>>> base = TrainConfig(max_iters=3000, warmup_iters=100)
>>> refit(base, done=0, warmup_iters=100, step_seconds=0.5, seconds_left=300.0)
{'max_iters': 600, 'warmup_iters': 20}
>>> refit(base, done=400, warmup_iters=20, step_seconds=1.0, seconds_left=50.0)  # slowed down
{'max_iters': 450, 'warmup_iters': 20}
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable

import torch

from transformer_ref.train.config import TrainConfig
from transformer_ref.train.trainer import plan_schedule

__all__ = ["refit", "fit_run", "EXPECTED_VAL", "expected_val", "outlook"]


def refit(base: TrainConfig, done: int, warmup_iters: int, step_seconds: float,
          seconds_left: float) -> dict:
    """The schedule for a run with ``done`` steps behind it and ``seconds_left`` of training
    time (evaluations already taken out) at ``step_seconds`` a step.

    ``max_iters``: ``done`` plus the steps that fit, at most ``base.max_iters``, at least
    ``done`` (no time left: the run ends here). ``warmup_iters``: while the run is still in its
    warm-up (``done < warmup_iters``), ``base``'s share of the new length (but not below
    ``done``: a warm-up that the shorter run has already passed ends now); once it is over it
    is kept, so the rate never drops back into a warm-up.
    """
    if step_seconds <= 0:
        raise ValueError(f"step_seconds must be > 0, got {step_seconds}")
    fit = math.floor(max(0.0, seconds_left) / step_seconds)
    total = max(done, min(base.max_iters, done + fit))
    warm = warmup_iters
    if done < warmup_iters and base.warmup_iters > 0:
        share = max(1, round(base.warmup_iters * total / base.max_iters))
        warm = max(done, share)
    warm = min(warm, max(0, total - 1)) if total > done else warm  # the cosine gets a step
    return {"max_iters": total, "warmup_iters": warm}


def fit_run(run, base: TrainConfig, seconds: float, *, n_evals: int | None = None,
            chunk_seconds: float = 7.0, max_gap: float = 10.0, reserve: float = 0.05,
            extra_seconds_per_eval: float = 0.0, probe_steps: int = 5,
            after_chunk: Callable | None = None, after_eval: Callable | None = None,
            after_plan: Callable | None = None, say: Callable = print, threads: tuple | None = (),
            set_threads: Callable[[int], None] = torch.set_num_threads, reprobe_chunks: int = 17,
            clock: Callable[[], float] = time.perf_counter) -> dict:
    """Train ``run`` for about ``seconds`` (from this call), re-fitting its schedule after every
    chunk so that warm-up and decay both complete in the budget.

    ``run`` has a ``cfg`` of its own (``max_iters``, ``warmup_iters``, ``lr_decay_iters`` and
    ``eval_iters`` are set on it), ``step``, ``one_step() -> loss`` and ``evaluate() -> dict``
    (``"train"``, ``"val"``); ``base`` (never changed) gives the longest run and the warm-up's
    share. ``say`` gets a line before the first step is timed, after the timing, before each
    evaluation and after every chunk. ``after_eval(evaluation)`` runs after each evaluation,
    the first (untrained, timed with up to 4 batches) included; it is expected to print (the
    notebook writes a sample), so its end counts as a progress line. Its time is counted with
    each evaluation, and so is ``extra_seconds_per_eval``; ``after_chunk(run)`` runs after
    every chunk (a checkpoint), ``after_plan(plan)`` once, with the first plan (``max_iters``,
    ``warmup_iters``, ``step_seconds``). ``threads``: the thread counts to try (default: 1 and
    torch's; ``None``: leave them alone). The timing runs a few steps with each and keeps the
    faster, and every ``reprobe_chunks`` chunks a step or two try the other again (while its
    last step time is under 5% of the time left): on a laptop where other programs keep the
    cores busy, two threads wait for each other at every operation and one thread is several
    times faster. Returns a summary with the evaluations, the schedules it planned
    (``plans``), the seconds taken and the thread count it ended with (``threads``).

    **Progress lines at most ``max_gap`` seconds apart.** Every piece of work is sized from
    the time since the last line (:class:`_Pace`): a chunk takes another step only while that
    step, at the slowest step time seen in the chunk (at least the last chunk's mean and its
    last step), ends by ``chunk_seconds`` and, were it three times slower, still by
    ``max_gap``; a timing of a thread count stops once another step would not fit so (or once
    it is clearly the slower one), with a line before it where the last timing of that count
    says it may take long; an evaluation gets as many batches as fit ``chunk_seconds`` at the
    speed of the steps just before it (an evaluation that slows down more than 1.4x while it
    runs can pass ``max_gap``). A chunk always takes one step, and one step or evaluation
    cannot be cut: a line that comes more than ``max_gap`` after the one before says so and
    why (the slowest step since, or the evaluation's time).
    """
    cfg, t0 = run.cfg, clock()
    pace = _Pace(say, clock, chunk_seconds, max_gap)
    pace.say(f"timing the first steps on this machine (budget {seconds:.0f} s) ...")
    if threads == ():
        threads = (1, torch.get_num_threads())
    options = list(dict.fromkeys(threads or (None,)))  # None: leave the threads alone
    if options[0] is not None:
        set_threads(options[0])  # fewest first: under load a step with more can take 15 s
    pace.step(run)  # the first step allocates: not timed
    speed = {}
    for n in options:
        if n is not None:
            set_threads(n)
        if len(options) > 1:
            pace.say(f"  timing {n} thread{'s' * (n > 1)} ...")
        best = min(speed.values(), default=math.inf)
        speed[n], loss = _timed(run, probe_steps, pace, slower_than=2 * best)
        if len(options) > 1:
            pace.say(f"  {n} thread{'s' * (n > 1)}: {speed[n]:.3f} s a step")
    now = min(speed, key=speed.get)
    if now is not None:
        set_threads(now)
    step_s = speed[now]
    full = cfg.eval_iters
    few = max(1, min(full, 4, math.floor(chunk_seconds / step_s)))  # a batch: under a step
    used = f" with {now} thread{'s' * (now > 1)}" if len(speed) > 1 else ""
    pace.say(f"  {step_s:.3f} s a step{used}; timing an evaluation ({few} "
             f"batch{'es' * (few != 1)}) ...")
    cfg.eval_iters = few  # a short evaluation, scaled to the full one below
    first, took = _evaluated(run, pace, after_eval, announce=False)
    evals, cfg.eval_iters = [first], full
    batch_per_step = took["eval"] / few / step_s  # an evaluation batch, in steps
    fixed = took["after"] + max(0.0, extra_seconds_per_eval)
    eval_s = took["eval"] * full / few + fixed
    if n_evals is None:
        n_evals = max(1, math.ceil(base.max_iters / max(1, base.eval_interval)))
    budget = seconds * (1.0 - reserve)
    # fewer batches per evaluation (and fewer evaluations) where they would eat the budget
    plan = plan_schedule(base, step_s, max(step_s, budget - (clock() - t0)),
                         eval_seconds=eval_s, done=run.step, fixed_eval_seconds=fixed)
    cfg.eval_iters = plan["eval_iters"]
    eval_s = plan["eval_seconds"]
    n_evals = min(n_evals, math.ceil(plan["max_iters"] / plan["eval_interval"]))
    warm, done_evals, plans, ckpt_s, last_took = base.warmup_iters, 0, [], 0.0, 0.0

    def replan() -> None:
        nonlocal warm
        left = budget - (clock() - t0) - max(1, n_evals - done_evals) * eval_s
        new = refit(base, run.step, warm, step_s, left)
        cfg.max_iters, cfg.warmup_iters, cfg.lr_decay_iters = new["max_iters"], new[
            "warmup_iters"], None
        warm = new["warmup_iters"]
        plans.append({"step": run.step, **new, "step_seconds": step_s})

    def evaluation(recent_step_s: float) -> dict:
        """An evaluation of as many batches as fit a chunk at the speed just measured."""
        nonlocal batch_per_step, eval_s
        fit = math.floor(chunk_seconds / (batch_per_step * recent_step_s))
        cfg.eval_iters = max(1, min(plan["eval_iters"], fit))
        out, took = _evaluated(run, pace, after_eval)
        batch_per_step = took["eval"] / cfg.eval_iters / recent_step_s
        eval_s = took["eval"] + took["after"] + max(0.0, extra_seconds_per_eval)
        return out

    def after_chunk_done() -> None:
        nonlocal ckpt_s
        if after_chunk is not None:
            tc = clock()
            after_chunk(run)
            ckpt_s = clock() - tc

    replan()
    p = plans[0]
    pace.say(f"plan: {p['max_iters']} steps (warm-up {p['warmup_iters']}), {n_evals} "
             f"evaluation{'s' * (n_evals > 1)} on up to {cfg.eval_iters} batches, re-planned "
             f"every ~{chunk_seconds:.0f} s")
    if after_plan is not None:
        after_plan(p)
    chunks = 0
    while run.step < cfg.max_iters:
        chunks += 1
        probed = False
        other = next((n for n in options if n != now), None)  # has the load changed?
        if (other is not None and chunks % reprobe_chunks == 0 and run.step < cfg.max_iters - 2
                and speed[other] < 0.05 * (budget - (clock() - t0))):  # else: no pay-back
            if not pace.fits(speed[other], ckpt_s):  # it was slow: say so before it
                pace.say(f"  trying {other} thread{'s' * (other > 1)} again (it took "
                         f"{speed[other]:.3f} s a step) ...")
            set_threads(other)
            speed[other], loss = _timed(run, 2, pace, slower_than=0.9 * step_s)
            probed = True
            if speed[other] < 0.9 * step_s:
                pace.say(f"  now {speed[other]:.3f} s a step with {other} thread"
                         f"{'s' * (other > 1)} against {step_s:.3f} s with {now}: using {other}")
                now, step_s = other, speed[other]
            else:
                set_threads(now)
        next_eval = math.ceil((done_evals + 1) * cfg.max_iters / n_evals)
        # a shorter re-plan can put the next point behind the last evaluation: keep half a gap
        next_eval = max(next_eval, evals[-1]["step"] + math.ceil(cfg.max_iters / n_evals / 2))
        next_eval = max(run.step + 1, min(cfg.max_iters, next_eval))
        steps, spent, slowest = 0, 0.0, max(step_s, last_took)
        while run.step < next_eval and (
                (steps == 0 and not probed) or pace.fits(slowest, ckpt_s)):
            loss, last_took = pace.step(run)
            steps, spent, slowest = steps + 1, spent + last_took, max(slowest, last_took)
        if steps:
            step_s = max(spent / steps, 1e-9)
        if run.step >= next_eval:
            evals.append(evaluation(step_s))
            done_evals += 1
        after_chunk_done()
        replan()
        pace.say(f"  step {run.step}/{cfg.max_iters}: loss {loss:.3f}, {clock() - t0:.0f} s "
                 f"of {seconds:.0f} s, ~{(cfg.max_iters - run.step) * step_s:.0f} s of steps "
                 "to go")
    if evals[-1]["step"] != run.step:  # the run ended between evaluation points
        evals.append(evaluation(step_s))
        after_chunk_done()
    return {"evals": evals, "plans": plans, "seconds": clock() - t0, "step": run.step,
            "eval": evals[-1], "threads": now}


class _Pace:
    """The time since the last progress line, and whether one more step fits before the next.

    ``say`` is the caller's; a line more than ``max_gap`` after the last says so. ``fits``:
    a step of ``est`` seconds (plus ``extra``, the work after the chunk) ends by ``target``
    seconds after the last line and, were it ``surge`` times slower, still by ``max_gap``.
    """

    def __init__(self, say: Callable, clock: Callable[[], float], target: float,
                 max_gap: float, surge: float = 3.0):
        self._say, self.clock, self.target, self.max_gap = say, clock, target, max_gap
        self.surge, self.said, self.slowest = surge, clock(), 0.0

    def say(self, line: str, why: str = "") -> None:
        gap = self.clock() - self.said
        if gap > self.max_gap:  # it could not be cut: say why
            why = why or (f"one step took {self.slowest:.1f} s" if self.slowest else "")
            line += (f" ({gap:.1f} s since the last line{': ' * bool(why)}{why}; this machine "
                     "is very busy)")
        self._say(line)
        self.mark()

    def mark(self) -> None:
        """A line was printed (by ``say`` or by the caller)."""
        self.said, self.slowest = self.clock(), 0.0

    def fits(self, est: float, extra: float = 0.0) -> bool:
        spent = self.clock() - self.said + extra
        return spent + est <= self.target and spent + self.surge * est <= self.max_gap

    def step(self, run) -> tuple[float, float]:
        """One step of ``run``: its loss and seconds."""
        t = self.clock()
        loss = run.one_step()
        took = self.clock() - t
        self.slowest = max(self.slowest, took)
        return loss, took


def _timed(run, steps: int, pace: _Pace, slower_than: float = math.inf) -> tuple[float, float]:
    """Seconds a step over up to ``steps`` steps (at least one; fewer once another step at the
    slowest so far would not fit before the next line, or once the mean is over
    ``slower_than``: clearly the slower choice), and the last loss."""
    n, spent, slowest = 0, 0.0, 0.0
    while True:
        loss, took = pace.step(run)
        n, spent, slowest = n + 1, spent + took, max(slowest, took)
        if n >= steps or spent / n > slower_than or not pace.fits(slowest):
            return max(spent / n, 1e-9), loss


@contextlib.contextmanager
def _still(pace: _Pace, line: str):
    """While the block runs, a thread says ``line`` whenever ``pace.target`` seconds have passed
    since the last line: an evaluation (the learner's own code, one call) that runs slower than
    it was sized for still shows progress. Only on a real clock (a fake one does not move
    while the block runs)."""
    if pace.clock not in (time.perf_counter, time.monotonic):
        yield
        return
    done = threading.Event()

    def beat() -> None:
        while not done.wait(min(0.25, pace.target / 4)):
            if pace.clock() - pace.said > pace.target:
                pace.say(line)

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    try:
        yield
    finally:
        done.set()
        beater.join()


def _evaluated(run, pace: _Pace, after_eval=None, announce: bool = True) -> tuple[dict, dict]:
    """``run.evaluate()`` (after a line, where ``announce``), then ``after_eval``: the
    evaluation and the seconds each took (``eval``, ``after``)."""
    if announce:
        pace.say(f"evaluating at step {run.step} ...")
    t = pace.clock()
    with _still(pace, f"  still evaluating at step {run.step} ..."):
        out = dict(run.evaluate())
    took = pace.clock() - t
    out.setdefault("step", run.step)
    history = getattr(run, "history", None)
    if isinstance(history, dict):
        history.setdefault("eval", []).append(out)
    if pace.clock() - pace.said > pace.max_gap:  # it could not be cut: say so
        pace.say(f"  evaluated at step {run.step}", why=f"the evaluation took {took:.1f} s")
    ta = pace.clock()
    if after_eval is not None:
        after_eval(out)
        pace.mark()  # after_eval prints (the notebook's sample)
    return out, {"eval": max(took, 1e-9), "after": pace.clock() - ta}


# Final validation loss (nats per character) of the ``cpu_char`` model with the whole schedule
# fitted to this many steps. 150, 300, 600: ``python bench/train.py --expect 150,300,600
# --threads 1`` (the reference trainer, 2026-12-07; your GPT computes the same function);
# 1512: notebook 08's recorded run of your GPT fitted to 1512 steps (docs/benchmarks.md).
EXPECTED_VAL = {150: 2.507, 300: 2.379, 600: 2.053, 1512: 1.693}


def expected_val(steps: int, table: dict | None = None) -> float:
    """The loss to expect after a run of ``steps`` (linear in log steps between the table's
    rows, the end rows beyond them).

    >>> expected_val(200, {100: 2.5, 400: 2.1})
    2.3
    """
    table = EXPECTED_VAL if table is None else table
    xs = sorted(table)
    if steps <= xs[0]:
        return table[xs[0]]
    if steps >= xs[-1]:
        return table[xs[-1]]
    hi = next(x for x in xs if x >= steps)
    lo = xs[xs.index(hi) - 1]
    r = (math.log(steps) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return round(table[lo] + r * (table[hi] - table[lo]), 3)


def outlook(steps: int, step_seconds: float, seconds: float, weak: float = 2.1,
            table: dict | None = None) -> str:
    """Words for the learner: the loss this run can reach and, for a weak one, what would help.

    >>> print(outlook(1500, 0.2, 480, table={100: 2.6, 1500: 1.7}))
    about 1500 steps fit: expect a validation loss near 1.70 (chance is 4.26)
    """
    val = expected_val(steps, table)
    text = f"about {steps} steps fit: expect a validation loss near {val:.2f} (chance is 4.26)"
    if val <= weak:
        return text
    target = next((n for n in sorted(table or EXPECTED_VAL)
                   if expected_val(n, table) <= weak), None)
    need = "" if target is None else (
        f": about {math.ceil(target * step_seconds / 60)} min of steps on this machine reach "
        f"{weak:.1f}")
    return (f"{text}.\nThat is a weak model: its samples will be mostly made-up words. What "
            f"would help: a GPU (the gpu run reaches 1.5 in about a minute), more time "
            f"(MAX_SECONDS, at the top of the chapter, is {seconds:.0f} s{need}), a smaller "
            "model (fewer layers or a narrower d_model: more steps in the same time), and "
            "closing the other programs that use the CPU")
