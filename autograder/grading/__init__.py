"""Internals of ``course-grade`` (see ``autograder/grade.py``).

- ``config``: :class:`GradeConfig`, the one grading configuration (built from the command line,
  passed to everything below) and the defaults;
- ``cells``: reading nbgrader's cell metadata (``metadata.nbgrader``) the same way everywhere;
- ``runner``: run one untrusted command with limits (the place a sandbox plugs in);
- ``sandbox/``: the bubblewrap sandbox for the student's kernel, the source policy, the runners
  that use them;
- ``limits``: sets the rlimits inside that command before it execs nbgrader;
- ``course``: the template course (nbgrader generate_assignment) and per-student course folders;
- ``submissions``: students, zips, and finding notebooks by name;
- ``student``: grading one student: the parent's checks, the grading process, the rows;
- ``status``: the one function that decides a row's status, points and flag;
- ``assignment_result``: the typed result the grading process writes per assignment (the one
  thing the parent reads about it);
- ``nbgrader_main``: the grading process (nbgrader's autograde and feedback, the verdicts);
- ``records``: the record channel: records sealed as the test cells send them, and the run's
  evidence (timeouts, where and why a run stopped);
- ``verdict``: the kernel's package and probe inputs, and judging the sealed records;
- ``flags``: what the submitted source shows of an attempt to get around the grader;
- ``preprocessors``: the course's nbgrader preprocessors, inserted into nbgrader's own lists;
- ``env``: every ``COURSE_*`` environment variable; ``gradebook``: gradebook helpers;
- ``results``: the parent's store (one JSON per student), grades.csv, the class gradebook.
"""

import sys as _sys

# jsonschema (imported by nbformat and nbgrader) compiles 38 lark grammars when it is imported
# and the optional ``rfc3987_syntax`` is installed (``jupyter-events`` pulls it in), only to
# offer an ``iri`` format check that no notebook schema uses and that nbformat never asks
# for: about 1.7 s of CPU in every grading process (the parent, each nbgrader run). A ``None``
# entry makes jsonschema's guarded import fail and skip that check.
_sys.modules.setdefault("rfc3987_syntax", None)
