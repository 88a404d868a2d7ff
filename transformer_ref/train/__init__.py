"""Training the reference GPT: token data, the trainer, and its configuration.

``python -m transformer_ref.train --help`` runs the same trainer from the command line (and
under ``torchrun`` with DDP).
"""

from transformer_ref.train.checkpoint import load_checkpoint, save_checkpoint
from transformer_ref.train.config import PRESETS, TrainConfig, preset
from transformer_ref.train.data import (
    CharTokenizer,
    TokenData,
    bits_per_byte,
    get_batch,
    prepare_data,
)
from transformer_ref.train.trainer import Trainer, configure_optimizer, get_lr, pick_device

__all__ = [
    "TrainConfig",
    "PRESETS",
    "preset",
    "CharTokenizer",
    "TokenData",
    "prepare_data",
    "get_batch",
    "bits_per_byte",
    "Trainer",
    "get_lr",
    "configure_optimizer",
    "pick_device",
    "save_checkpoint",
    "load_checkpoint",
]
