"""Every ``COURSE_*`` environment variable the course reads, each named once, with what it holds.

Who sets it -> who reads it. Import the name from here; the value is the variable's name.
This module imports nothing (the graded kernel's package and the launchers import it too).

>>> PROBE_DIR
'COURSE_PROBE_DIR'
"""

# The learner's and grader's notebooks
SMOKE = "COURSE_SMOKE"  # "1": a notebook that trains (chapter 08) runs its smoke size
VENV = "COURSE_VENV"  # bootstrap: the virtual environment's folder (default .venv)

# course-grade (parent) -> the limited grading process it starts
GRADE_PARENT = "COURSE_GRADE_PARENT"  # the parent's pid: limits.py ends at once without it
GRADE_JOB = "COURSE_GRADE_JOB"  # a token in every process of one student's job (the kill sweep)
KERNEL_CACHE = "COURSE_KERNEL_CACHE"  # the class's folder of kernel packages (kernel_package)
ALEMBIC_HEAD = "COURSE_ALEMBIC_HEAD"  # the gradebook schema's head, looked up once per class
# the instructor (or the test suite) -> course-grade's per-user cache of class templates
# (parent/template_cache.py): a folder (default $XDG_CACHE_HOME/course-grade), or "off"
CACHE = "COURSE_CACHE"

# the grading process -> the kernels' launcher (sandbox/kernel.py) and the zygote
KERNEL_PARENT = "COURSE_KERNEL_PARENT"  # the grading process's pid, checked by the launcher
ZYGOTE = "COURSE_ZYGOTE"  # the zygote's control socket, for the launchers
ZYGOTE_RO = "COURSE_ZYGOTE_RO"  # the zygote's own read-only binds (JSON list)
ZYGOTE_PRELOAD = "COURSE_ZYGOTE_PRELOAD"  # the modules the zygote imports (JSON list)

# the grader -> the graded kernel
PROBE_DIR = "COURSE_PROBE_DIR"  # the probe's read-only case inputs: hidden checks record only

ALL = (SMOKE, VENV, GRADE_PARENT, GRADE_JOB, KERNEL_CACHE, ALEMBIC_HEAD, CACHE,
       KERNEL_PARENT,
       ZYGOTE, ZYGOTE_RO, ZYGOTE_PRELOAD, PROBE_DIR)
