"""Input objects that travel to a graded kernel as plain data ("builders").

Some exercises take an object, not only arrays: a ``torch.nn.MultiheadAttention`` whose
weights the student reads (chapter 03), the sublayers a block combines (chapter 05), a GPT
and its KV cache (chapter 06). The grader cannot send an object (``_codec`` carries no
pickle), so such an input is an instance of a class registered here with :func:`builder`:
``_codec`` writes it as the builder's name and the plain-data arguments it was made from
(``plain_args()``: tensors, numbers, strings), and the kernel calls the same class on them.
The in-kernel checks (self-learners) hand the student the very same classes, so both paths
test the same thing. Nothing here is an expected value: this module is part of the graded
kernel's package (and of ``transformer_ref``'s nothing: it imports only torch).

>>> from autograder.checks import _codec
>>> m = MultiheadAttention(torch.eye(6, 2, dtype=torch.float64), torch.eye(2).double(), 1)
>>> copy = _codec.loads(_codec.dumps(m))
>>> type(copy).__name__, torch.equal(copy.in_proj_weight, m.in_proj_weight)
('MultiheadAttention', True)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn as nn

BUILDERS: dict[str, Callable] = {}  # builder name -> the class (called on the plain args)
BUILT_TYPES: dict[type, str] = {}  # the exact class -> its builder name


def builder(name: str):
    """Register a class whose instances ``_codec`` carries as ``(name, plain_args())``."""

    def register(cls):
        BUILDERS[name] = cls
        BUILT_TYPES[cls] = name
        return cls

    return register


def _tensor(x, what: str, dim: int) -> torch.Tensor:
    """A plain floating tensor of ``dim`` dimensions (a builder's argument), else ValueError."""
    if type(x) is not torch.Tensor or x.dim() != dim or not x.is_floating_point():
        raise ValueError(f"{what} should be a {dim}-d floating tensor")
    return x


# ---------------------------------------------------------------- chapter 02 (masking)
_MASKS = {
    "causal": lambda T: torch.ones(T, T, dtype=torch.bool).tril(),
    "none": lambda T: None,
    "one step ahead": lambda T: torch.ones(T, T, dtype=torch.bool).tril(1),
}


@builder("masking.attention_layer")
class AttentionLayer:
    """A fixed attention layer x -> softmax(x W_Q (x W_K)ᵀ / sqrt(d) + M) x W_V, where M
    drops what the mask kind forbids: the ``f`` of chapter 02's Exercises 4.1 and 4.2.

    >>> W = torch.eye(2)
    >>> f = AttentionLayer("causal_layer", "causal", W, 2 * W, 3 * W)
    >>> x = torch.arange(6.0).reshape(3, 2)
    >>> from autograder.checks import _codec
    >>> copy = _codec.loads(_codec.dumps(f))
    >>> type(copy).__name__, repr(copy), torch.equal(copy(x), f(x))
    ('AttentionLayer', 'causal_layer', True)
    """

    def __init__(self, name, mask, W_Q, W_K, W_V):
        if type(name) is not str or mask not in _MASKS:
            raise ValueError(f"unknown mask kind {mask!r}")
        self.name, self.mask = name, mask
        self.W = tuple(_tensor(W, "a weight", 2) for W in (W_Q, W_K, W_V))  # each (d, d)

    def plain_args(self) -> tuple:
        return (self.name, self.mask, *self.W)

    def __call__(self, x):  # (..., T, d) -> (..., T, d)
        W_Q, W_K, W_V = self.W
        q, k, v = x @ W_Q, x @ W_K, x @ W_V
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, T)
        keep = _MASKS[self.mask](x.shape[-2])
        if keep is not None:
            scores = scores.masked_fill(~keep, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def __repr__(self):
        return self.name


# ---------------------------------------------------------------- chapter 03 (mha)
@builder("mha.torch_multihead_attention")
class MultiheadAttention(nn.MultiheadAttention):
    """``torch.nn.MultiheadAttention(d_model, n_head, bias=False, batch_first=True)`` holding
    the given weights: the input of chapter 03's Exercise 5.1 (it *is* torch's class)."""

    def __init__(self, in_proj_weight, out_proj_weight, n_head):
        W_in = _tensor(in_proj_weight, "in_proj_weight", 2)  # (3 d_model, d_model)
        W_out = _tensor(out_proj_weight, "out_proj_weight", 2)  # (d_model, d_model)
        d = W_out.shape[0]
        if type(n_head) is not int or not 0 < n_head <= d or d % n_head or d > 4096 \
                or W_in.shape != (3 * d, d) or W_out.shape != (d, d):
            raise ValueError("inconsistent multi-head attention shapes")
        super().__init__(d, n_head, bias=False, batch_first=True, dtype=W_in.dtype)
        with torch.no_grad():
            self.in_proj_weight.copy_(W_in)
            self.out_proj.weight.copy_(W_out)

    def plain_args(self) -> tuple:
        return (self.in_proj_weight.detach().clone(), self.out_proj.weight.detach().clone(),
                self.num_heads)


# ---------------------------------------------------------------- chapters 05, 06: layers
# The sublayers, blocks and GPT that chapters 05 and 06 hand to the student, written out
# here (not imported from ``transformer_ref``: a graded kernel must not need it). The same
# parameter names as ``transformer_ref``'s modules, so their ``state_dict`` loads as is; the
# checks compare with ``transformer_ref``/``torch.nn`` outputs computed in the grader.
def _softmax(s: torch.Tensor) -> torch.Tensor:
    """Stable softmax over the last axis; a fully masked (all -inf) row gives zeros."""
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    return e / torch.where(denom == 0, torch.ones_like(denom), denom)


class _LayerKV:
    """One attention layer's cached keys and values, ``(B, H, T_past, d_k)`` each."""

    def __init__(self, k=None, v=None):
        self.k, self.v = k, v

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def update(self, k, v):
        self.k = k if self.k is None else torch.cat((self.k, k), dim=-2)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=-2)
        return self.k, self.v


