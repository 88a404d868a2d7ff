"""Where each student's grading job runs: a local thread pool, or a Dask cluster.

Both run the same trusted per-student job, :func:`student.grade_student` (its own course
folder, its own sandboxed nbgrader process with its limits), and hand the parent a
:class:`student.StudentResult`. The parent alone writes results, grades.csv, the gradebook,
the report and the feedback files.

- locally (default): ``workers`` threads, each waiting on one student's limited process;
- on Dask (``course-grade --scheduler tcp://HOST:8786``): one task per student
  (:func:`grade_on_worker`), graded in a fresh folder of the worker's and returned as plain
  data, so a task run again starts clean; the parent commits the first copy that returns
  (:func:`publish_remote`). After ``scheduler_timeout`` s with no worker the run stops
  (:class:`ClusterError`).

Workers need what the local job needs, at the same paths: this course checkout with its
Python environment, bubblewrap, the submissions folder and ``OUT_DIR/.work`` (the template
course the parent builds); on several machines, put them on a shared file system.

Example: ``for sub, result, remote in Dispatcher(None, 2).run(todo, job, args, info): ...``.
"""

from __future__ import annotations

import queue
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .. import pyast
from ..config import GradeConfig
from .results import publish_student
from .student import StudentResult, failed_result
from .submissions import Submission

# remote: None (graded here), else {"feedback": {rel path: html}, "notebooks": {rel path: bytes}}
Outcome = tuple[Submission, StudentResult, dict | None]

CONNECT_S = 10  # a scheduler answers in milliseconds: an address that does not is wrong
POLL_S = 2.0  # how often the cluster's workers are counted while students wait
NOTEBOOKS_CAP = 128 * 2**20  # one student's notebooks sent back (outputs are capped per cell)


class ClusterError(Exception):
    """The Dask cluster cannot grade: its scheduler unreachable, or no worker for longer than
    ``--scheduler-timeout``. The message is course-grade's line; nothing is stored for the
    students not graded, so the next run grades them."""


def _scratch() -> Path:
    """A fresh folder for one task: in the Dask worker's local directory when there is one."""
    base = None
    try:
        from distributed import get_worker

        base = get_worker().local_directory
    except (ImportError, ValueError):
        pass
    return Path(tempfile.mkdtemp(prefix="course-grade-", dir=base))


def grade_on_worker(sub: Submission, info, template: Path, config: GradeConfig,
                    fingerprint: str) -> dict:
    """The Dask task: grade one student in a scratch folder (nothing else is written);
    return ``{"result", "feedback": {path: html}, "notebooks": {path: bytes}}``."""
    from .runner import make_runner
    from .student import grade_student

    pyast.install()  # a Dask worker runs tasks in threads too
    tmp = _scratch()
    try:
        out = tmp / "out"
        r = grade_student(sub, info, template, tmp / "work", out, config, fingerprint,
                          make_runner(config))
        feedback = {rel: (out / rel).read_text(encoding="utf-8") for rel in r.feedback}
        notebooks, left_out = graded_notebooks(tmp / "work" / "students" / sub.student,
                                               sub.student, list(info))
        r.notes += [f"{rel}: not sent back (over {NOTEBOOKS_CAP >> 20} MB in all)"
                    for rel in left_out]
        return {"result": dict(r.__dict__), "feedback": feedback, "notebooks": notebooks}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def graded_notebooks(root: Path, student: str, assignments: list[str],
                     cap: int = NOTEBOOKS_CAP) -> tuple[dict[str, bytes], list[str]]:
    """The files :func:`results.publish_student` would copy from ``root``, as {relative
    path: bytes}, at most ``cap`` bytes in all; and the paths left out over the cap."""
    files, left_out, total = {}, [], 0
    for a in assignments:
        if not any((root / "submitted" / student / a).glob("*.ipynb")):
            continue  # nothing handed in: publish_student makes no folder either
        for kind in ("submitted", "autograded"):
            for path in sorted((root / kind / student / a).rglob("*")):
                if path.name == "timestamp.txt" or path.is_symlink() or not path.is_file():
                    continue
                rel = path.relative_to(root).as_posix()
                total += path.stat().st_size
                if total > cap:
                    left_out.append(rel)
                else:
                    files[rel] = path.read_bytes()
    return files, left_out


def publish_remote(out: Path, student: str, assignments: list[str], remote: dict) -> None:
    """The parent's side of a remote result: its feedback pages under ``OUT_DIR/feedback/``,
    its notebooks under ``OUT_DIR/submitted/`` and ``autograded/`` exactly as a local run's
    :func:`results.publish_student` puts them (they are unpacked into a grading folder of the
    same shape, then published by it)."""
    write_feedback(out, student, remote["feedback"])
    root = Path(tempfile.mkdtemp(prefix=f"remote-{student}-", dir=out / ".work"))
    try:
        allowed = [(root / kind / student).resolve() for kind in ("submitted", "autograded")]
        for rel, data in remote.get("notebooks", {}).items():
            path = (root / rel).resolve()
            if not any(path.is_relative_to(a) for a in allowed):  # only this student's
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        publish_student(root, out, student, assignments)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write_feedback(out: Path, student: str, feedback: dict[str, str]) -> None:
    """The parent's side of a remote result: put its feedback pages under ``out``."""
    shutil.rmtree(out / "feedback" / student, ignore_errors=True)
    root = (out / "feedback").resolve()
    for rel, text in feedback.items():
        path = (out / rel).resolve()
        if not path.is_relative_to(root):  # only ever feedback/<student>/<notebook>.html
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


