"""The course's autograder: the check library the notebooks call, and the grading commands.

This ``__init__`` imports nothing beyond the standard library, so that
``python3 -m autograder.bootstrap`` works on a fresh machine before anything is installed.
"""

import sys as _sys

# jsonschema (imported by nbformat and nbgrader) compiles 38 lark grammars when it is imported
# and the optional ``rfc3987_syntax`` is installed (``jupyter-events`` pulls it in), only to
# offer an ``iri`` format check that no notebook schema uses and that nbformat never asks
# for: about 2.4 s of CPU in every process that reads a notebook (course-grade's parent and
# grading processes, ``course-check``, ``release``, ``kit``). A ``None`` entry makes
# jsonschema's guarded import fail and skip that check.
_sys.modules.setdefault("rfc3987_syntax", None)