class _Attention(nn.Module):
    """Multi-head attention ``(B, T, d) -> (B, T, d)`` with projections ``q_proj .. out_proj``."""

    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        if d_model % n_head:
            raise ValueError("d_model is not a multiple of n_head")
        self.n_head = n_head
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, context=None, mask=None, is_causal=False, cache=None):
        B, T_q, D = x.shape
        H, kv = self.n_head, x if context is None else context

        def heads(t):  # (B, T, D) -> (B, H, T, d_k)
            return t.view(B, t.shape[1], H, D // H).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(kv)), heads(self.v_proj(kv))
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T_past + T_q, d_k)
        T_k = k.shape[-2]
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // H))  # (B, H, T_q, T_k)
        if is_causal:  # aligned bottom-right: right with a cache too
            keep = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)
            scores = scores.masked_fill(~keep, float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool \
                else scores + mask.to(scores.dtype)
        y = _softmax(scores) @ v  # (B, H, T_q, d_k)
        return self.out_proj(y.transpose(1, 2).reshape(B, T_q, D))


class _FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation {activation!r}")
        self.activation = activation
        self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        h = self.w1(x)
        h = torch.relu(h) if self.activation == "relu" else nn.functional.gelu(h)
        return self.w2(h)


class _LayerNorm(nn.Module):
    """LayerNorm written out (mean, biased variance): no ``layer_norm`` operator runs."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = float(eps)
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mu = x.mean(dim=-1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias


class _Block(nn.Module):
    """Self-attention + FFN, each in a residual branch; ``norm_first``: pre-LN, else post-LN."""

    def __init__(self, d_model, n_head, d_ff, activation, norm_first, eps=1e-5):
        super().__init__()
        self.norm_first = bool(norm_first)
        self.attn = _Attention(d_model, n_head)
        self.ffn = _FeedForward(d_model, d_ff, activation)
        self.norm1, self.norm2 = _LayerNorm(d_model, eps), _LayerNorm(d_model, eps)

    def forward(self, x, mask=None, is_causal=False, cache=None, rope=None, positions=None):
        # ``rope``, ``positions``: transformer_ref's block signature (GPT.forward passes both);
        # these blocks have learned positions only, so RoPE is refused, never ignored
        if rope is not None:
            raise ValueError("this block has no rotary positions (rope must be None)")

        def sa(h):
            return self.attn(h, mask=mask, is_causal=is_causal, cache=cache)

        if self.norm_first:
            x = x + sa(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + sa(x))
        return self.norm2(x + self.ffn(x))


def _state(module: nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _load(module: nn.Module, state: dict) -> nn.Module:
    """``module`` in the dtype of ``state``, holding its tensors (names must match exactly)."""
    if type(state) is not dict or not state or any(type(v) is not torch.Tensor
                                                   for v in state.values()):
        raise ValueError("a state is a dict of tensors")
    module.to(next(iter(state.values())).dtype)
    module.load_state_dict(state, strict=True)
    return module


def _size(config: dict, key: str, top: int = 4096) -> int:
    v = config.get(key)
    if type(v) is not int or not 0 < v <= top:
        raise ValueError(f"{key} should be an int in 1..{top}")
    return v


@builder("layers.sublayer")
class Sublayer:
    """A named sublayer with fixed weights, as a block exercise gets it: ``attn(h)``,
    ``self_attn(h, mask=None)``, ``cross_attn(h, context)``, ``ffn(h)``, ``norm(h)``, the
    chapter 06 ``f(x)`` functions (attention, optionally causal or on ``x + positions``;
    ``scale_tokens``: token t times t + 1)."""

    KINDS = ("attn", "self_attn", "cross_attn", "ffn", "norm", "scale_tokens")

    def __init__(self, name: str, kind: str, config: dict, state: dict):
        if type(name) is not str or kind not in self.KINDS or type(config) is not dict:
            raise ValueError("bad sublayer")
        self.name, self.kind, self.config = name, kind, dict(config)
        state = dict(state)
        self.positions = state.pop("positions", None)  # (T_max, d) added to x first
        self.module = None
        if kind in ("attn", "self_attn", "cross_attn"):
            d = _size(config, "d_model")
            self.module = _load(_Attention(d, _size(config, "n_head")), state)
        elif kind == "ffn":
            self.module = _load(_FeedForward(_size(config, "d_model"), _size(config, "d_ff"),
                                             config.get("activation")), state)
        elif kind == "norm":
            eps = config.get("eps")
            if type(eps) is not float:
                raise ValueError("eps should be a float")
            self.module = _load(_LayerNorm(_size(config, "d_model"), eps), state)
        if self.module is not None:
            self.module.requires_grad_(False)

    def plain_args(self) -> tuple:
        state = {} if self.module is None else _state(self.module)
        if self.positions is not None:
            state["positions"] = self.positions.clone()
        return (self.name, self.kind, dict(self.config), state)

    def __call__(self, *args, **kwargs):
        return getattr(self, f"_{self.kind}")(*args, **kwargs)

    def _attn(self, h):
        if self.positions is not None:
            h = h + self.positions[: h.shape[1]]
        return self.module(h, is_causal=bool(self.config.get("causal")))

    def _self_attn(self, h, mask=None):
        return self.module(h, mask=mask)

    def _cross_attn(self, h, context):
        return self.module(h, context=context)

    def _ffn(self, h):
        return self.module(h)

    _norm = _ffn

    def _scale_tokens(self, x):  # (B, T, d): token t times t + 1
        return x * torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]

    def __repr__(self) -> str:
        return self.name


_BLOCK_KEYS = ("d_model", "n_head", "d_ff")


@builder("layers.encoder_block")
class EncoderBlock(_Block):
    """An encoder block (``transformer_ref.EncoderBlock``'s parameters and sums) with given
    weights, trainable: what chapter 05's Exercise 3.1 measures gradients of."""

    def __init__(self, config: dict, state: dict):
        if type(config) is not dict:
            raise ValueError("bad block config")
        super().__init__(*(_size(config, k) for k in _BLOCK_KEYS), config.get("activation"),
                         config.get("norm_first"))
        self._config = dict(config)
        _load(self, dict(state))

    def plain_args(self) -> tuple:
        return (dict(self._config), _state(self))


@builder("layers.kv_cache")
class KVCache:
    """One layer cache per block (``cache[i]``); ``length`` = tokens seen. Built empty
    (``GPT.init_cache``) or holding the keys and values of a prefix (computed by the grader)."""

    def __init__(self, layers: tuple):
        if type(layers) is not tuple or not 0 < len(layers) <= 64:
            raise ValueError("bad cache")
        self.layers = []
        for kv in layers:
            if kv is not None and (type(kv) is not tuple or len(kv) != 2
                                   or any(type(t) is not torch.Tensor for t in kv)):
                raise ValueError("a cached layer is None or (k, v)")
            self.layers.append(_LayerKV() if kv is None else _LayerKV(*kv))

    @property
    def length(self) -> int:
        return self.layers[0].length

    def __getitem__(self, i: int) -> _LayerKV:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def plain_args(self) -> tuple:
        return (tuple(None if c.k is None else (c.k.detach().clone(), c.v.detach().clone())
                      for c in self.layers),)


class _Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "GPTConfig(" + ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()) + ")"


_GPT_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "d_model", "d_ff")


