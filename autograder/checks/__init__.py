"""The check library the notebooks call: ``check_softmax(softmax)`` and friends.

Importing it (the notebook's locked first cell does) binds every function the checks
trust, computes the expected outputs, and in IPython makes a failed check print its
message instead of a traceback. See ``_core`` for how the checks resist monkeypatching.
"""

from autograder.checks._core import (
    BuildItFromScratch,
    CheckFailed,
    NotImplementedYet,
    hidden_check,
    install_notebook_display,
    requires,
)
from autograder.checks.attention import (
    check_column_form_self_attention,
    check_cosine_similarity_attention,
    check_dot_product_scores,
    check_scaled_dot_product_attention,
    check_score_variance,
    check_self_attention_unscaled,
    check_self_score_dominance,
    check_softmax,
)

__all__ = [
    "BuildItFromScratch",
    "CheckFailed",
    "NotImplementedYet",
    "hidden_check",
    "requires",
    "install_notebook_display",
    "check_dot_product_scores",
    "check_softmax",
    "check_self_attention_unscaled",
    "check_score_variance",
    "check_scaled_dot_product_attention",
    "check_column_form_self_attention",
    "check_cosine_similarity_attention",
    "check_self_score_dominance",
]

install_notebook_display()
