"""The course's GPT beside Hugging Face's ``GPT2LMHeadModel``, trained the same way in one run.

    python bench/train.py --peer hf                      # cpu_char on a CPU (two full runs)
    python bench/train.py --peer hf --max_iters 200      # shorter, same comparison
    python bench/train.py --peer hf --preset gpu_char    # on CUDA: eager, then --compile

Both models get the preset's shape (layers, heads, d_model, context, vocabulary, tied
embeddings, GELU, dropout, LayerNorm eps), the same initial seed, the *same batches* (one
generator per run, seeded alike), the same AdamW groups (``configure_optimizer``: decay on
matrices only; fused on CUDA), the same warm-up + cosine schedule (``get_lr``), gradient
clipping, precision (bf16 autocast on CUDA) and the same validation batches at every
evaluation. The loop is one function (:func:`train`), written here, used for both: only the
model differs. It prints, per model, tokens/s (every window between evaluations after the
first, which holds the compilation and warm-up; evaluations excluded) and the training time to
reach the target validation loss, then their ratios (course / peer: above 1 means the course's
model is faster). ``--ablate`` also trains the course's GPT with three separate Q, K, V
projections (what ``qkv_impl="fused"`` replaced).

Hugging Face's model is configured with ``attn_implementation="sdpa"`` (its default) and
``activation_function="gelu"`` (the exact GELU the course uses; GPT-2's own is the tanh
form). ``transformers`` is a benchmark-only dependency (the ``dev`` extra).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_ref.train.data import get_batch
from transformer_ref.train.trainer import configure_optimizer, get_lr


class HFLogits(nn.Module):
    """``GPT2LMHeadModel`` called like the course's GPT: ``idx (B, T) -> logits (B, T, V)``."""

    def __init__(self, cfg, vocab_size: int):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        conf = GPT2Config(
            vocab_size=vocab_size, n_positions=cfg.block_size, n_embd=cfg.d_model,
            n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.d_ff,
            activation_function="gelu", resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
            attn_pdrop=cfg.dropout, layer_norm_epsilon=cfg.norm_eps or 1e-5,
            tie_word_embeddings=cfg.tie_weights, use_cache=False, bos_token_id=None,
            eos_token_id=None,
        )
        conf._attn_implementation = "sdpa"
        self.hf = GPT2LMHeadModel(conf)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=idx, use_cache=False).logits


def build(which: str, cfg, vocab_size: int, device: torch.device) -> nn.Module:
    """The course's GPT (``"course"``; ``"course-qkv3"``: with three separate Q, K, V
    projections, the course's form before the fused ``qkv_impl``) or the peer (``"hf"``),
    seeded alike, on ``device``."""
    from transformer_ref.train.trainer import build_model

    torch.manual_seed(cfg.seed)
    if which == "hf":
        model = HFLogits(cfg, vocab_size)
    else:
        ccfg = dataclasses.replace(cfg, qkv_impl="separate") if which == "course-qkv3" else cfg
        model = build_model(ccfg, vocab_size, device)
    return model.to(device)


