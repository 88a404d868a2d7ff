"""The reference trainer: one loop for a laptop CPU, one GPU, or many GPUs under ``torchrun``.

One optimizer step (``step`` counts these):

    lr_t      = schedule(t)                         linear warm-up, then cosine decay
    g         = (1/A) sum_{a<A} grad L(batch_a)     A = grad_accum_steps micro-batches
    g        <- g * min(1, c / ||g||_2)             clip the *global* norm to c
    theta    <- AdamW(theta, g, lr_t)               decay only on matrices (dim >= 2)

Under DDP (``torchrun --nproc_per_node W``) every process draws the same *global* batch of
``W * batch_size`` windows from an identically seeded generator and keeps its own slice;
DDP averages the gradients, so W processes take exactly the step one process would take with
batch ``W * batch_size`` (up to floating-point summation order).

Checkpoints (``out_dir/ckpt.pt``) hold the model, the optimizer, the step, the config, the
loss history and every RNG state (torch, CUDA, numpy, Python, and the batch generator), so a
run resumed from one continues exactly as if it had never stopped.

On CUDA: bf16 autocast, TF32 matmuls, fused AdamW, ``torch.compile`` and an MFU estimate
(model FLOPs per token x tokens/s / device peak). On CPU and MPS all of these are off by
default; ``compile``, ``dtype="bfloat16"`` and ``fused_adamw`` turn them on there too, which is
how CI runs the GPU code path without a GPU (``tests/slow/test_train_gpu_path.py``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from transformer_ref.train.checkpoint import load_checkpoint, save_checkpoint
from transformer_ref.train.config import TrainConfig
from transformer_ref.train.data import TokenData, bits_per_byte, get_batch, prepare_data

__all__ = [
    "pick_device",
    "get_lr",
    "configure_optimizer",
    "peak_flops_for",
    "build_model",
    "plan_schedule",
    "Trainer",
    "train_step",
    "estimate_loss",
]

# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets, matched by device name.
_PEAK_BF16 = (
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100", 989e12),  # SXM / HBM3
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10G", 70e12),
    ("L4", 121e12),
    ("4090", 165e12),
    ("3090", 71e12),
)


def pick_device(pref: str = "auto") -> torch.device:
    """``"auto"``: CUDA if present, else Apple MPS, else CPU; anything else is used as given.

    >>> pick_device("cpu")
    device(type='cpu')
    """
    if pref != "auto":
        return torch.device(pref)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def get_lr(step: int, cfg: TrainConfig) -> float:
    """Learning rate at optimizer step ``step`` (0-based).

    Warm-up ``lr * (t + 1) / W`` for ``t < W``; then cosine from ``lr`` to ``min_lr`` over
    ``[W, D]`` with ``D = lr_decay_iters or max_iters``: ``min + (lr - min) (1 + cos(pi r)) / 2``,
    ``r = (t - W) / (D - W)``; ``min_lr`` after ``D``.

    >>> cfg = TrainConfig(learning_rate=1.0, min_lr=0.0, warmup_iters=10, max_iters=110)
    >>> [round(get_lr(t, cfg), 3) for t in (0, 9, 10, 60, 110, 200)]
    [0.1, 1.0, 1.0, 0.5, 0.0, 0.0]
    """
    lr, lo, warm = cfg.learning_rate, cfg.min_lr, cfg.warmup_iters
    decay_end = cfg.lr_decay_iters if cfg.lr_decay_iters is not None else cfg.max_iters
    if step < warm:
        return lr * (step + 1) / warm
    if step >= decay_end:
        return lo
    ratio = (step - warm) / max(1, decay_end - warm)
    return lo + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - lo)


def plan_schedule(
    cfg: TrainConfig,
    step_seconds: float,
    seconds: float,
    *,
    eval_seconds: float = 0.0,
    done: int = 0,
    eval_share: float = 0.25,
    fixed_eval_seconds: float = 0.0,
) -> dict:
    """The longest run of at most ``cfg.max_iters`` steps whose whole schedule fits in ``seconds``.

    ``step_seconds`` and ``eval_seconds`` are measured costs of one optimizer step and one
    evaluation, of which ``fixed_eval_seconds`` is what the caller does after each evaluation
    (it does not shrink with ``eval_iters``); ``done`` steps have already run (they are not paid
    for again). The run keeps the configured evaluations unless they would take more than
    ``eval_share`` of the time; then each evaluation first uses fewer batches (``eval_iters``,
    down to 4), then there are fewer evaluations (at least the final one). When the steps must
    be cut, the warm-up, the end of the cosine decay and the evaluation interval shrink in
    proportion, so warm-up *and* decay both finish inside the budget (``get_lr`` reaches
    ``min_lr`` at the last step) instead of the run stopping inside the warm-up. Returns the
    fields to set on the config plus the estimate: ``max_iters, warmup_iters, lr_decay_iters,
    eval_interval, eval_iters, step_seconds, eval_seconds`` (one evaluation with the planned
    ``eval_iters``), ``seconds, planned_seconds, cut``.

    >>> cfg = TrainConfig(max_iters=3000, warmup_iters=100, eval_interval=500)
    >>> plan = plan_schedule(cfg, step_seconds=1.0, seconds=600.0, eval_seconds=5.0)
    >>> plan["max_iters"], plan["warmup_iters"], plan["eval_interval"]
    (570, 19, 95)
    >>> plan_schedule(cfg, step_seconds=0.1, seconds=600.0)["max_iters"]  # fits: unchanged
    3000
    """
    if step_seconds <= 0 or seconds <= 0:
        raise ValueError(f"step_seconds and seconds must be > 0, got {step_seconds}, {seconds}")
    n_evals = max(1, math.ceil(cfg.max_iters / max(1, cfg.eval_interval)))
    eval_iters, for_evals = cfg.eval_iters, eval_share * seconds
    if eval_seconds > 0 and n_evals * eval_seconds > for_evals:
        fixed = min(fixed_eval_seconds, eval_seconds)
        per_batch = (eval_seconds - fixed) / max(1, cfg.eval_iters)
        fewest = min(cfg.eval_iters, 4)
        room = for_evals / n_evals - fixed
        fit = math.floor(room / per_batch) if per_batch > 0 and room > 0 else 0
        eval_iters = max(fewest, min(cfg.eval_iters, fit))
        eval_seconds = fixed + eval_iters * per_batch
        n_evals = min(n_evals, max(1, math.floor(for_evals / eval_seconds)))
    left = seconds - n_evals * eval_seconds
    steps = done + math.floor(max(0.0, left) / step_seconds)
    steps = max(done + 1, min(cfg.max_iters, steps))
    if steps >= cfg.max_iters:
        plan = dict(max_iters=cfg.max_iters, warmup_iters=cfg.warmup_iters,
                    lr_decay_iters=cfg.lr_decay_iters,
                    eval_interval=max(cfg.eval_interval, math.ceil(cfg.max_iters / n_evals)),
                    eval_iters=eval_iters, cut=False)
    else:
        scale = steps / cfg.max_iters
        warm = 0 if cfg.warmup_iters <= 0 else max(1, round(cfg.warmup_iters * scale))
        warm = min(warm, steps - 1)  # the cosine gets at least one step
        decay = cfg.lr_decay_iters
        if decay is not None:
            decay = min(steps, max(warm + 1, round(decay * scale)))
        plan = dict(max_iters=steps, warmup_iters=warm, lr_decay_iters=decay,
                    eval_interval=max(1, math.ceil(steps / n_evals)), eval_iters=eval_iters,
                    cut=True)
    n_done_evals = math.ceil(plan["max_iters"] / plan["eval_interval"])
    planned = (plan["max_iters"] - done) * step_seconds + n_done_evals * eval_seconds
    plan.update(step_seconds=step_seconds, eval_seconds=eval_seconds, seconds=seconds,
                planned_seconds=planned)
    return plan


def configure_optimizer(
    model: torch.nn.Module,
    weight_decay: float,
    learning_rate: float,
    betas: tuple[float, float],
    device_type: str = "cpu",
    fused: bool | None = None,
) -> torch.optim.AdamW:
    """AdamW with two groups: weight decay on matrices (linear and embedding weights, dim >= 2),
    none on vectors (biases, norm gains). Fused kernel on CUDA (``fused=None``), or as asked.

    >>> opt = configure_optimizer(torch.nn.Linear(3, 2), 0.1, 1e-3, (0.9, 0.99))
    >>> [(g["weight_decay"], sum(p.numel() for p in g["params"])) for g in opt.param_groups]
    [(0.1, 6), (0.0, 2)]
    """
    params = [p for p in model.parameters() if p.requires_grad]  # a tied matrix appears once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if fused is None:
        fused = device_type == "cuda"
    extra = {"fused": True} if fused else {}
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, **extra)


def peak_flops_for(device: torch.device) -> float | None:
    """Peak dense bf16 FLOP/s of a known CUDA device, else None (no MFU is reported)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, flops in _PEAK_BF16:
        if key in name:
            return flops
    return None