class Dispatcher:
    """Run one job per student, locally (``scheduler=None``) or on a Dask cluster."""

    def __init__(self, scheduler: str | None, workers: int, scheduler_timeout: float = 600,
                 say: Callable[[str], None] | None = None):
        self.scheduler = scheduler
        self.workers = max(1, workers)
        self.scheduler_timeout = scheduler_timeout
        self.say = say or (lambda msg: print(f"course-grade: {msg}", file=sys.stderr))
        self._pool = None
        self._client = None
        self._futures = []

    @property
    def name(self) -> str:
        return f"dask {self.scheduler}" if self.scheduler else f"{self.workers} workers"

    def connect(self) -> None:
        """Reach the Dask scheduler (nothing to do locally), before any grading work: an
        address that does not answer in :data:`CONNECT_S` seconds raises :class:`ClusterError`.
        """
        if self.scheduler is None or self._client is not None:
            return
        from distributed import Client

        try:
            self._client = Client(self.scheduler, timeout=CONNECT_S, set_as_default=False)
        except (OSError, ValueError) as e:  # refused, timed out, a malformed address
            raise ClusterError(f"cannot reach the Dask scheduler at {self.scheduler} ({e}); "
                               "check --scheduler and that `dask scheduler` runs there") from None

    def run(self, todo: list[Submission], local_job: Callable[[Submission], StudentResult],
            remote_args: Callable[[Submission], tuple], info) -> Iterator[Outcome]:
        """Yield (submission, result, remote) as students finish. ``local_job(sub)`` grades
        here (``remote`` None); ``remote_args(sub)``: :func:`grade_on_worker`'s arguments. A
        job that raises yields :func:`student.failed_result` (graded again next run); a
        cluster with no worker for ``scheduler_timeout`` s raises :class:`ClusterError`.
        """
        if not todo:
            return
        if self.scheduler is None:
            pyast.install()  # the pool's threads parse at once (CPython 3.11.7, gh-106905)
            self._pool = ThreadPoolExecutor(max_workers=self.workers)
            futures = {self._pool.submit(local_job, s): s for s in todo}
            self._futures = list(futures)
            for fut in as_completed(futures):
                yield self._outcome(futures[fut], fut, info, remote=False)
            self._pool.shutdown()
            return
        from distributed import as_completed as dask_completed

        self.connect()
        futures = {
            self._client.submit(grade_on_worker, s, *remote_args(s), pure=False,
                                key=f"grade-{s.student}-{id(self):x}"): s
            for s in todo
        }
        self._futures = list(futures)
        # finished tasks come through a queue, so that the wait for one is cut every POLL_S
        # to count the workers (Dask itself waits for a worker forever, silently)
        ready: queue.Queue = queue.Queue()
        done = dask_completed(self._futures, loop=self._client.loop)  # not a default client

        def feed():
            try:
                for f in done:
                    ready.put(f)
            except Exception as e:  # said by the loop below, not lost with this thread
                ready.put(e)

        threading.Thread(target=feed, daemon=True, name="course-grade-dask").start()
        idle_since = None  # since when the cluster has had no worker
        for left in range(len(futures), 0, -1):
            while True:
                try:
                    fut = ready.get(timeout=POLL_S)
                    break
                except queue.Empty:
                    idle_since = self._watch(idle_since, left)
            if isinstance(fut, Exception):
                raise fut
            yield self._outcome(futures[fut], fut, info, remote=True)
            if idle_since is not None and left > 1:  # a worker back? (said, the wait reset)
                idle_since = self._watch(idle_since, left - 1)

    def _watch(self, idle_since: float | None, left: int) -> float | None:
        """Count the cluster's workers: none says so (once), none for longer than
        ``scheduler_timeout`` raises :class:`ClusterError`; returns the new ``idle_since``."""
        if self._client.nthreads():
            if idle_since is not None:
                self.say(f"a worker joined the Dask cluster at {self.scheduler}; grading goes on")
            return None
        now = time.monotonic()
        if idle_since is None:
            self.say(f"the Dask cluster at {self.scheduler} has no worker; waiting up to "
                     f"{self.scheduler_timeout:g} s (--scheduler-timeout)")
            return now
        if now - idle_since > self.scheduler_timeout:
            raise ClusterError(
                f"the Dask cluster at {self.scheduler} had no worker for "
                f"{self.scheduler_timeout:g} s (--scheduler-timeout): stopped; {left} "
                "student(s) not graded, rerun to grade them")
        return idle_since

    @staticmethod
    def _outcome(sub, fut, info, remote: bool) -> Outcome:
        try:
            value = fut.result()
        except Exception as e:  # a bug of the grader, a lost cluster: say so, go on
            return sub, failed_result(sub, info, f"{type(e).__name__}: {e}"[:200]), None
        if not remote:
            return sub, value, None
        return sub, StudentResult(**value["result"]), value

    def close(self, cancel: bool = False) -> None:
        """Stop: cancel what has not run (``cancel``) and let go of the pool or cluster."""
        if self._pool is not None:
            self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
        if self._client is not None:
            if cancel:
                try:
                    self._client.cancel(self._futures)
                except Exception:
                    pass
            self._client.close()
