"""01 Ex 4.1: an honest measurement drawn in a Python loop, sample by sample, passes the
visible and the hidden check (issue 30). Seconds of CPU: the checks' guard (a profile hook) watches
each of its calls. The unit tier runs the same draws vectorised (``test_checks_attention.py``: the
"pairs (n, 2, d_k)" layout, and that the loop draws what it draws)."""

from autograder.checks import attention as A
from autograder.checks import hidden_check

from helpers.answers.attention import HONEST_VARIANCE, KEY


def test_a_loop_over_samples_passes_both_checks(capsys):
    f = HONEST_VARIANCE["a loop over samples"]
    A.check_score_variance(f)
    hidden_check(KEY["score_variance"], f)
    assert capsys.readouterr().out.count("✔ Exercise 4.1") == 2
