"""Kernels started ahead: the next notebook's sandboxed kernel boots while this one's runs.

A student's notebooks are graded one after another in one process (``nbgrader_main``), each in
a fresh sandboxed kernel. Starting that kernel (bwrap, Python, ipykernel, then the setup cell's
``import torch``) took 3 to 4 s of every notebook, during which nothing else happened. With a
:class:`KernelQueue` installed, the kernel of the next notebook in the queue is started as soon
as the current one is handed to nbgrader, so its start-up overlaps the current notebook's run
(on a second core), and the kernel imports the course's heavy libraries before it answers
(``outcap.PREIMPORT``), so the setup cell finds them loaded. The CPU spent is the same; the
wall time per student falls where a core is idle, so the queue is used only where the class
has fewer workers than cores (:func:`depth`). What it costs: the
kernel waiting for its notebook holds its memory (about 300 MB with torch loaded) and its
threads, counted in the same limits as the running kernel's (``GradeConfig.memory_mb``,
``nproc``).

Each kernel is still its own sandbox, exactly as before: its own ``bwrap`` (or its own
namespaces in a fork of the zygote: ``zygote.py``) with the mounts of its own assignment only
(``runners.sandbox_spec``: the stubbed ``autograder`` and reference package of that chapter,
its probe folder), and its own folder of ZeroMQ sockets and
connection file (``ipc-<n>``), bound into that sandbox alone: the kernel running the current
notebook can neither see the next one's files nor reach its sockets. A kernel that was started
for a notebook nbgrader does not run after all (its assignment failed before execution) is
killed when the queue moves past it, and whatever is left when grading ends by :meth:`close`.

``preprocessors.QueuedExecute`` (nbgrader's ``Execute``) takes its kernel from the queue
installed in its thread (:func:`current`) instead of starting one; without a queue it behaves
as ``Execute``. A grading process that grades a student in lanes (``nbgrader_main``: two
notebooks at once, where the class leaves a worker idle) has a queue per lane, each installed
in its lane's thread and starting that lane's next kernel ahead; the kernels of all the queues
of a process are numbered together, so no two share an ipc folder or a spec file.

Example (``nbgrader_main``)::

    queue = KernelQueue(root, ["01_attention", "02_masking"], ready)  # one per notebook
    queue.start_ahead(config)  # the first notebook's kernel, before nbgrader reads it
    install(queue)
    ...  # nbgrader autograde: each Execute calls queue.take(assignment, config, extra)
    queue.close()
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path

_CURRENT = threading.local()  # each lane of nbgrader_main grades in a thread of its own
DEPTH = 1  # kernels started ahead (each holds its memory: torch is loaded)
_NUMBERS = itertools.count(1)  # each kernel's ipc folder and spec file, unique in the process


def install(queue: KernelQueue | None) -> None:
    """Make ``queue`` the one ``QueuedExecute`` takes kernels from, in this thread (None: start
    them as usual)."""
    _CURRENT.queue = queue


def current() -> KernelQueue | None:
    return getattr(_CURRENT, "queue", None)


def depth(config) -> int:
    """How many kernels a grading process starts ahead: :data:`DEPTH` where the class leaves a
    core idle (fewer workers than cores: the next kernel starts there), else 0. With every
    core busy grading, a kernel started ahead saves no time (its start-up takes the same CPU)
    and holds one more kernel's memory per grading process.

    >>> from autograder.grading.config import GradeConfig
    >>> depth(GradeConfig(workers=1, cpus=2)), depth(GradeConfig(workers=2, cpus=2))
    (1, 0)
    """
    return DEPTH if config.workers < config.cpus else 0


class KernelQueue:
    """The kernels a student's grading needs, in order (one entry per notebook, by assignment),
    each started ``depth`` notebooks ahead. Only with the sandbox (``.grader/sandbox-base.json``).

    ``ready(assignment)`` is called before a kernel of that assignment is started (it prepares
    the assignment's folders, which the kernel's mounts need; it must be idempotent);
    ``imports(assignment)`` names the modules that kernel imports before it answers, besides
    ``outcap.PREIMPORT``."""

    def __init__(self, root: Path, order: list[str], ready=None, depth: int = DEPTH,
                 imports=None):
        self.root = Path(root)
        self.order = list(order)
        self.ready = ready or (lambda assignment: None)
        self.imports = imports or (lambda assignment: [])  # modules its kernel loads ahead
        self.depth = depth
        self.ahead: list = []  # started kernel managers, for order[0], order[1], ...
        self.count = 0

    # ------------------------------------------------------------ what nbgrader's Execute calls
    def take(self, assignment: str, config, extra_arguments: list[str] | tuple = ()):
        """A started kernel manager for a notebook of ``assignment`` (the one started ahead
        for it, else one started now); the kernels of the next notebooks started."""
        while self.order and self.order[0] != assignment:  # notebooks nbgrader did not run
            self.order.pop(0)
            if self.ahead:
                self._kill(self.ahead.pop(0))
        if self.order:
            self.order.pop(0)
        km = self.ahead.pop(0) if self.ahead else self._start(assignment, config,
                                                               extra_arguments)
        self.start_ahead(config, extra_arguments)
        return km

    def start_ahead(self, config, extra_arguments: list[str] | tuple = ()) -> None:
        """Start the kernels of the next ``depth`` notebooks that have none yet."""
        while len(self.ahead) < min(self.depth, len(self.order)):
            self.ahead.append(self._start(self.order[len(self.ahead)], config,
                                          extra_arguments))

    def close(self) -> None:
        """Kill the kernels started ahead that nbgrader did not take."""
        while self.ahead:
            self._kill(self.ahead.pop(0))

    # ------------------------------------------------------------ starting and killing
    def _spec_file(self, assignment: str) -> Path:
        """This kernel's sandbox spec: its assignment's mounts, its own ipc folder."""
        from .runners import sandbox_spec

        self.count += 1
        number = next(_NUMBERS)
        spec = sandbox_spec(self.root, assignment)
        ipc = Path(spec["home"]) / f"ipc-{number}"
        ipc.mkdir()
        if os.geteuid() == 0:
            os.chown(ipc, spec["uid"], spec["uid"])
        spec["ipc"] = str(ipc)
        from .outcap import IMPORTS_VAR

        # started ahead: outcap.preimport loads torch & co, and the exercise table's
        # kernel_imports of the notebook, before the kernel answers
        spec["env"][IMPORTS_VAR] = ",".join(self.imports(assignment))
        path = self.root / ".grader" / f"sandbox-{number}.json"
        path.write_text(json.dumps(spec))
        return path

    def _start(self, assignment: str, config, extra_arguments: list[str]):
        from jupyter_client import AsyncKernelManager
        from jupyter_core.utils import run_sync

        from .bwrap import KERNEL_NAME
        from .kernel import SPEC_VAR

        self.ready(assignment)
        spec_path = self._spec_file(assignment)
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, config=config)
        km.transport = "ipc"
        km.ip = str(Path(json.loads(spec_path.read_text())["ipc"]) / "k")
        env = {**os.environ, SPEC_VAR: str(spec_path)}
        run_sync(km.start_kernel)(env=env, extra_arguments=list(extra_arguments))
        return km

    @staticmethod
    def _kill(km) -> None:
        from jupyter_core.utils import run_sync

        try:
            run_sync(km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - already gone; the sandbox dies with the grader
            pass
