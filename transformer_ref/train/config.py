"""The training configuration: one dataclass, also the command line (every field is a flag).

Presets are named sets of overrides for the runs the course records (see ``PRESETS``):

- ``cpu_smoke``: a few seconds on a laptop CPU; the loss must clearly fall (CI runs it).
- ``cpu_char``: character-level Shakespeare on a 2-core CPU, at most eight minutes (the
  notebook's ``cpu`` run). Tuned on validation loss at equal steps (``--threads 1``, 3000
  steps, eval every 500): learning rate 3e-3 down to 1e-4 gives val 2.128 / 1.853 / 1.722 /
  1.646 / 1.592 / **1.573** at steps 500 … 3000, where 2e-3 down to 2e-4 gave 2.184 / 1.907 /
  1.766 / 1.685 / 1.635 / 1.611 (same seed, model and batches). The notebook's run is
  recorded in its summary.
- ``gpu_char``: character-level Shakespeare on one H100-class GPU, bf16 + compile + SDPA.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

__all__ = ["TrainConfig", "PRESETS", "preset"]


@dataclass
class TrainConfig:
    # --- data ---
    data: str = "char"  # "char" or "bpe" token stream of the Shakespeare corpus
    data_dir: str = "out/data"  # where the tokenized memmaps are cached
    bpe_vocab_size: int = 512
    # --- model (passed to transformer_ref.models.GPTConfig) ---
    block_size: int = 128
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    d_ff: int | None = None
    dropout: float = 0.0
    bias: bool = True
    norm: str = "layer"
    ffn: str = "gelu"
    pos: str = "learned"
    tie_weights: bool = True
    rope_base: float = 10000.0  # RoPE's theta (pos="rope")
    norm_eps: float | None = None  # None -> 1e-5 (layer) / 1e-6 (rms)
    attn_impl: str = "auto"  # "scratch", "sdpa", or "auto" (= sdpa on CUDA, scratch elsewhere)
    norm_impl: str = "auto"  # "scratch", "fused" (F.layer_norm), or "auto" (= fused with sdpa)
    qkv_impl: str = "auto"  # "separate", "fused" (one QKV matmul), or "auto" (= fused with sdpa)
    # --- optimisation ---
    batch_size: int = 32  # sequences per micro-step *per process*
    grad_accum_steps: int = 1  # micro-steps per optimizer step
    max_iters: int = 2000  # optimizer steps
    learning_rate: float = 1e-3  # peak lr after warm-up
    min_lr: float = 1e-4  # lr at the end of the cosine
    warmup_iters: int = 100
    lr_decay_iters: int | None = None  # end of the cosine; None = max_iters
    weight_decay: float = 0.1  # applied to matrices (dim >= 2) only
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # clip the global grad norm to this; 0 = off
    # --- evaluation, logging, checkpoints ---
    eval_interval: int = 250  # evaluate (and checkpoint) every this many steps, and at the end
    eval_iters: int = 20  # batches per split in an evaluation
    log_interval: int = 10
    out_dir: str = "out/train"
    checkpoint: bool = True
    init_from: str = "scratch"  # "scratch" or "resume" (from out_dir/ckpt.pt)
    progress: bool = True  # tqdm bar
    progress_seconds: float = 0.0  # a plain progress line at most this often (0 = none);
    # printed text, no widget: it shows in a terminal, JupyterLab and nbclient alike
    plot: bool = True  # loss curve PNG in out_dir
    sample_tokens: int = 300  # tokens sampled at the end of training (0 = none)
    temperature: float = 0.8
    top_k: int | None = None
    top_p: float | None = None
    # --- system ---
    device: str = "auto"  # "auto" (cuda > mps > cpu), or an explicit torch device
    dtype: str = "auto"  # "auto" (bf16 autocast on CUDA, fp32 elsewhere), "float32", "bfloat16"
    compile: str = "auto"  # "auto" (on for CUDA), "true", "false"
    tf32: bool = True  # allow TF32 matmuls on CUDA
    fused_adamw: str = "auto"  # "auto" (on for CUDA), "true" (CPU has a fused kernel too), "false"
    seed: int = 1337
    threads: int = 0  # torch CPU threads; 0 = torch's default
    peak_flops: float = 0.0  # device peak FLOP/s for MFU; 0 = look the GPU up by name
    extra: dict = field(default_factory=dict)  # free-form notes stored in the checkpoint

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step on one process (multiply by the world size under DDP)."""
        return self.batch_size * self.grad_accum_steps * self.block_size

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


PRESETS: dict[str, dict] = {
    "cpu_smoke": dict(
        block_size=64, n_layer=2, n_head=2, d_model=64, batch_size=16, max_iters=60,
        learning_rate=3e-3, min_lr=3e-4, warmup_iters=10, eval_interval=30, eval_iters=5,
        log_interval=10, sample_tokens=100, attn_impl="scratch",
    ),
    "cpu_char": dict(
        block_size=128, n_layer=4, n_head=4, d_model=128, batch_size=16, max_iters=3000,
        learning_rate=3e-3, min_lr=1e-4, warmup_iters=100, eval_interval=500, eval_iters=20,
        weight_decay=0.1, dropout=0.0, attn_impl="sdpa",
    ),
    "gpu_char": dict(
        block_size=256, n_layer=6, n_head=6, d_model=384, batch_size=64, max_iters=5000,
        learning_rate=1e-3, min_lr=1e-4, warmup_iters=200, eval_interval=500, eval_iters=50,
        dropout=0.2, attn_impl="sdpa", compile="auto", dtype="auto",
    ),
}


def preset(name: str, **overrides) -> TrainConfig:
    """A named preset with field overrides.

    >>> preset("cpu_smoke", max_iters=5).max_iters
    5
    """
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return TrainConfig(**{**PRESETS[name], **overrides})
