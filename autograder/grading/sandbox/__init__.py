"""The grading sandbox: the student's kernel runs in bubblewrap; the grader stays outside.

Who runs where (one student, one assignment):

- trusted, outside the sandbox: ``course-grade`` (the parent: results, grades.csv, the class
  gradebook) and, in the limited process the runner starts, nbgrader itself (it reads the
  source notebooks and the student's own gradebook copy, restores the test cells, sends each
  cell to the kernel, scores the outputs, writes the autograded notebook and the feedback);
- untrusted, inside ``bwrap``: only the Jupyter kernel that executes the cells. nbgrader
  starts it through the ``course-sandbox`` kernelspec this module writes, whose command is
  ``python -m autograder.grading.sandbox kernel SPEC CONNECTION_FILE`` (``kernel.py``): it
  copies the connection file where the kernel may read it, sets the limits and ``exec``-s
  ``bwrap``.

What the kernel sees and may do:

- files: the system (``/usr``, ``/etc`` ...), Python and the packages the notebook imports
  (the virtual environment, ``autograder/``, ``transformer_ref/``), read-only; a working
  folder holding a read-only copy of this student's submission; an empty private ``/tmp``;
  nothing else: not ``solutions/``, the course folder with its gradebook and source
  notebooks, other students' work, the submissions folder or ``/root``;
- no network (``--unshare-net``: a loopback of its own); the kernel talks to nbgrader over
  Unix sockets (ZeroMQ ``ipc``) in a folder of its own bound into the sandbox;
- its own PID namespace (it cannot see or signal the grader, nor the student's other
  kernel) that dies with it (``--die-with-parent``; a forked kernel's namespace dies with
  the kernel): every process it started is gone when grading ends;
- run as an unprivileged user of its own (a random uid, when the grader runs as root), with
  limits: processes (``RLIMIT_NPROC``: a fork bomb stops there), file size
  (``RLIMIT_FSIZE``), and, inherited from the runner, memory (``RLIMIT_AS``) and CPU time;
  wall time is the runner's (per student) and nbgrader's (per cell).
  The limits' values come from the grading run's :class:`~autograder.grading.config.GradeConfig`.

The parts:

- ``policy.py``: the source policy (what the parent flags) and nbgrader's two hooks;
- ``bwrap.py``: whether bubblewrap works here, what the kernel may read, the ``bwrap`` argv;
- ``runners.py``: the student's course folder made ready for the grading process, with the
  hooks' config (called by ``BwrapRunner`` and ``UnsandboxedRunner`` of ``parent/runner.py``);
- ``kernel.py`` (``python -m autograder.grading.sandbox``): the kernel's launcher, run by
  Jupyter as the kernelspec's command, and the uid drop inside the sandbox;
- ``zygote.py``: where the grader runs as root, one sandbox per grading process in which
  torch, numpy, pyplot and ipykernel are imported once; each kernel is a fork of it, given
  namespaces of its own (mounts, PID, network, IPC: the same isolation as a ``bwrap`` of its
  own) before it drops to the sandbox user: the one way a kernel starts where the grader is
  root; elsewhere each kernel starts in a ``bwrap`` of its own.

Not defended: a student's code can patch the kernel it runs in (the source policy only flags
what it recognises); the checks judge outside it, from sealed records (``autograde/``). A
fork bomb is stopped by the process limit and leaves nothing behind, but the forked copies
of the kernel share its sockets: the bomber's other rows may or may not be graded.
"""

_NAMES = {  # imported on first use: the kernel's launcher (``python -m ...sandbox``) loads
    # this package and needs none of them
    "bwrap": ("KERNEL_NAME", "bwrap_argv", "bwrap_path", "readonly_paths"),
    "policy": ("Policy", "load_policy", "policy_problem", "trusted_cells"),
    "runners": ("dedupe_grade_ids",),
}
__all__ = sorted(n for names in _NAMES.values() for n in names)


def __getattr__(name: str):
    import importlib

    for module, names in _NAMES.items():
        if name in names:
            return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
