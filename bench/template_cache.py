"""The class template copied from the per-user cache against built in the output folder.

    OMP_NUM_THREADS=1 .venv/bin/python bench/template_cache.py --assignment 01_attention \
        --rounds 3

A class of ``--students`` students (``grade_class.build_class``: correct, wrong, blank, ...)
is graded ``--rounds`` times by each of two course-grade runs, each into a fresh ``--out``,
alternating which goes first: ``COURSE_CACHE=off`` (the template built in the output folder,
as every run into a new folder did before the cache) and ``COURSE_CACHE=<a cache filled
filled before each run>``. Prints wall and CPU of every run (``grade_class.CpuMeter``: every
process, kernels included), the means, the ratio, and whether the two modes' grades.csv rows
are identical. No assertion.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grade_class import REPO, CpuMeter, _env, _uptime, build_class  # noqa: E402


def _rows(out: Path) -> list[tuple]:
    with open(out / "grades.csv") as f:
        return sorted((r["student"], r["exercise"], r["points"], r["status"])
                      for r in csv.DictReader(f))


def main() -> None:
    from autograder.grading.config import GradeConfig
    from autograder.grading.env import CACHE
    from autograder.grading.parent.course import build_template

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--assignment", nargs="+", default=["01_attention"])
    ap.add_argument("--students", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--source", type=Path, default=REPO / "solutions")
    args = ap.parse_args()
    meter = CpuMeter()
    print(f"CPU meter: {meter.kind}\n{_uptime()}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            cache = tmp / "cache"
            os.environ[CACHE] = str(cache)
            _, info = build_template(args.source.resolve(), args.assignment, tmp / "describe",
                                     GradeConfig())
            # the cache filled before each "cache" run, unmetered, by a fresh process: a no-op
            # unless the code changed since (the key follows it; a shared checkout)
            fill = [sys.executable, "-c",
                    "import sys; from pathlib import Path\n"
                    "from autograder.grading.config import GradeConfig\n"
                    "from autograder.grading.parent.course import build_template\n"
                    "build_template(Path(sys.argv[1]), sys.argv[3:], Path(sys.argv[2]), "
                    "GradeConfig())\n", str(args.source.resolve()), str(tmp / "fill"),
                    *args.assignment]
            students = build_class(info, tmp / "class", args.students)
            modes = {"built in --out (COURSE_CACHE=off)": "off", "from the cache": str(cache)}
            runs: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
            rows: dict[str, list] = {}
            for r in range(args.rounds):
                order = list(modes) if r % 2 == 0 else list(modes)[::-1]
                for mode in order:
                    out = tmp / f"out-{modes[mode] != 'off'}-{r}"
                    env = dict(_env(tmp), **{CACHE: modes[mode]})
                    if modes[mode] != "off":
                        subprocess.run(fill, cwd=REPO, env=env, check=True)
                    before = set(os.listdir(cache))
                    cmd = [sys.executable, "-m", "autograder.grade", str(tmp / "class"),
                           "--out", str(out), "--source", str(args.source), "--no-progress",
                           "--workers", str(args.workers), "--assignment", *args.assignment]
                    wall, cpu = meter.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
                    (template,) = (out / ".work").glob("template-*")
                    if modes[mode] != "off" and template.name not in before:
                        print(f"round {r + 1} {mode}: the code changed meanwhile (a new key):"
                              " run again", flush=True)
                        continue
                    runs[mode].append((wall, cpu))
                    rows.setdefault(mode, _rows(out))
                    print(f"round {r + 1} {mode}: {wall:.1f} s wall, {cpu:.1f} s CPU",
                          flush=True)
            print(f"{len(students)} student(s) x {', '.join(args.assignment)}, "
                  f"--workers {args.workers}, {args.rounds} rounds")
            mean = {m: (statistics.mean(w for w, _ in v), statistics.mean(c for _, c in v))
                    for m, v in runs.items()}
            for m, (w, c) in mean.items():
                cpus = ", ".join(f"{c:.1f}" for _, c in runs[m])
                print(f"  {m}: {w:.1f} s wall, {c:.1f} s CPU (mean; CPU {cpus})")
            (wo, co), (wc, cc) = mean.values()
            print(f"  off / cache: {wo / wc:.2f}x wall, {co / cc:.2f}x CPU")
            same = len({tuple(v) for v in rows.values()}) == 1
            print(f"  grades.csv: {len(next(iter(rows.values())))} rows, "
                  f"{'identical' if same else 'DIFFERENT'}")
    finally:
        meter.close()
        print(_uptime())


if __name__ == "__main__":
    main()