def build_model(cfg: TrainConfig, vocab_size: int, device: torch.device) -> torch.nn.Module:
    """The course GPT for this config (``attn_impl="auto"``: SDPA on CUDA, from-scratch else)."""
    from transformer_ref.models import GPT, GPTConfig

    attn = cfg.attn_impl
    if attn == "auto":
        attn = "sdpa" if device.type == "cuda" else "scratch"
    norm_impl = cfg.norm_impl
    if norm_impl == "auto":  # PyTorch's kernels where the attention is PyTorch's too
        norm_impl = "fused" if attn == "sdpa" else "scratch"
    qkv_impl = cfg.qkv_impl
    if qkv_impl == "auto":  # one (d, 3d) matmul instead of three (d, d): GPT-2's c_attn
        qkv_impl = "fused" if attn == "sdpa" else "separate"
    gcfg = GPTConfig(
        vocab_size=vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
        n_head=cfg.n_head, d_model=cfg.d_model, d_ff=cfg.d_ff, dropout=cfg.dropout,
        bias=cfg.bias, norm=cfg.norm, ffn=cfg.ffn, pos=cfg.pos, tie_weights=cfg.tie_weights,
        attn_impl=attn, rope_base=cfg.rope_base, norm_eps=cfg.norm_eps, norm_impl=norm_impl,
        qkv_impl=qkv_impl,
    )
    return GPT(gcfg)


