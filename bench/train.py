"""Training throughput, from-scratch attention vs ``F.scaled_dot_product_attention``.

Times full optimizer steps (forward, backward, AdamW) of the course GPT on random tokens on the
device at hand and prints tokens/s for each attention implementation and their ratio. On CUDA
it uses bf16 autocast, TF32 and fused AdamW as the trainer does, optionally torch.compile, and
also prints MFU. Speed targets live here, never in timed unit tests.

    python bench/train.py                       # auto device, small CPU-sized model
    python bench/train.py --preset gpu          # the gpu_char model size, on CUDA
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F

from transformer_ref.models import GPT, GPTConfig
from transformer_ref.train.trainer import (
    _enable_tf32,
    configure_optimizer,
    peak_flops_for,
    pick_device,
)

SIZES = {
    "cpu": dict(block_size=128, n_layer=4, n_head=4, d_model=128, batch_size=16),
    "gpu": dict(block_size=256, n_layer=6, n_head=6, d_model=384, batch_size=64),
}


def bench(impl: str, args, device: torch.device) -> tuple[float, float | None]:
    s = SIZES[args.preset]
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=args.vocab, block_size=s["block_size"], n_layer=s["n_layer"],
                          n_head=s["n_head"], d_model=s["d_model"], attn_impl=impl)).to(device)
    opt = configure_optimizer(model, 0.1, 1e-3, (0.9, 0.99), device.type)
    fwd = torch.compile(model) if args.compile else model
    cuda = device.type == "cuda"
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
    B, T = s["batch_size"], s["block_size"]
    x = torch.randint(args.vocab, (B, T + 1), device=device)

    def step():
        with amp:
            logits = fwd(x[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    tok_s = args.steps * B * T / (time.perf_counter() - t0)
    peak = peak_flops_for(device)
    mfu = model.flops_per_token() * tok_s / peak if peak else None
    return tok_s, mfu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--preset", choices=sorted(SIZES), default=None,
                   help="model size (default: gpu on CUDA, cpu elsewhere)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--vocab", type=int, default=80)
    p.add_argument("--compile", action="store_true", help="torch.compile the model (CUDA)")
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    device = pick_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    if cuda:
        _enable_tf32()
    args.preset = args.preset or ("gpu" if cuda else "cpu")
    args.steps = args.steps or (50 if cuda else 10)
    args.warmup = args.warmup if args.warmup is not None else (10 if cuda else 2)
    name = torch.cuda.get_device_name(device) if cuda else str(device)
    print(f"device {name}, model '{args.preset}' {SIZES[args.preset]}, {args.steps} timed steps"
          f"{', compiled' if args.compile else ''}, torch threads {torch.get_num_threads()}")
    res = {}
    for impl in ("scratch", "sdpa"):
        tok_s, mfu = bench(impl, args, device)
        res[impl] = tok_s
        extra = f", MFU {100 * mfu:.1f}%" if mfu is not None else ""
        print(f"  {impl:8s} {tok_s:12,.0f} tokens/s{extra}")
    print(f"ratio sdpa / scratch: {res['sdpa'] / res['scratch']:.2f}x")


if __name__ == "__main__":
    main()
