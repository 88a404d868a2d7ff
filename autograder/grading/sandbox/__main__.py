"""``python -m autograder.grading.sandbox kernel SPEC CONNECTION_FILE`` (see ``kernel.py``)."""

import sys

from .kernel import main

main(sys.argv[1:])
