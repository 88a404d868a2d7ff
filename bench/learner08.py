"""Chapter 08 as a learner runs it: the solution notebook top to bottom through section 7's
"your GPT" run, on this machine's CPU, optionally with CPU hogs beside it (issue 49 item 4).

    .venv/bin/python bench/learner08.py                # idle machine
    .venv/bin/python bench/learner08.py --hogs 2       # two busy processes beside it
    .venv/bin/python bench/learner08.py --hogs 2 --through ref   # on to the reference's run

Runs the cells with nbclient in one kernel (default ``MAX_SECONDS``), notes when each output
of the run cell appears, samples ``/proc/loadavg`` every 15 s, and prints each cell's time, the
largest gap between two progress lines of the run (the first counted from the cell's start;
outputs are polled every 0.5 s), the load range and the run's last lines (steps, val loss,
warm-up and decay). ``--through ref`` runs on through the reference trainer's cell and reports
every training cell on the way (the run, the reference) the same way, each on its own.
``--keep DIR`` writes the executed notebook and the timings there. No
assertion: the figures go to the benchmarks page. The kernel gets no ``OMP_NUM_THREADS`` or
``MKL_NUM_THREADS`` (dropped if set), so torch sees every core, as on a learner's laptop.
``COURSE_SMOKE=1`` runs the notebook's smoke size (a 30 s budget on the tiny model): a check
that the script works, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "solutions" / "08_training" / "08_training.ipynb"
RUN_CELL = "your_model = run = char_eval = None"  # section 7's run of "your GPT"
REF_CELL = "trainer.fit_to_time("  # the reference trainer's run, after it
TRAINS = ("fit_run(", "fit_to_time(")  # a cell that trains


def _report(name: str, stamps: list, cell) -> None:
    """The gaps between one training cell's outputs (the first from the cell's start)."""
    times = [t for t, _ in stamps]
    gaps = [b - a for a, b in zip([0.0, *times], times)] or [0.0]
    named = sum("since the last line" in text for _, text in stamps)  # a long gap, said
    print(f"{name}: first output after {times[0] if times else 0:.1f} s, largest gap "
          f"(the cell's start included) {max(gaps):.1f} s, {sum(g > 10 for g in gaps)} gaps "
          f"over 10 s, {named} line(s) saying why they came late")
    print("".join(o.get("text", "") for o in cell.get("outputs", []))[-1500:])


def _watch(cell, stamps: list, done: threading.Event) -> None:
    """Append (seconds since start, text) for each new output of ``cell`` until ``done``."""
    start, seen = time.monotonic(), 0
    while not done.is_set():
        outputs = cell.get("outputs", [])
        for o in outputs[seen:]:
            text = o.get("text") or str(o.get("data", {}).get("text/plain", ""))
            stamps.append((round(time.monotonic() - start, 1), text[:200]))
        seen = len(outputs)
        done.wait(0.5)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hogs", type=int, default=0, help="busy processes beside the run")
    p.add_argument("--through", choices=("run", "ref"), default="run",
                   help="the last cell: section 7's run of your GPT, or the reference's after it")
    p.add_argument("--keep", type=Path, help="write the executed notebook and timings here")
    args = p.parse_args()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    run_cell = next(i for i in code if RUN_CELL in nb.cells[i].source)
    last = run_cell if args.through == "run" else next(
        i for i in code if i > run_cell and REF_CELL in nb.cells[i].source)
    watched = [i for i in code if run_cell <= i <= last
               and any(t in nb.cells[i].source for t in TRAINS)]  # the run cell first
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the kernel's threads: a learner's
        os.environ.pop(var, None)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    loads, stop = [], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            loads.append([float(x) for x in Path("/proc/loadavg").read_text().split()[:2]])
            stop.wait(15)

    threading.Thread(target=sample, daemon=True).start()
    client = NotebookClient(nb, timeout=-1, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    stamps: dict = {i: [] for i in watched}
    t0 = time.monotonic()
    try:
        with client.setup_kernel():
            for i, cell in enumerate(nb.cells[:last + 1]):
                if cell.cell_type != "code":
                    continue
                start, done = time.monotonic(), threading.Event()
                watcher = threading.Thread(target=_watch,
                                           args=(cell, stamps.get(i, []), done))
                watcher.start()
                client.execute_cell(cell, i)
                done.set()
                watcher.join()
                print(f"cell {i}: {time.monotonic() - start:.1f} s", flush=True)
    finally:
        stop.set()
        for h in hogs:
            h.kill()
    print(f"through cell {last}: {time.monotonic() - t0:.0f} s, {args.hogs} hog(s); load "
          f"1 min {min(x[0] for x in loads):.2f}-{max(x[0] for x in loads):.2f}, 5 min "
          f"{min(x[1] for x in loads):.2f}-{max(x[1] for x in loads):.2f}")
    for i in watched:
        name = ("run cell" if i == run_cell else
                "reference cell" if REF_CELL in nb.cells[i].source else "training cell")
        _report(f"{name} {i}", stamps[i], nb.cells[i])
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, args.keep / "08_training.ipynb")
        (args.keep / "timings.json").write_text(json.dumps({"stamps": stamps, "loads": loads}))


if __name__ == "__main__":
    main()
