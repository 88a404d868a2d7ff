"""nbgrader configuration for the course (the course root is this repository).

Every chapter is one nbgrader assignment: the source notebook
``solutions/<NN_name>/<NN_name>.ipynb`` (generated from the chapter's jupytext script
``<NN_name>.py`` next to it) and nbgrader's ``generate_assignment`` writes the student release
to ``notebooks/<NN_name>/<NN_name>.ipynb`` (both done by ``autograder/release.py``).

nbgrader executes this file with ``get_config`` defined; Python code can also import it and
read ``c`` (a plain traitlets ``Config``), e.g. to build a course directory in a temp folder.
"""

from pathlib import Path

try:
    c = get_config()  # noqa: F821  (defined by traitlets when nbgrader loads this file)
except NameError:  # imported as an ordinary module
    from traitlets.config import Config

    c = Config()

ROOT = Path(__file__).resolve().parent.parent

c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# The student stub nbgrader puts in place of ### BEGIN SOLUTION ... ### END SOLUTION.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Notebooks import torch and run several checks; give each cell time on a slow laptop (the
# grader's one default, autograder/grading/config.py).
from autograder.grading.config import CELL_TIMEOUT_S  # noqa: E402

c.ExecutePreprocessor.timeout = CELL_TIMEOUT_S