@builder("layers.gpt")
class GPT(nn.Module):
    """A GPT's parts with given weights, frozen: ``wte``, ``wpe`` (learned positions),
    ``drop`` (dropout, p = 0, as the checked ``transformer_ref.GPT`` has it), ``rope`` (None:
    no rotary positions), ``blocks`` (pre-LN, GELU; ``blk(x, is_causal=True,
    cache=cache[i])``, which also take ``rope`` and ``positions``), ``ln_f``, ``lm_head``
    (tied to ``wte``), ``config`` and ``init_cache(B)``: every part ``transformer_ref.GPT.
    forward`` uses (issue 32). Chapter 06 asks for its forward pass, so the model's own
    forward is not there."""

    def __init__(self, config: dict, state: dict):
        super().__init__()
        if type(config) is not dict:
            raise ValueError("bad GPT config")
        V, T, L, H, d, f = (_size(config, k, 2**17) for k in _GPT_KEYS)
        self.config = _Config(**{k: config[k] for k in _GPT_KEYS})
        self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
        self.drop, self.rope = nn.Dropout(0.0), None
        self.blocks = nn.ModuleList(_Block(d, H, f, "gelu", True) for _ in range(L))
        self.ln_f = _LayerNorm(d, 1e-5)
        self.lm_head = nn.Linear(d, V, bias=False)
        _load(self, dict(state))
        self.lm_head.weight = self.wte.weight  # one Parameter, used twice
        self.eval().requires_grad_(False)

    def plain_args(self) -> tuple:
        return ({k: getattr(self.config, k) for k in _GPT_KEYS}, _state(self))

    def init_cache(self, batch_size: int) -> KVCache:
        """An empty cache (its tensors are made by the first call of the blocks with it)."""
        return KVCache((None,) * self.config.n_layer)

    def forward(self, *args, **kwargs):
        raise TypeError(
            "this model has no forward pass of its own here: the exercise is to compute it "
            "from its parts (model.wte, model.wpe, model.drop, model.blocks, model.ln_f, "
            "model.lm_head)")

    def __repr__(self) -> str:
        c = self.config
        return (f"GPT(vocab_size={c.vocab_size}, n_layer={c.n_layer}, n_head={c.n_head}, "
                f"d_model={c.d_model}, block_size={c.block_size})")
