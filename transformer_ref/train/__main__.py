"""Command line: ``python -m transformer_ref.train [--preset NAME] [--FIELD VALUE ...]``.

Every :class:`~transformer_ref.train.config.TrainConfig` field is a flag; a preset supplies
defaults that explicit flags override. Multi-process (DDP) runs use the same entry point::

    python -m transformer_ref.train --preset cpu_smoke
    torchrun --nproc_per_node 2 -m transformer_ref.train --preset cpu_smoke --device cpu
    python -m transformer_ref.train --init_from resume --out_dir out/train  # continue a run
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from pathlib import Path

from transformer_ref.train.config import PRESETS, TrainConfig, preset


def _none_or(kind):
    def parse(s: str):
        return None if s.lower() == "none" else kind(s)

    parse.__name__ = kind.__name__
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m transformer_ref.train",
        description="Train the reference GPT on Shakespeare (char or BPE), CPU/GPU/DDP.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="named defaults (explicit flags override them)")
    p.add_argument("--max_seconds", type=float, default=0.0,
                   help="stop after this many seconds of training (0 = no limit); the schedule "
                        "still follows max_iters")
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        hint = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else None
        help_ = f"(default {default!r})"
        if hint is bool:
            p.add_argument(f"--{f.name}", action=argparse.BooleanOptionalAction,
                           default=argparse.SUPPRESS, help=help_)
            continue
        args = typing.get_args(hint)
        if isinstance(hint, types.UnionType) and type(None) in args:  # X | None
            kind = next(a for a in args if a is not type(None))
            conv = _none_or(kind)
        elif hint in (int, float, str):
            conv = hint
        else:
            continue  # dict fields are not command-line options
        p.add_argument(f"--{f.name}", type=conv, default=argparse.SUPPRESS, help=help_)
    return p


def main(argv: list[str] | None = None) -> int:
    args = vars(build_parser().parse_args(argv))
    name = args.pop("preset")
    max_seconds = args.pop("max_seconds")
    if args.get("init_from") == "resume" and not name:
        # resume with the checkpoint's config; flags given now override it (e.g. max_iters)
        import torch

        out_dir = Path(args.get("out_dir", TrainConfig.out_dir))
        saved = torch.load(out_dir / "ckpt.pt", map_location="cpu", weights_only=False)
        cfg = TrainConfig.from_dict({**saved["config"], **args})
    else:
        cfg = preset(name, **args) if name else TrainConfig(**args)

    from transformer_ref.train.trainer import Trainer

    trainer = Trainer(cfg)
    if trainer.master:
        n = sum(p.numel() for p in trainer.raw_model.parameters())
        print(f"device {trainer.device} ({trainer.dtype}), world size {trainer.world_size}, "
              f"{n / 1e6:.2f}M parameters, vocab {trainer.data.vocab_size}, "
              f"{trainer.data.meta['train_tokens']:,} train / {trainer.data.meta['val_tokens']:,} "
              f"val tokens, {cfg.tokens_per_step * trainer.world_size:,} tokens per step")
    summary = trainer.train(max_seconds=max_seconds if max_seconds > 0 else None)
    if trainer.master:
        ev = summary["eval"] or trainer.evaluate()
        print(f"done: {summary['steps']} steps in {summary['seconds']:.1f} s, "
              f"{summary['tokens_per_s']:,.0f} tokens/s"
              + (f", MFU {100 * summary['mfu']:.1f}%" if summary["mfu"] is not None else ""))
        print(f"step {ev['step']}: train loss {ev['train']:.4f}, val loss {ev['val']:.4f}, "
              f"val {ev['val_bpb']:.3f} bits/byte")
        if cfg.sample_tokens > 0:
            print("--- sample ---")
            print(trainer.sample(cfg.sample_tokens))
    trainer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