def n_params(model: nn.Module) -> int:
    """Parameters, a tied matrix counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def train(model: nn.Module, data, cfg, device: torch.device, compile_: bool,
          target: float, log=print) -> dict:
    """Train ``model`` on ``data`` with ``cfg``'s schedule; evaluate every ``eval_interval``.

    Returns tokens/s after the first window (of all of it where there is one window), the
    training seconds (evaluations excluded) to reach ``target`` (None if not reached), the best
    validation loss and the curve [(step, val)].
    """
    cuda = device.type == "cuda"
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
    opt = configure_optimizer(model, cfg.weight_decay, cfg.learning_rate,
                              (cfg.beta1, cfg.beta2), device.type)
    fwd = torch.compile(model) if compile_ else model
    gen = torch.Generator().manual_seed(cfg.seed)  # the same batches for every model
    B, T = cfg.batch_size, cfg.block_size

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    @torch.no_grad()
    def evaluate() -> float:
        model.eval()
        g = torch.Generator().manual_seed(cfg.seed + 1)  # the same val batches every time
        losses = []
        for _ in range(cfg.eval_iters):
            x, y = get_batch(data.val, B, T, device, g)
            with amp:
                logits = fwd(x)
            losses.append(F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                          y.reshape(-1)).item())
        model.train()
        return sum(losses) / len(losses)

    model.train()
    train_s, window_steps = 0.0, 0
    steady_steps, steady_s = 0, 0.0  # the windows after the first
    reached, best, curve, tok_s = None, math.inf, [], None
    sync()
    t0 = time.perf_counter()
    for step in range(cfg.max_iters):
        lr = get_lr(step, cfg)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = get_batch(data.train, B, T, device, gen)
        with amp:
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        window_steps += 1
        last = step + 1 == cfg.max_iters
        if (step + 1) % cfg.eval_interval == 0 or last:
            sync()
            dt = time.perf_counter() - t0
            train_s += dt
            if curve:  # not the first window
                steady_steps, steady_s = steady_steps + window_steps, steady_s + dt
            tok_s = window_steps * B * T / dt  # this window's
            val = evaluate()
            best = min(best, val)
            curve.append((step + 1, val))
            log(f"    step {step + 1:5d}: val {val:.4f}, {tok_s:,.0f} tokens/s, "
                f"{train_s:.1f} s of training")
            if reached is None and val <= target:
                reached = (step + 1, train_s)
            window_steps = 0
            sync()
            t0 = time.perf_counter()
    steady = steady_steps * B * T / steady_s if steady_s else tok_s
    return {"tokens_per_s": steady, "reached": reached, "best_val": best, "curve": curve,
            "train_s": train_s}


def compare(cfg, data, device: torch.device, target: float, compile_modes=(False,),
            log=print, ablate: bool = False) -> dict:
    """Train the course's GPT and the peer for each compile mode; print and return ratios.

    ``ablate``: also train the course's GPT with separate Q, K, V projections
    (``"course-qkv3"``), to show what the fused projection buys.
    """
    results = {}
    names = ("course", "course-qkv3", "hf") if ablate else ("course", "hf")
    for compile_ in compile_modes:
        mode = "compiled" if compile_ else "eager"
        for which in names:
            model = build(which, cfg, data.vocab_size, device)
            log(f"  {which} ({mode}): {n_params(model) / 1e6:.3f}M parameters")
            results[(which, mode)] = train(model, data, cfg, device, compile_, target, log)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
        ours, peer = results[("course", mode)], results[("hf", mode)]
        if ablate:
            qkv3 = results[("course-qkv3", mode)]
            log(f"  {mode}: tokens/s course with separate Q, K, V "
                f"{qkv3['tokens_per_s']:,.0f}: ratio to Hugging Face "
                f"{qkv3['tokens_per_s'] / peer['tokens_per_s']:.2f}x")
        log(f"  {mode}: tokens/s course {ours['tokens_per_s']:,.0f}, "
            f"Hugging Face {peer['tokens_per_s']:,.0f}: "
            f"ratio {ours['tokens_per_s'] / peer['tokens_per_s']:.2f}x")
        if ours["reached"] and peer["reached"]:
            log(f"  {mode}: val <= {target:.2f} after {ours['reached'][1]:.1f} s (step "
                f"{ours['reached'][0]}) vs {peer['reached'][1]:.1f} s (step "
                f"{peer['reached'][0]}): ratio {peer['reached'][1] / ours['reached'][1]:.2f}x")
        else:
            log(f"  {mode}: val <= {target:.2f} reached by course: "
                f"{bool(ours['reached'])}, Hugging Face: {bool(peer['reached'])} (best "
                f"{ours['best_val']:.4f} / {peer['best_val']:.4f})")
    return results
