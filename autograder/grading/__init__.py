"""Internals of ``course-grade`` (see ``autograder/grade.py``), grouped by the process each runs in.

A row of grades.csv is made by three processes. Each sub-package holds the code of one:

- ``parent/``: the ``course-grade`` process, trusted, the only one that writes the class's
  results. ``course`` (the template course, each student's course folder), ``submissions``
  (students, zips, notebooks found by name), ``roster`` (Canvas's gradebook export: names,
  SIS ids), ``dispatch`` (a thread pool or a Dask cluster,
  one job per student), ``student`` (one student's job: prechecks, the grading process, the
  rows), ``diagnosis``, ``flags`` (what the submitted source shows of an attempt to get around the
  grader), ``runner`` and ``isolation`` (how the grading process starts: a fork of the warm one,
  ``warm_client``; its limits, cgroups or pinning),
  ``results`` (the store, grades.csv, the class gradebook), ``exports``, ``export_csv``,
  ``report``;
- ``autograde/``: the grading process (``nbgrader_main``, in a fork of the ``warm`` process),
  trusted, one per student, limited: nbgrader's autograde and feedback with the course's
  ``preprocessors`` (``demo`` cells not run, ``feedback_html`` sanitised),
  ``kernel_package`` (the kernel's stubbed packages and the probe's inputs, ``reference``),
  ``records`` (the channel: records sealed as their test cells send them, the run's
  evidence), ``verdict`` (judging the sealed records); it writes the one result per
  assignment the parent reads;
- ``sandbox/``: the student's kernel and its confinement: ``bwrap``, the launcher
  (``kernel``), the ``zygote``, the source ``policy``, ``runners`` (the course folder made
  ready), ``limits`` (rlimits, then exec) and ``outcap`` (the kernel's own launcher of
  ipykernel, with each cell's output capped). Its docstring is the threat model.

Shared by all three (plain data and helpers, no process of their own): ``config``
(:class:`GradeConfig`, built once from the command line), ``env`` (every ``COURSE_*``
environment variable), ``cells`` (nbgrader's cell metadata), ``exercises`` (the exercise table
as the grader reads it), ``record`` (a record on the wire, also read by the kernel),
``assignment_result`` (the typed result the grading process writes and the parent reads),
``status`` (**where a row's status, points and flag come from**: one pure function),
``gradebook``, ``pyast``, ``background``.

Imports run one way: ``parent`` -> ``autograde`` -> ``sandbox`` -> the shared modules; the
kernel-side ``autograder/checks/`` imports only the shared ones
(``tests/unit/test_import_order.py``).
"""

# (jsonschema's rfc3987_syntax grammars are kept out of every grading process by
# ``autograder/__init__.py``: imported first, as the parent package.)
