"""Notebook 05's checks, what is its own: the switched-off matrix products, a list for a
tensor. Right answers and catalogued mistakes, in every chapter: ``test_checks_chapters.py``.
"""

import pytest
import torch.nn.functional as F

from autograder.checks import CheckFailed
from autograder.checks import feed_forward_blocks as B

from helpers.answers.feed_forward_blocks import good_ffn, good_gradnorm


def test_matrix_products_are_switched_off_in_the_conv1d_exercise():
    with pytest.raises(CheckFailed, match="switched off"):
        B.check_ffn_as_conv1d(lambda x, W1, b1, W2, b2: good_ffn(x, W1, b1, W2, b2))
    with pytest.raises(CheckFailed, match="`linear` is switched off"):
        B.check_feed_forward(lambda x, W1, b1, W2, b2, activation="relu": F.linear(
            F.relu(F.linear(x, W1.T, b1)), W2.T, b2))


def test_returning_a_list_of_floats_is_explained():
    def as_list(blocks, x, target):
        return good_gradnorm(blocks, x, target).tolist()

    with pytest.raises(CheckFailed, match="should be a torch.Tensor but is a list"):
        B.check_grad_norm_per_layer(as_list)

