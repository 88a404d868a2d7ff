"""Training throughput, from-scratch attention vs ``F.scaled_dot_product_attention``.

Times full optimizer steps (forward, backward, AdamW) of the course GPT on random tokens on the
device at hand and prints tokens/s for each attention implementation and their ratio. On CUDA
it uses bf16 autocast, TF32 and fused AdamW as the trainer does, optionally torch.compile, and
also prints MFU. Speed targets live here, never in timed unit tests.

    python bench/train.py                       # auto device, small CPU-sized model
    python bench/train.py --preset gpu          # the gpu_char model size, on CUDA

``--run`` trains instead (the trainer, real Shakespeare) and prints what a GPU run reports:
tokens/s, MFU, and the time to reach a validation loss (default 1.50, the ``gpu`` row of
notebook 08). On CUDA it is the full ``gpu_char`` preset (compile, bf16, TF32, fused AdamW);
elsewhere the same preset shrunk to a small size, so the script is tested end to end on a CPU
and the first lent GPU only has to run it::

    python bench/train.py --run                 # CUDA: gpu_char; CPU: a ~1-minute tiny run
    python bench/train.py --run --max_iters 40 --compile --dtype bfloat16   # CPU, GPU path

``--expect 200,400,800`` trains the ``cpu_char`` preset with the whole schedule (warm-up and
cosine decay) fitted to each number of steps, as notebook 08 fits it to a short budget, and
prints the final validation loss of each: the "loss to expect" the notebook quotes::

    python bench/train.py --expect 200,400,800 --threads 1

``--yours`` times training steps of ``yours.YourGPT`` (the GPT of the learner's pieces that
notebook 08 trains; here the solution notebooks' answers, ``--notebooks``) at the ``cpu`` size
with learned positions and with RoPE (the learner's ``apply_rope``, through their attention,
and the general way that works for any ``multi_head_attention``), and of the reference
trainer's model (``cpu_char``, built as the trainer builds it) both ways, in interleaved rounds
so a changing load hits all alike, and prints seconds per step and the ratios::

    python bench/train.py --yours --threads 1 --steps 5 --rounds 3

``--peer hf`` trains the course's GPT and Hugging Face's ``GPT2LMHeadModel`` of the same shape
on the same batches, one after the other, and prints tokens/s, the time to a validation loss
and their ratios (``bench/peer_hf.py``)::

    python bench/train.py --peer hf                     # CPU: cpu_char, target 1.70
    python bench/train.py --peer hf --max_iters 300 --target 2.5   # a shorter comparison
    python bench/train.py --peer hf                     # CUDA: gpu_char, eager and compiled
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
                          n_head=s["n_head"], d_model=s["d_model"], attn_impl=impl,
                          pos=args.pos)).to(device)
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


# the gpu_char preset shrunk for a CPU (the GPU path's settings can be switched on by flags)
CPU_RUN = dict(n_layer=2, n_head=2, d_model=64, block_size=64, batch_size=16, max_iters=60,
               warmup_iters=10, learning_rate=3e-3, eval_interval=20, eval_iters=4, dropout=0.0,
               compile="false", dtype="float32")


def run(args) -> dict:
    """Train ``gpu_char`` (shrunk off CUDA) and report tokens/s, MFU and time to the target."""
    from transformer_ref.train import Trainer, preset

    device = pick_device(args.device)
    over = {} if device.type == "cuda" else dict(CPU_RUN)
    for key in ("max_iters", "eval_interval", "compile", "dtype"):
        if getattr(args, key) is not None:
            over[key] = getattr(args, key)
    cfg = preset("gpu_char", **over, device=str(device), out_dir=args.out_dir,
                 data_dir=args.data_dir, progress=False, plot=False, sample_tokens=0,
                 threads=args.threads)
    t0 = time.perf_counter()
    trainer = Trainer(cfg)  # tokenizes the corpus on the first run (cached in data_dir)
    setup = time.perf_counter() - t0
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    n = sum(p.numel() for p in trainer.raw_model.parameters())
    print(f"device {name}: gpu_char{' (shrunk for CPU)' if over else ''}, {n / 1e6:.2f}M "
          f"parameters, {cfg.max_iters} steps of {cfg.tokens_per_step:,} tokens, precision "
          f"{trainer.dtype}, compiled {trainer.model is not trainer.raw_model}, fused AdamW "
          f"{bool(trainer.optimizer.param_groups[0].get('fused'))}, setup {setup:.1f} s")
    reached, best, train_s = None, float("inf"), 0.0
    tok_s, mfu = [], []
    while trainer.step < cfg.max_iters:
        summary = trainer.train(num_steps=cfg.eval_interval)  # ends with an evaluation
        train_s += summary["seconds"]  # includes compilation and evaluation: wall time
        tok_s.append(summary["tokens_per_s"])
        mfu.append(summary["mfu"])
        val = summary["eval"]["val"]
        best = min(best, val)
        print(f"  step {trainer.step:5d}: val {val:.4f}, {summary['tokens_per_s']:,.0f} tokens/s"
              + (f", MFU {100 * summary['mfu']:.1f}%" if summary["mfu"] is not None else "")
              + f", {train_s:.1f} s")
        if reached is None and val <= args.target:
            reached = (trainer.step, train_s)
    steady = tok_s[-1]  # the last window: compiled, warm
    print(f"tokens/s {steady:,.0f}"
          + (f", MFU {100 * mfu[-1]:.1f}%" if mfu[-1] is not None else ", MFU n/a (no peak "
             "FLOP/s known for this device)"))
    if reached:
        print(f"val <= {args.target:.2f} at step {reached[0]} after {reached[1]:.1f} s")
    else:
        print(f"val <= {args.target:.2f} not reached in {cfg.max_iters} steps "
              f"({train_s:.1f} s); best val {best:.4f}")
    trainer.close()
    return {"tokens_per_s": steady, "mfu": mfu[-1], "reached": reached, "best_val": best}


def expect(args) -> dict:
    """``--expect N,...``: final val of ``cpu_char`` with its schedule fitted to N steps."""
    from transformer_ref.train import Trainer, preset
    from transformer_ref.train.data import prepare_data
    from transformer_ref.train.trainer import plan_schedule

    if args.threads:
        torch.set_num_threads(args.threads)
    base = preset("cpu_char", data_dir=args.data_dir, progress=False, plot=False,
                  sample_tokens=0, checkpoint=False, device="cpu", pos=args.pos)
    data = prepare_data(base.data, base.data_dir, bpe_vocab_size=base.bpe_vocab_size)
    out = {}
    for n in (int(v) for v in args.expect.split(",")):
        # the plan of a machine that has time for exactly n steps (1 s a step, n s)
        plan = plan_schedule(base, 1.0, float(n))
        cfg = preset("cpu_char", **{k: plan[k] for k in ("max_iters", "warmup_iters",
                                                         "lr_decay_iters")},
                     data_dir=args.data_dir, out_dir=args.out_dir, progress=False, plot=False,
                     sample_tokens=0, checkpoint=False, device="cpu",
                     eval_interval=plan["max_iters"], pos=args.pos)
        t0 = time.perf_counter()
        summary = Trainer(cfg, data=data).train()
        out[n] = summary["eval"]["val"]
        print(f"{cfg.max_iters} steps (warm-up {cfg.warmup_iters}), {cfg.pos} positions: val "
              f"{out[n]:.3f}, "
              f"{time.perf_counter() - t0:.0f} s, {torch.get_num_threads()} threads", flush=True)
    return out


def yours_positions(args) -> dict:
    """``--yours``: seconds per training step of YourGPT, learned positions against RoPE."""
    import statistics

    from autograder.checks import yours
    from transformer_ref.train import preset
    from transformer_ref.train.trainer import build_model

    if args.threads:
        torch.set_num_threads(args.threads)
    s = SIZES["cpu"]
    parts = yours.model_parts("08_training", folder=args.notebooks, say=lambda line: None,
                              extra=("apply_rope",))
    print(f"YourGPT of {sorted(parts.mine)} from {args.notebooks}; model 'cpu' {s}, "
          f"torch threads {torch.get_num_threads()}")
    B, T = s["batch_size"], s["block_size"]
    x = torch.randint(args.vocab, (B, T + 1), generator=torch.Generator().manual_seed(0))
    runs = {}
    for name, pos in (("learned", "learned"), ("rope", "rope"), ("rope-general", "rope")):
        torch.manual_seed(0)
        model = yours.YourGPT(GPTConfig(vocab_size=args.vocab, block_size=T,
                                        n_layer=s["n_layer"], n_head=s["n_head"],
                                        d_model=s["d_model"], pos=pos), parts)
        if name == "rope-general":
            for blk in model.blocks:
                blk.attn.route = None
        route = model.blocks[0].attn.route if model.rope is not None else None
        runs[name] = (model, configure_optimizer(model, 0.1, 1e-3, (0.9, 0.99), "cpu"), route)
    for pos in ("learned", "rope"):  # the reference trainer's model of notebook 08's cpu run
        torch.manual_seed(0)
        model = build_model(preset("cpu_char", pos=pos), args.vocab, torch.device("cpu"))
        runs[f"ref-{pos}"] = (model, configure_optimizer(model, 0.1, 1e-3, (0.9, 0.99), "cpu"),
                              None)

    def step(model, opt):
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, args.vocab), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for model, opt, _ in runs.values():
        for _ in range(args.warmup if args.warmup is not None else 2):
            step(model, opt)
    times: dict = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (model, opt, _) in runs.items():
            t0 = time.perf_counter()
            for _ in range(args.steps or 5):
                step(model, opt)
            times[name].append((time.perf_counter() - t0) / (args.steps or 5))
    out = {name: statistics.median(t) for name, t in times.items()}
    for name, (_, _, route) in runs.items():
        how = {"learned": "a learned table", "rope": "your apply_rope through your attention"
               if route is not None else "your apply_rope (general way)",
               "rope-general": "your apply_rope, general way",
               "ref-learned": "the reference trainer's GPT (cpu_char), learned table",
               "ref-rope": "the reference trainer's GPT (cpu_char), its RoPE"}[name]
        print(f"  {name:12s} {out[name]:.3f} s/step (median of {args.rounds} rounds: "
              f"{', '.join(f'{t:.3f}' for t in times[name])}), {how}")
    for name, base in (("rope", "learned"), ("rope-general", "learned"),
                       ("ref-rope", "ref-learned")):
        print(f"ratio {name} / {base}: {out[name] / out[base]:.2f}x")
    return out


def peer(args) -> dict:
    """``--peer hf``: the course's GPT and Hugging Face's GPT-2, same shape, same batches."""
    try:
        from bench import peer_hf
    except ImportError:  # run as a script: bench/ is sys.path[0]
        import peer_hf

    from transformer_ref.train import preset
    from transformer_ref.train.data import prepare_data

    device = pick_device(args.device)
    cuda = device.type == "cuda"
    name = "gpu_char" if cuda else "cpu_char"
    over = {k: getattr(args, k) for k in ("max_iters", "eval_interval")
            if getattr(args, k) is not None}
    cfg = preset(name, **over, device=str(device), data_dir=args.data_dir, threads=args.threads)
    if args.threads:
        torch.set_num_threads(args.threads)
    if cuda:
        _enable_tf32()
    target = args.target if args.target_set else (1.50 if cuda else 1.70)
    data = prepare_data(cfg.data, cfg.data_dir, bpe_vocab_size=cfg.bpe_vocab_size)
    dev = torch.cuda.get_device_name(device) if cuda else f"cpu, {torch.get_num_threads()} threads"
    print(f"device {dev}: {name} ({cfg.n_layer} layers, {cfg.n_head} heads, d_model "
          f"{cfg.d_model}, context {cfg.block_size}, vocabulary {data.vocab_size}, batch "
          f"{cfg.batch_size}), {cfg.max_iters} steps, target val {target:.2f}")
    modes = (False, True) if cuda else (bool(args.compile),)
    return peer_hf.compare(cfg, data, device, target, modes, ablate=args.ablate)


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
    p.add_argument("--run", action="store_true", help="train gpu_char and report time to target")
    p.add_argument("--target", type=float, default=None,
                   help="--run / --peer: validation loss target (default 1.50; --peer on a "
                   "CPU 1.70)")
    p.add_argument("--max_iters", type=int, default=None, help="--run: override the steps")
    p.add_argument("--eval_interval", type=int, default=None, help="--run: evaluate every")
    p.add_argument("--dtype", default=None, help="--run: float32 / bfloat16 (default: auto)")
    p.add_argument("--out_dir", default="out/bench_train", help="--run: checkpoints, log")
    p.add_argument("--data_dir", default="out/data", help="--run: tokenized corpus cache")
    p.add_argument("--peer", choices=["hf"], default=None,
                   help="train Hugging Face's GPT2LMHeadModel of the same shape beside ours")
    p.add_argument("--ablate", action="store_true",
                   help="--peer: also train the course's GPT with separate Q, K, V projections")
    p.add_argument("--pos", choices=["learned", "rope"], default="learned",
                   help="the model's positions (default and --expect modes); notebook 08's run "
                   "uses rope")
    p.add_argument("--yours", action="store_true",
                   help="time YourGPT (notebook 08's model) with learned positions and RoPE")
    p.add_argument("--notebooks", default="solutions/08_training",
                   help="--yours: the folder of an 08 notebook whose earlier chapters to read")
    p.add_argument("--rounds", type=int, default=3, help="--yours: interleaved rounds")
    p.add_argument("--expect", default=None,
                   help="steps,steps,...: cpu_char's final val with the schedule fitted to each")
    args = p.parse_args()
    args.target_set = args.target is not None
    args.target = 1.50 if args.target is None else args.target
    if args.expect:
        expect(args)
        return
    if args.yours:
        yours_positions(args)
        return
    if args.peer:
        peer(args)
        return
    if args.run:
        args.compile = None if args.compile is False else "true"
        run(args)
        return
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
    print(f"device {name}, model '{args.preset}' {SIZES[args.preset]}, {args.pos} positions, "
          f"{args.steps} timed steps{', compiled' if args.compile else ''}, torch threads "
          f"{torch.get_num_threads()}")
    res = {}
    for impl in ("scratch", "sdpa"):
        tok_s, mfu = bench(impl, args, device)
        res[impl] = tok_s
        extra = f", MFU {100 * mfu:.1f}%" if mfu is not None else ""
        print(f"  {impl:8s} {tok_s:12,.0f} tokens/s{extra}")
    print(f"ratio sdpa / scratch: {res['sdpa'] / res['scratch']:.2f}x")


if __name__ == "__main__":
    main()
