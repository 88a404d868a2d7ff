"""Small helpers the chapters' check modules share to build cases and recognise errors.

Seeded inputs (the same seed gives the same numbers on every machine) and predicates for
``ErrorHint``: what a student's exception says when shapes do not fit.

>>> _t = t_rand(0, 2, 3); (tuple(_t.shape), _t.dtype, bool(torch.equal(_t, t_rand(0, 2, 3))))
((2, 3), torch.float64, True)
>>> is_broadcast_error(RuntimeError("operands could not be broadcast together"))
True
"""

from __future__ import annotations

import numpy as np
import torch

from autograder.checks._core import Case

__all__ = [
    "message_has",
    "np_rand",
    "t_rand",
    "grad_case",
    "is_broadcast_error",
    "is_matmul_mismatch",
    "is_layer_input_mismatch",
]


def np_rand(seed: int, *shape, dtype=np.float64, scale: float = 1.0) -> np.ndarray:
    """Standard normal numbers of ``shape`` from numpy's generator seeded with ``seed``."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def t_rand(
    seed: int, *shape, dtype=torch.float64, scale: float = 1.0, shift: float = 0.0
) -> torch.Tensor:
    """``randn(*shape) * scale + shift`` from a torch generator seeded with ``seed``, drawn in
    float64 and then cast to ``dtype`` (so every dtype sees the same values)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    return (x + shift if shift else x).to(dtype)


def grad_case(label: str, ref, args: tuple, probe, *, grad_args=None, kwargs=None,
              hidden: bool = True) -> Case:
    """A ``"grad"`` case: ``ref``'s output on ``args`` (and ``kwargs``) and the gradients of
    ``sum(output * probe)`` with respect to the arguments ``grad_args`` (default: all)."""
    grad_args = tuple(range(len(args))) if grad_args is None else tuple(grad_args)
    kwargs = {} if kwargs is None else kwargs
    call = [a.clone().requires_grad_(True) if i in grad_args else a for i, a in enumerate(args)]
    out = ref(*call, **kwargs)
    (out * probe).sum().backward()
    expected = (out.detach(), tuple(call[i].grad for i in grad_args))
    return Case(label, tuple(args), expected, kwargs=kwargs, kind="grad", grad_args=grad_args,
                probe=probe, hidden=hidden)


def message_has(e: BaseException, *fragments: str) -> bool:
    """``e``'s message contains one of ``fragments`` (what the error predicates here, and a
    chapter's own, test).

    >>> message_has(ValueError("size mismatch"), "matmul", "size mismatch")
    True
    """
    s = str(e)
    return any(t in s for t in fragments)


def is_broadcast_error(e: BaseException) -> bool:
    """Two operands whose shapes do not broadcast (numpy's or torch's message)."""
    return message_has(e, "broadcast", "must match the size of tensor")


def is_matmul_mismatch(e: BaseException) -> bool:
    """A matrix product whose inner dimensions do not line up (also batched)."""
    return message_has(
        e, "matmul", "mat1 and mat2", "size mismatch", "cannot be multiplied", "core dim",
        "must match the size of tensor",  # batch axes of a matmul that do not broadcast
    )


def is_layer_input_mismatch(e: BaseException) -> bool:
    """Wider than :func:`is_matmul_mismatch`: any layer input of the wrong shape (a linear
    map, a convolution's ``expected input ...``, ``... to have ... shape``)."""
    return message_has(
        e, "mat1 and mat2", "size mismatch", "cannot be multiplied",
        "must match the size of tensor", "expected input", "to have", "shape",
    )
