"""One grading configuration: built once from ``course-grade``'s command line, passed down.

:class:`GradeConfig` is frozen: every part of the grader (the course folders, the runner, the
sandbox, the kernel's launcher) reads the same values, and nothing changes them on the way.
The defaults live here and only here (``course-grade``'s options, ``selfcheck`` and the
course's ``nbgrader_config.py`` read them from this module).

Example: ``GradeConfig(cell_timeout=5).memory_mb`` is ``4096``;
``GradeConfig.from_dict(GradeConfig().to_dict()) == GradeConfig()``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

CELL_TIMEOUT_S = 120  # one cell, seconds: a slow laptop imports torch and runs a few checks
ISOLATION = ("auto", "cgroup", "pinned", "none")  # see isolation.py


@dataclass(frozen=True)
class GradeConfig:
    """What ``course-grade`` grades with (see ``course-grade --help`` for each option).

    >>> GradeConfig(workers=2, cpus=4).threads
    2
    >>> GradeConfig(memory_mb=4096).tmp_mb  # /tmp: a quarter of the memory limit
    1024
    """

    timeout: float = 900.0  # wall time for one student (all notebooks), seconds
    cell_timeout: int = CELL_TIMEOUT_S  # one cell (interrupted; the rest of the notebook runs)
    memory_mb: int = 4096  # address space of every process of one student's grading
    workers: int = 1  # students graded at once
    cpus: int = 1  # cores of this machine the workers share
    sandboxed: bool = True  # the kernel runs in bubblewrap (False: ``--unsandboxed``)
    nproc: int = 128  # tasks (threads count) of the sandbox user: a fork bomb stops here
    fsize_mb: int = 256  # largest file the kernel may write
    tmp_mb: int = 0  # size of the sandbox's RAM-backed /tmp, MB; 0: a quarter of memory_mb
    pids: int = 512  # tasks of one student's whole grading (cgroup pids.max)
    isolation: str = "auto"  # per-student CPU isolation: auto | cgroup | pinned | none
    output_chars: int = 2**20  # stream output one cell sends, per stream; the rest is dropped

    def __post_init__(self):
        if not self.tmp_mb:  # /tmp is memory: a share of the student's memory limit
            object.__setattr__(self, "tmp_mb", max(16, self.memory_mb // 4))
        if self.isolation not in ISOLATION:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION)}")

    @property
    def threads(self) -> int:
        """BLAS/torch threads per student: the cores shared among the workers."""
        return max(1, self.cpus // max(1, self.workers))

    @classmethod
    def from_args(cls, args) -> GradeConfig:
        """From ``course-grade``'s parsed arguments."""
        return cls(
            timeout=float(args.timeout),
            cell_timeout=int(args.cell_timeout),
            memory_mb=int(args.memory),
            workers=max(1, int(args.workers)),
            cpus=os.cpu_count() or 1,
            sandboxed=not args.unsandboxed,
            tmp_mb=int(getattr(args, "tmp", 0) or 0),
            isolation=getattr(args, "isolation", "auto"),
        )

    def to_dict(self) -> dict:
        """Plain data (JSON-ready), for the processes that need it (the kernel's launcher)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GradeConfig:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
