"""Mutation testing of every check (issue 18): ``python -m bench.mutation [--notebook 01]``.

A thin wrapper around :mod:`autograder.mutation`, which says what it does.
"""

from autograder.mutation import main

if __name__ == "__main__":
    raise SystemExit(main())
