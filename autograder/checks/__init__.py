"""The check library the notebooks call: ``check_softmax(softmax)`` and friends.

Importing it (the notebook's locked first cell does) binds every function the checks
trust, computes the expected outputs, and in IPython makes a failed check print its
message instead of a traceback. See ``_core`` for how the checks resist monkeypatching.
"""

from autograder.checks import attention as _attention
from autograder.checks._core import (
    BuildItFromScratch,
    CheckFailed,
    NotImplementedYet,
    hidden_check,
    install_notebook_display,
    requires,
)
from autograder.checks.attention import *  # noqa: F403 - its __all__

__all__ = [
    "BuildItFromScratch",
    "CheckFailed",
    "NotImplementedYet",
    "hidden_check",
    "requires",
    "install_notebook_display",
    *_attention.__all__,  # chapter 01's checks, which the first notebooks import from here
]

install_notebook_display()
