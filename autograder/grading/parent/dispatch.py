"""Where each student's grading job runs: a local thread pool, or a Dask cluster.

Both run the same trusted per-student job, :func:`student.grade_student` (its own course
folder, its own sandboxed nbgrader process with its limits), and hand the parent a
:class:`student.StudentResult`. The parent alone writes results, grades.csv, the gradebook,
the report and the feedback files.

- locally (default): ``workers`` threads, each waiting on one student's limited process;
- on Dask (``course-grade --scheduler tcp://HOST:8786``): each student is one task
  (:func:`grade_on_worker`) run by whichever ``dask worker`` is free. The worker grades in a
  fresh folder of its own and returns plain data (the result and the feedback pages), so a task
  that Dask runs again (its worker died) starts clean and leaves nothing behind in OUT_DIR: a
  student is committed once, by the parent, when the first copy of the task returns.

Workers need what the local job needs, at the same paths: this course checkout with its
Python environment, bubblewrap, the submissions folder and ``OUT_DIR/.work`` (the template
course the parent builds); on several machines, put them on a shared file system.

Example: ``for sub, result, feedback in Dispatcher(None, 2).run(todo, job): ...``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .. import pyast
from ..config import GradeConfig
from .student import StudentResult, failed_result
from .submissions import Submission

Outcome = tuple[Submission, StudentResult, dict[str, str] | None]  # feedback: rel path -> html


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
    """The Dask task: grade one student in a scratch folder; return plain data.

    ``{"result": StudentResult fields, "feedback": {relative path: html}}``. Running it twice
    for the same student is harmless: nothing outside the scratch folder is written.
    """
    from ..sandbox import make_runner
    from .student import grade_student

    pyast.install()  # a Dask worker runs tasks in threads too
    tmp = _scratch()
    try:
        out = tmp / "out"
        r = grade_student(sub, info, template, tmp / "work", out, config, fingerprint,
                          make_runner(config))
        feedback = {rel: (out / rel).read_text(encoding="utf-8") for rel in r.feedback}
        return {"result": dict(r.__dict__), "feedback": feedback}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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

    def __init__(self, scheduler: str | None, workers: int):
        self.scheduler = scheduler
        self.workers = max(1, workers)
        self._pool = None
        self._client = None
        self._futures = []

    @property
    def name(self) -> str:
        return f"dask {self.scheduler}" if self.scheduler else f"{self.workers} workers"

    def run(self, todo: list[Submission], local_job: Callable[[Submission], StudentResult],
            remote_args: Callable[[Submission], tuple], info) -> Iterator[Outcome]:
        """Yield (submission, result, feedback) as students finish, in finishing order.

        ``local_job(sub)`` grades one student here (feedback already in OUT_DIR: None);
        ``remote_args(sub)`` gives :func:`grade_on_worker`'s arguments after ``sub``. A job
        that raises (a grader bug, a disk problem, a task Dask gave up on) yields a
        :func:`student.failed_result`, which the next run grades again.
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
        from distributed import Client
        from distributed import as_completed as dask_completed

        self._client = Client(self.scheduler)
        futures = {
            self._client.submit(grade_on_worker, s, *remote_args(s), pure=False,
                                key=f"grade-{s.student}-{id(self):x}"): s
            for s in todo
        }
        self._futures = list(futures)
        for fut in dask_completed(list(futures)):
            yield self._outcome(futures[fut], fut, info, remote=True)

    @staticmethod
    def _outcome(sub, fut, info, remote: bool) -> Outcome:
        try:
            value = fut.result()
        except Exception as e:  # a bug of the grader, a lost cluster: say so, go on
            return sub, failed_result(sub, info, f"{type(e).__name__}: {e}"[:200]), None
        if not remote:
            return sub, value, None
        return sub, StudentResult(**value["result"]), value["feedback"]

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
