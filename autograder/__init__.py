"""The course's autograder: the check library the notebooks call, and the grading commands.

This ``__init__`` imports nothing beyond the standard library, so that
``python3 -m autograder.bootstrap`` works on a fresh machine before anything is installed.
"""