def _rng_state(gen: torch.Generator) -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
        "batch": gen.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict, gen: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    gen.set_state(state["batch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class Trainer:
    """Train a language model on a token stream as configured by a :class:`TrainConfig`.

    ``Trainer(cfg).train()`` prepares the data, builds the GPT and runs ``cfg.max_iters``
    steps; ``data`` and ``model`` may be passed in instead (tests, notebooks). With
    ``cfg.init_from == "resume"`` the state is loaded from ``out_dir/ckpt.pt``. The trainer
    works on its own copy, ``self.cfg``: :meth:`fit_to_time` changes that copy, never the
    caller's ``cfg`` (notebook 08 hands the same ``cfg`` to your run and to this trainer).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        data: TokenData | None = None,
        model: torch.nn.Module | None = None,
    ):
        self.cfg = cfg = copy.deepcopy(cfg)  # fitted to a budget below: never the caller's
        # --- processes and device ---
        # launched by torchrun (it sets RANK and WORLD_SIZE) with more than one process
        self.ddp = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", 1)) > 1
        self.device = pick_device(cfg.device)
        if self.ddp:
            local_rank = int(os.environ.get("LOCAL_RANK", 0))
            if self.device.type == "cuda":
                self.device = torch.device("cuda", local_rank)
                torch.cuda.set_device(self.device)
            if not dist.is_initialized():
                dist.init_process_group(backend="nccl" if self.device.type == "cuda" else "gloo")
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        else:
            self.rank, self.world_size = 0, 1
        self.master = self.rank == 0
        if cfg.threads > 0:
            torch.set_num_threads(cfg.threads)
        if self.device.type == "cuda" and cfg.tf32:
            _enable_tf32()
        # --- precision ---
        dtype = cfg.dtype
        if dtype == "auto":
            use_bf16 = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
            dtype = "bfloat16" if use_bf16 else "float32"
        if dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be auto, float32 or bfloat16, got {cfg.dtype!r}")
        self.dtype = dtype
        self.autocast = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if dtype == "bfloat16"
            else contextlib.nullcontext()
        )
        # --- seeds: identical on every rank (same initial weights, same global batches) ---
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
        self.gen = torch.Generator().manual_seed(cfg.seed)  # batch offsets, on the CPU
        # --- data (rank 0 tokenizes first; the others then read its cache) ---
        if data is None:
            if self.ddp and not self.master:
                dist.barrier()
            data = prepare_data(cfg.data, cfg.data_dir, cfg.bpe_vocab_size)
            if self.ddp and self.master:
                dist.barrier()
        self.data = data
        # --- model and optimizer ---
        if model is None:
            model = build_model(cfg, data.vocab_size, self.device)
        self.raw_model = model.to(self.device)
        fused = {"auto": None, "true": True, "false": False}
        if cfg.fused_adamw not in fused:
            raise ValueError(f"fused_adamw must be auto, true or false, got {cfg.fused_adamw!r}")
        self.optimizer = configure_optimizer(
            self.raw_model, cfg.weight_decay, cfg.learning_rate, (cfg.beta1, cfg.beta2),
            self.device.type, fused=fused[cfg.fused_adamw],
        )
        self.step = 0
        self.history: dict[str, list] = {"train": [], "eval": []}
        self.tokens_seen = 0
        self.out_dir = Path(cfg.out_dir)
        if cfg.init_from == "resume":
            self.load_checkpoint(self.out_dir / "ckpt.pt")
        elif cfg.init_from != "scratch":
            raise ValueError(f"init_from must be 'scratch' or 'resume', got {cfg.init_from!r}")
        if self.ddp:
            # after seeding/loading: reseed dropout per rank unless a checkpoint restored it
            if cfg.init_from == "scratch":
                torch.manual_seed(cfg.seed + 1000 * self.rank)
        # --- compile and DDP wrappers ---
        compile_on = {"auto": self.device.type == "cuda", "true": True, "false": False}
        if cfg.compile not in compile_on:
            raise ValueError(f"compile must be auto, true or false, got {cfg.compile!r}")
        self.model = torch.compile(self.raw_model) if compile_on[cfg.compile] else self.raw_model
        self.eval_model = self.model
        if self.ddp:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DDP(self.model, device_ids=ids)
        self.peak_flops = cfg.peak_flops or peak_flops_for(self.device)
        fpt = getattr(self.raw_model, "flops_per_token", None)
        self.flops_per_token = fpt() if callable(fpt) else None  # training FLOPs per token
        self._pending: list[torch.Tensor] = []  # per-step losses not yet fetched from device
        self.clock = time.perf_counter  # wall time; tests put a fake clock here
        self._eval_batch_per_step: float | None = None  # measured by fit_to_time on a CPU

    # ------------------------------------------------------------------ losses
    def _loss(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with self.autocast:
            logits = model(x)  # (B, T, V)
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))

    def train_step(self) -> None:
        """One optimizer step: A micro-batches, clip, AdamW; the loss is kept on the device."""
        cfg = self.cfg
        lr = get_lr(self.step, cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        total = torch.zeros((), device=self.device)
        for micro in range(cfg.grad_accum_steps):
            x, y = get_batch(self.data.train, cfg.batch_size, cfg.block_size, self.device,
                             self.gen, self.rank, self.world_size)
            last = micro == cfg.grad_accum_steps - 1
            # DDP: all-reduce the gradients only on the last micro-batch
            sync = contextlib.nullcontext() if (last or not self.ddp) else self.model.no_sync()
            with sync:
                loss = self._loss(self.model, x, y)
                (loss / cfg.grad_accum_steps).backward()
            total += loss.detach()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._pending.append(total / cfg.grad_accum_steps)
        self.step += 1
        self.tokens_seen += cfg.tokens_per_step * self.world_size

    def _flush_losses(self) -> list[float]:
        """Move pending per-step losses into the history (averaged over ranks under DDP)."""
        if not self._pending:
            return []
        losses = torch.stack(self._pending)
        if self.ddp:
            dist.all_reduce(losses, op=dist.ReduceOp.SUM)  # gloo has no AVG
            losses = losses / self.world_size
        values = losses.tolist()
        first = self.step - len(values)
        self.history["train"].extend([first + i + 1, v] for i, v in enumerate(values))
        self._pending = []
        return values

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Mean loss on ``eval_iters`` batches of each split (the same batches every time)."""
        cfg = self.cfg
        gen = torch.Generator().manual_seed(cfg.seed + 1)
        model = self.eval_model
        was_training = model.training
        model.eval()
        out: dict = {"step": self.step}
        for split in ("train", "val"):
            data = getattr(self.data, split)
            losses = []
            for _ in range(cfg.eval_iters):
                x, y = get_batch(data, cfg.batch_size, cfg.block_size, self.device, gen)
                losses.append(self._loss(model, x, y))
            out[split] = torch.stack(losses).mean().item()
        meta = self.data.meta
        out["val_bpb"] = bits_per_byte(out["val"], meta["val_tokens"], meta["val_bytes"])
        out["train_bpb"] = bits_per_byte(out["train"], meta["train_tokens"], meta["train_bytes"])
        model.train(was_training)
        return out

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything but the model and optimizer that a checkpoint holds (see
        :func:`~transformer_ref.train.checkpoint.save_checkpoint`)."""
        self._flush_losses()
        rng = _rng_state(self.gen)
        if self.ddp:
            all_rng: list = [None] * self.world_size
            dist.all_gather_object(all_rng, rng)
        else:
            all_rng = [rng]
        return {
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "config": self.cfg.to_dict(),
            "data_meta": dict(self.data.meta),
            "rng": all_rng,
            "history": self.history,
        }

    def save_checkpoint(self, path: str | os.PathLike | None = None) -> Path:
        """Write the full training state with :func:`save_checkpoint` (every rank must call it
        under DDP, for the RNG states; rank 0 writes)."""
        path = Path(path) if path is not None else self.out_dir / "ckpt.pt"
        state = self.state_dict()
        if self.master:
            save_checkpoint(path, self.raw_model, self.optimizer, **state)
        return path

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore model, optimizer, step, history and RNG states with :func:`load_checkpoint`."""
        state = load_checkpoint(path, self.raw_model, self.optimizer, map_location=self.device)
        self.step = state["step"]
        self.tokens_seen = state["tokens_seen"]
        self.history = state["history"]
        rngs = state["rng"]
        rng = rngs[self.rank] if len(rngs) == self.world_size else rngs[0]
        rng["torch"] = rng["torch"].cpu()
        rng["batch"] = rng["batch"].cpu()
        if "cuda" in rng:
            rng["cuda"] = [s.cpu() for s in rng["cuda"]]
        _set_rng_state(rng, self.gen)

    # ------------------------------------------------------------------ the time budget
    def fit_to_time(
        self,
        seconds: float,
        probe_steps: int = 10,
        reserve: float = 0.1,
        verbose: bool = True,
        extra_seconds_per_eval: float = 0.0,
    ) -> dict:
        """Measure the step and evaluation time here, then set the run's length from them.

        Runs ``probe_steps + 1`` training steps (the first one, which compiles and allocates,
        is not timed; all of them count as steps of the run) and one evaluation (timed, not
        recorded in the history); on a CPU (no DDP, no compile) a line comes at most ~10 s
        apart: fewer steps once the next would not fit, and an evaluation of the batches that
        fit ~7 s, scaled to ``eval_iters`` (:meth:`_time_paced`). Then it sets ``max_iters``,
        ``warmup_iters``, ``lr_decay_iters``, ``eval_interval`` and ``eval_iters`` on
        ``self.cfg`` from
        :func:`plan_schedule`, so the whole schedule, warm-up and cosine decay included, fits
        in ``seconds`` (counted from this call) less a ``reserve`` share for what the caller
        does between chunks. What the caller does after each evaluation (a notebook samples
        text) it can pass as ``extra_seconds_per_eval``: it is counted with each evaluation.
        Returns the plan.
        """
        cfg = self.cfg
        t0 = self.clock()
        n = min(probe_steps + 1, cfg.max_iters - self.step - 1)
        if n < 2:  # too short a run to measure: keep it
            return dict(max_iters=cfg.max_iters, warmup_iters=cfg.warmup_iters,
                        lr_decay_iters=cfg.lr_decay_iters, eval_interval=cfg.eval_interval,
                        eval_iters=cfg.eval_iters, cut=False, step_seconds=None,
                        eval_seconds=None, seconds=seconds, planned_seconds=None)
        say = ((lambda line: print(line, flush=True)) if verbose and self.master
               else (lambda line: None))
        self.raw_model.train()
        if self.model is self.raw_model and self.device.type != "cuda":
            step_s, eval_s, say = self._time_paced(n, say)
        else:  # compiled, DDP (every rank the same steps) or CUDA: the fixed count
            say(f"timing {n} steps and one evaluation on this machine ...")
            self.train_step()
            self._flush_losses()  # waits for the device
            t1 = self.clock()
            for _ in range(n - 1):
                self.train_step()
            self._flush_losses()
            t2 = self.clock()
            self.evaluate()  # what one evaluation costs (also compiles the eval graph)
            step_s, eval_s = (t2 - t1) / (n - 1), self.clock() - t2
        t3 = self.clock()
        left = (seconds - (t3 - t0)) * (1.0 - reserve)
        extra = max(0.0, extra_seconds_per_eval)
        plan = plan_schedule(cfg, step_s, max(left, step_s), eval_seconds=eval_s + extra,
                             done=self.step, fixed_eval_seconds=extra)
        for key in ("max_iters", "warmup_iters", "lr_decay_iters", "eval_interval", "eval_iters"):
            setattr(cfg, key, plan[key])
        if verbose and self.master:
            what = ("the whole schedule fits" if not plan["cut"] else
                    f"cut to {plan['max_iters']} steps (warm-up {plan['warmup_iters']}, "
                    f"evaluation every {plan['eval_interval']} on {plan['eval_iters']} "
                    f"batch{'es' * (plan['eval_iters'] != 1)}) "
                    "so warm-up and decay both fit")
            line = (f"measured {step_s:.3f} s per step, {eval_s:.1f} s per evaluation "
                    f"({t3 - t0:.0f} s of the {seconds:.0f} s budget): {what}; the rest should "
                    f"take about {plan['planned_seconds']:.0f} s")
            say(line)
        return plan

    def _time_paced(self, n: int, say) -> tuple:
        """The timing on a CPU, a line at most ~10 s apart (as ``fit_run``'s, with its
        :class:`~transformer_ref.train.budget._Pace`): up to ``n`` steps, the first untimed,
        the rest stopped once another at the slowest so far would not fit before the next
        line; then an evaluation of one batch and one of the batches (up to 3) that still fit
        before ~7 s, scaled to the full one. Sets ``_eval_batch_per_step`` (an evaluation
        batch, in steps), by which :meth:`train` sizes its evaluations. Returns the step and
        evaluation seconds and the ``say`` of the next line (it says why, where it is late)."""
        from transformer_ref.train.budget import _Pace, _timed

        cfg, pace = self.cfg, _Pace(say, self.clock, 7.0, 10.0)
        stepper = _Stepper(self)
        pace.say(f"timing up to {n} steps and one evaluation on this machine ...")
        pace.step(stepper)  # the first step allocates: not timed
        before = self.step
        step_s, _ = _timed(stepper, n - 1, pace)
        self._flush_losses()
        full, few, took = cfg.eval_iters, 0, 0.0
        pace.say(f"  {step_s:.3f} s a step over {self.step - before} steps; timing an "
                 f"evaluation (up to {min(full, 4)} batch{'es' * (full > 1)} of each split) ...")
        try:  # one batch, then the more (up to 4 in all) that fit before the next line
            for k in (1, 3):
                k = min(k, full - few)
                while k > 0 and few and not pace.fits(k * took / few):
                    k -= 1
                if k <= 0:
                    break
                cfg.eval_iters, t = k, self.clock()
                self.evaluate()
                few, took = few + k, took + self.clock() - t
        finally:
            cfg.eval_iters = full
        took = max(took, 1e-9)
        self._eval_batch_per_step = took / few / step_s
        return (step_s, took * full / few,
                lambda line: pace.say(line, why=f"the evaluation took {took:.1f} s"))

    # ------------------------------------------------------------------ the loop
    def train(self, num_steps: int | None = None, max_seconds: float | None = None) -> dict:
        """Run until ``max_iters``, or ``num_steps`` more steps, or ``max_seconds`` of wall time
        (the schedule still follows ``max_iters``: call :meth:`fit_to_time` first to make it
        fit); evaluates and checkpoints every ``eval_interval`` steps and at the last step.
        With ``cfg.progress_seconds`` it prints a plain progress line at most that often.
        Returns a summary dict."""
        cfg = self.cfg
        end = cfg.max_iters if num_steps is None else min(cfg.max_iters, self.step + num_steps)
        bar = None
        if cfg.progress and self.master:
            from tqdm.auto import tqdm

            bar = tqdm(total=end, initial=self.step, unit="step", dynamic_ncols=True)
        log_path = self.out_dir / "log.jsonl"
        if self.master:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        self.raw_model.train()
        clock = self.clock
        t_start = t_window = clock()
        steps_window = 0
        tok_per_s = 0.0
        mfu = None
        last_eval: dict | None = None
        start_step = self.step
        pace = None  # plain lines ~progress_seconds apart, at most ~10 s where one step fits
        if cfg.progress_seconds > 0 and self.master and bar is None:
            from transformer_ref.train.budget import _Pace

            pace = _Pace(lambda line: print(line, flush=True), clock, cfg.progress_seconds,
                         max(10.0, cfg.progress_seconds + 3.0))
        spent, n_spent = 0.0, 0  # step seconds since the last evaluation
        while self.step < end:
            t_step = clock()
            self.train_step()
            steps_window += 1
            now = clock()
            took = now - t_step
            spent, n_spent = spent + took, n_spent + 1
            out_of_time = max_seconds is not None and now - t_start > max_seconds
            at_end = self.step == end or out_of_time
            evaluating = self.step % cfg.eval_interval == 0 or at_end
            if self.step % cfg.log_interval == 0 or at_end:
                values = self._flush_losses()  # syncs the device
                now = clock()
                tok_per_s = steps_window * cfg.tokens_per_step * self.world_size / (now - t_window)
                t_window, steps_window = now, 0
                if self.flops_per_token and self.peak_flops:
                    mfu = self.flops_per_token * tok_per_s / (self.peak_flops * self.world_size)
                if self.master:
                    rec = {"step": self.step, "loss": values[-1], "lr": get_lr(self.step - 1, cfg),
                           "tokens_per_s": tok_per_s}
                    if mfu is not None:
                        rec["mfu"] = mfu
                    _append_jsonl(log_path, rec)
                    if bar is not None:
                        post = {"loss": f"{values[-1]:.4f}", "tok/s": f"{tok_per_s:,.0f}"}
                        if mfu is not None:
                            post["mfu"] = f"{100 * mfu:.1f}%"
                        bar.set_postfix(post)
            if bar is not None:
                bar.update(1)
            elif pace is not None:
                pace.slowest = max(pace.slowest, took)
                if not evaluating and not pace.fits(took):  # the next step may end too late
                    pace.say(self._say_progress(start_step, end, clock() - t_start))
            if evaluating:
                if self.master:
                    recent = max(took, spent / max(1, n_spent))
                    last_eval = self._evaluate_paced(pace, recent)
                    self.history["eval"].append(last_eval)
                    _append_jsonl(log_path, {"eval": last_eval})
                if cfg.checkpoint:
                    self.save_checkpoint()
                t_window = clock()  # eval time is not training throughput
                steps_window = 0
                spent, n_spent = 0.0, 0
            if out_of_time:
                break
        if bar is not None:
            bar.close()
        self._flush_losses()
        elapsed = clock() - t_start
        if self.master and cfg.plot and self.history["train"]:
            self.plot(self.out_dir / "loss.png")
        return {
            "steps": self.step - start_step,
            "step": self.step,
            "seconds": elapsed,
            "tokens_per_s": tok_per_s,
            "mfu": mfu,
            "eval": last_eval,
            "final_train_loss": self.history["train"][-1][1] if self.history["train"] else None,
        }

    def _evaluate_paced(self, pace, step_s: float) -> dict:
        """:meth:`evaluate` and its line. With ``pace`` (a plain line every ~progress_seconds)
        a line comes first, and where :meth:`fit_to_time` timed an evaluation batch on a CPU
        the evaluation gets as many batches as fit ``progress_seconds`` at the steps' recent
        ``step_s`` (at most ``eval_iters``); the line after a late one says why."""
        cfg, clock, full = self.cfg, self.clock, self.cfg.eval_iters
        if pace is not None:
            if self._eval_batch_per_step:
                fit = math.floor(pace.target / (self._eval_batch_per_step * step_s))
                cfg.eval_iters = max(1, min(full, fit))
            pace.say(f"  evaluating at step {self.step} ({cfg.eval_iters} batch"
                     f"{'es' * (cfg.eval_iters != 1)} of each split) ...")
        t = clock()
        try:
            out = self.evaluate()
        finally:
            n, cfg.eval_iters = cfg.eval_iters, full
        took = max(clock() - t, 1e-9)
        if pace is not None and self._eval_batch_per_step:
            self._eval_batch_per_step = took / n / step_s
        msg = (f"step {self.step}: train {out['train']:.4f}, val {out['val']:.4f} "
               f"({out['val_bpb']:.3f} bits/byte)")
        if pace is not None:
            pace.say(msg, why=f"the evaluation took {took:.1f} s")
        elif self.cfg.progress and self.master:
            from tqdm.auto import tqdm

            tqdm.write(msg)
        else:
            print(msg)
        return out

    def _say_progress(self, start_step: int, end: int, elapsed: float) -> str:
        """One plain line: where this call of :meth:`train` is, the loss, and the time left."""
        if not self.ddp:  # under DDP a flush is collective: use the last logged loss
            self._flush_losses()  # the latest losses (waits for the device, once per line)
        cfg = self.cfg
        loss = self.history["train"][-1][1] if self.history["train"] else float("nan")
        done = self.step - start_step
        left = elapsed / done * (end - self.step) if done else float("nan")
        return (f"  step {self.step}/{cfg.max_iters} (this part ends at {end}): "
                f"loss {loss:.3f}, lr {get_lr(self.step - 1, cfg):.2e}, "
                f"{elapsed:.0f} s in, ~{left:.0f} s to go")

    # ------------------------------------------------------------------ outputs
    def plot(self, path: str | os.PathLike) -> None:
        """Loss curve: per-step training loss (and its moving average) and evaluation points."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        steps, losses = zip(*self.history["train"])
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, losses, lw=0.5, alpha=0.4, label="train (per step)")
        w = max(1, len(losses) // 50)
        if w > 1:
            smooth = np.convolve(losses, np.ones(w) / w, mode="valid")
            ax.plot(steps[w - 1:], smooth, lw=1.5, label=f"train ({w}-step mean)")
        if self.history["eval"]:
            ev = self.history["eval"]
            ax.plot([e["step"] for e in ev], [e["val"] for e in ev], "o-", label="validation")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("cross-entropy (nats / token)")
        ax.set_title(f"{self.cfg.data}-level, {self.raw_model.__class__.__name__}")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)

    def sample(self, n_tokens: int, prompt: str = "\n", seed: int | None = None) -> str:
        """Decode ``n_tokens`` sampled with the config's temperature / top-k / top-p."""
        from transformer_ref.sampling import generate

        tok = self.data.tokenizer
        ids = tok.encode(prompt) or [0]
        idx = torch.tensor([ids], dtype=torch.long, device=self.device)
        seed = self.cfg.seed if seed is None else seed
        gen = torch.Generator().manual_seed(seed)  # on the CPU: same text on every device
        out = generate(self.raw_model, idx, n_tokens, self.cfg.temperature, self.cfg.top_k,
                       self.cfg.top_p, generator=gen)
        return tok.decode(out[0, len(ids):].tolist())

    def close(self) -> None:
        if self.ddp and dist.is_initialized():
            dist.destroy_process_group()


class _Stepper:
    """A trainer as ``budget``'s pacing helpers see a run: ``one_step``."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer

    def one_step(self) -> None:
        self.trainer.train_step()


def _enable_tf32() -> None:
    """TF32 tensor-core matmuls for float32 on Ampere and later (CUDA only)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32"
        torch.backends.cudnn.conv.fp32_precision = "tf32"
    else:  # older torch
        matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def _append_jsonl(path: Path, rec: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def train_step(model, optimizer, x, y, grad_clip: float) -> float:
    """One plain step (zero_grad, loss, backward, global-norm clip, step): the given part a
    run of the learner's own loop uses when the learner's ``train_step`` fails its check.

    >>> m = torch.nn.Linear(3, 5)
    >>> opt = torch.optim.SGD(m.parameters(), lr=0.1)
    >>> 0 < train_step(m, opt, torch.randn(2, 3), torch.tensor([0, 4]), 1.0) < 10
    True
    """
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


@torch.no_grad()
def estimate_loss(model, data, batch_size, block_size, eval_iters, generator=None) -> float:
    """Mean loss over ``eval_iters`` random batches of ``data``, in eval mode (restored after).

    >>> from transformer_ref.models import GPT, GPTConfig
    >>> m = GPT(GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=1, d_model=4))
    >>> 1.5 < estimate_loss(m, np.arange(50) % 7, 2, 4, 2, torch.Generator().manual_seed(0)) < 2.5
    True
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    losses = []
    for _ in range(eval_iters):
        x, y = get_batch(data, batch_size, block_size, device, generator)
        logits = model(x)
        losses.append(F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                      y.reshape(-1)).item())
    model.train(was_training)
    return sum(losses) / len(losses)
