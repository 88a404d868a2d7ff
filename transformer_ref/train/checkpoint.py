"""Checkpoints as plain functions: save a model (and optimizer, and anything else) to one file,
load it back into a model -- with or without the :class:`~transformer_ref.train.Trainer`.

The file is a ``torch.save`` dict::

    {"model": state_dict, "optimizer": state_dict or None,
     "model_config": dataclasses.asdict(model.config) or None, **extra}

``model`` is always the plain module's state dict: a ``torch.compile`` (``_orig_mod``) or DDP
(``module``) wrapper is looked through, so the keys never carry their prefixes. The file is
written to a temporary name and renamed, so a crash never leaves half a checkpoint behind.

>>> import tempfile, pathlib
>>> from transformer_ref.models import GPT, GPTConfig
>>> model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8))
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ckpt.pt"
>>> _ = save_checkpoint(path, model, step=3)
>>> load_checkpoint(path, GPT(model.config))["step"]
3
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

__all__ = ["save_checkpoint", "load_checkpoint", "unwrap_model"]


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module under DDP (``.module``) and ``torch.compile`` (``._orig_mod``)."""
    model = getattr(model, "module", model)
    model = getattr(model, "_orig_mod", model)
    return getattr(model, "module", model)  # compile(DDP(model)) as well


def save_checkpoint(
    path: str | os.PathLike,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    **extra,
) -> Path:
    """Write ``model`` (and ``optimizer``, and the picklable ``extra`` items) to ``path``.

    The model's config (a dataclass such as ``GPTConfig``, as ``model.config``) is stored as a
    dict, so the model can be rebuilt without its code's defaults. Returns the path.
    """
    path = Path(path)
    model = unwrap_model(model)
    mcfg = getattr(model, "config", None)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "model_config": dataclasses.asdict(mcfg) if dataclasses.is_dataclass(mcfg) else None,
        **extra,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic on POSIX and Windows
    return path


def load_checkpoint(
    path: str | os.PathLike,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: str | torch.device | None = "cpu",
    strict: bool = True,
    weights_only: bool = False,
) -> dict:
    """Read a checkpoint; load its weights into ``model`` and its state into ``optimizer``
    (each if given) and return the whole dict (``"step"`` and any other saved items).

    ``weights_only=True`` refuses anything but tensors and plain containers (use it for files
    you did not write: unpickling can run code). The trainer's own checkpoints hold RNG states
    (numpy, Python) and need ``False``.
    """
    state = torch.load(path, map_location=map_location, weights_only=weights_only)
    if model is not None:
        unwrap_model(model).load_state_dict(state["model"], strict=strict)
    if optimizer is not None:
        if state.get("optimizer") is None:
            raise ValueError(f"{path}: the checkpoint holds no optimizer state")
        optimizer.load_state_dict(state["optimizer"])
    return state
