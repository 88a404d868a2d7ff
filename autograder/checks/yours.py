"""Your own parts: later chapters run the functions you wrote in earlier ones.

``load("03_multihead_attention", "multi_head_attention")`` reads *your saved* notebook of
that chapter (``../03_multihead_attention/03_multihead_attention.ipynb`` from the running
notebook's folder, or ``./03_multihead_attention.ipynb`` where the notebooks sit side by side,
as in the student kit), runs its setup cell and your answer cells (the nbgrader ``solution``
cells: no demonstration, no check cell) in a fresh namespace, then runs each requested
exercise's *visible* check quietly, the same check its own notebook calls. It prints one line
per piece and hands back yours when its check passes, else the given implementation::

    ✔ using your multi_head_attention (chapter 03, its checks pass)
    ✘ your layer_norm (chapter 04) fails its check (...): using the given one instead
    – chapter 04 not found or not saved: using the given layer_norm

A missing notebook, a cell that raises, a function that still raises ``NotImplementedError``:
the given one, said so. Nothing is fetched. Where no visible check of a piece can run (the
kit leaves it out), yours is used and the line says it is unchecked; it never says "its checks
pass" unless a check ran and passed.

**Nothing given, nothing crashes.** The student kit holds no given part for its own chapters'
exercises. Where neither yours nor a given one is usable, the part is a stand-in that raises
:class:`Unfinished` (a ``NotImplementedError``) naming the exercise to finish; the demo cells
run inside ``requires(...)``, which prints that instead of a traceback and skips the cell.

**Grading stays chapter by chapter.** In a graded kernel (nbgrader's execution, a
``course-grade`` job or a probe) nothing is read or checked: the given parts are used and the
loader says so, so a mistake in one chapter never costs points in another. (The cells that
call the loader are demonstration cells, which grading does not run anyway.)

:class:`YourGPT` is a GPT whose parameters are laid out like ``transformer_ref.GPT``'s (the
same ``state_dict`` keys and shapes, GPT-2's initialisation) but whose forward pass is made of
the pieces: your ``gpt_logits`` (06) calls the blocks, each block is your ``pre_ln_block``
(05) over your ``multi_head_attention`` (03, with your ``scaled_dot_product_attention`` of 01
inside), your ``layer_norm`` (04) and your ``feed_forward`` (05). :class:`YourRun` trains it
with chapter 08's loop pieces (``get_batch``, ``get_lr``, ``train_step`` with your
``cross_entropy`` and clipping, ``estimate_loss`` and ``AdamW``) inside the same time budget
as the reference trainer (``plan_schedule``).

>>> sorted(CHAPTER_OF)[:3]
['AdamW', 'apply_rope', 'cross_entropy']
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import math
import os
import time
import types
from pathlib import Path

import torch
import torch.nn as nn

from autograder.grading import env as _env

# the exercise of each piece a later chapter can take from an earlier one
CHAPTER_OF = {
    "scaled_dot_product_attention": "01_attention",
    "multi_head_attention": "03_multihead_attention",
    "layer_norm": "04_layer_norm",
    "feed_forward": "05_feed_forward_blocks",
    "pre_ln_block": "05_feed_forward_blocks",
    "post_ln_block": "05_feed_forward_blocks",
    "gpt_logits": "06_transformer",
    "apply_rope": "06_transformer",
    "train_bpe_fast": "07_bpe",
    "encode": "07_bpe",
    "decode": "07_bpe",
    "get_batch": "08_training",
    "cross_entropy": "08_training",
    "get_lr": "08_training",
    "train_step": "08_training",
    "estimate_loss": "08_training",
    "AdamW": "08_training",
}
# the given implementation of each: "module:attribute" (read when needed; in a graded kernel
# or the student kit the reference of the chapter's own exercises is stubbed)
GIVEN = {
    "scaled_dot_product_attention": "transformer_ref.attention:scaled_dot_product_attention",
    "multi_head_attention": "transformer_ref.mha:multi_head_attention",
    "layer_norm": "transformer_ref.norms:layer_norm",
    "feed_forward": "transformer_ref.ffn:feed_forward",
    "pre_ln_block": "transformer_ref.blocks:pre_ln_block",
    "post_ln_block": "transformer_ref.blocks:post_ln_block",
    "gpt_logits": "transformer_ref.models:gpt_logits",
    "apply_rope": "transformer_ref.positional:apply_rope",
    "train_bpe_fast": "transformer_ref.bpe.train:train_bpe",
    "encode": "transformer_ref.bpe.bytelevel:BPETokenizer",
    "decode": "transformer_ref.bpe.bytelevel:BPETokenizer",
    "get_batch": "transformer_ref.train.data:get_batch",
    "cross_entropy": "torch.nn.functional:cross_entropy",
    "get_lr": "transformer_ref.train.trainer:get_lr",
    "train_step": "transformer_ref.train.trainer:train_step",
    "estimate_loss": "transformer_ref.train.trainer:estimate_loss",
    "AdamW": "torch.optim:AdamW",
}
MODEL_PIECES = ("multi_head_attention", "layer_norm", "feed_forward", "pre_ln_block",
                "gpt_logits")
LOOP_PIECES = ("get_batch", "cross_entropy", "get_lr", "train_step", "estimate_loss", "AdamW")
TOKENIZER_PIECES = ("train_bpe_fast", "encode", "decode")  # chapter 07's byte-level BPE


def graded() -> bool:
    """True in a graded kernel: nbgrader's execution, a course-grade job or a probe."""
    return any(os.environ.get(v) for v in ("NBGRADER_EXECUTION", _env.GRADE_JOB,
                                           _env.PROBE_DIR))


# ---------------------------------------------------------------- the given parts
def _adapt(name: str, fn):
    """The given ``fn`` called the way the exercise ``name`` is called."""
    if name == "get_batch":
        return lambda data, batch_size, block_size, generator=None: fn(
            data, batch_size, block_size, generator=generator)
    if name == "cross_entropy":
        return lambda logits, targets: fn(logits.reshape(-1, logits.shape[-1]),
                                          targets.reshape(-1))
    if name == "get_lr":
        return lambda step, max_lr, min_lr, warmup_iters, max_iters: fn(
            step, types.SimpleNamespace(learning_rate=max_lr, min_lr=min_lr, lr_decay_iters=None,
                                        warmup_iters=warmup_iters, max_iters=max_iters))
    if name == "scaled_dot_product_attention":
        return lambda q, k, v, mask=None, scale=None: fn(q, k, v, mask=mask, scale=scale)
    if name == "apply_rope":  # 06 Ex 2.2's call: the angles from the positions, in float64
        def rotate_at(x, positions, base=10000.0):  # the given (x, cos, sin) rotation
            d_k = x.shape[-1]
            theta = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64,
                                           device=positions.device) / d_k)  # (d_k/2,)
            angle = positions.to(torch.float64)[:, None] * theta  # (T, d_k/2)
            return fn(x, torch.cos(angle), torch.sin(angle))

        return rotate_at
    if name == "encode":  # ranks {bytes: id} are tiktoken's: the id is the merge priority
        return lambda text, ranks, special_tokens: fn(
            {i: b for b, i in ranks.items()}, special_tokens=dict(special_tokens)).encode(text)
    if name == "decode":
        return lambda ids, vocab: fn(dict(vocab)).decode(ids)
    return fn


class Unfinished(NotImplementedError):
    """A part that is neither yours (usable) nor given here: ``finish`` says which exercise to
    finish (``requires`` prints it and skips the demo cell)."""

    def __init__(self, finish: str):
        super().__init__(finish)
        self.finish = finish


def exercise_label(chapter: str, name: str) -> str:
    """``"04 Exercise 2.1 (`layer_norm`)"``: the exercise of ``chapter`` that asks for ``name``,
    read from its visible check (in the repository and in the kit alike)."""
    check, _ = visible_check(chapter, name)
    label = getattr(check, "exercise", None)
    if label is None and check is not None:
        from autograder.checks._core import _find_check

        found = _find_check(getattr(check, "check_key", None))
        label = found.exercise if found is not None else None
    return f"{chapter[:2]} {label} (`{name}`)" if label else f"chapter {chapter[:2]}'s `{name}`"


def unfinished_part(name: str, chapter: str | None = None):
    """The stand-in for a part that is neither yours nor given: calling it (or building a
    model or run that needs it) raises :class:`Unfinished` naming the exercise."""
    finish = (f"finish {exercise_label(chapter or CHAPTER_OF[name], name)} first: neither your "
              "answer nor a given one is usable here")

    def part(*args, **kwargs):
        raise Unfinished(finish)

    part.__name__ = part.__qualname__ = name
    part.unfinished = finish
    return part


def _stubbed(fn) -> bool:
    """A reference left out of this kernel or kit (its body only raises)."""
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__init__", None), "__code__",
                                                    None)
    return code is not None and "_unavailable" in code.co_names


def given(name: str):
    """The given implementation of the exercise ``name`` (None where it is left out)."""
    module, _, attr = GIVEN[name].partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None
    return None if _stubbed(fn) else _adapt(name, fn)


# ---------------------------------------------------------------- your saved notebooks
def find_notebook(chapter: str, folder: str | os.PathLike | None = None) -> Path | None:
    """Your saved notebook of ``chapter`` next to the running one, or None."""
    here = Path(folder) if folder is not None else Path.cwd()
    for path in (here.parent / chapter / f"{chapter}.ipynb", here / f"{chapter}.ipynb"):
        if path.is_file():
            return path
    return None


def _cells(path: Path) -> list[tuple[str, str]]:
    """(kind, source) of the setup cell, the answer cells and the given helper cells (a
    locked ``*_given`` cell, e.g. 07's ``pretoken_counts``), in order."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if meta.get("grade_id") == "setup":
            out.append(("setup", src))
        elif meta.get("solution"):
            out.append(("answer", src))
        elif str(meta.get("grade_id", "")).endswith("_given") and not meta.get("grade"):
            out.append(("given", src))  # read-only helpers the answers after it call
    return out


def _defined(src: str) -> set[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _plain(src: str) -> str:
    """The cell without IPython's line magics and shell escapes (not Python)."""
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())


def run_answers(path: Path, chapter: str) -> tuple[dict, dict]:
    """Run the setup and answer cells of the notebook at ``path`` in a fresh namespace:
    (namespace, {name: why it is unusable} for the names of cells that raised)."""
    ns: dict = {"__name__": f"yours_{chapter}"}
    broken: dict = {}
    printopts = dict(vars(torch._tensor_str.PRINT_OPTS))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for kind, src in _cells(path):
                try:
                    exec(compile(_plain(src), f"<your {chapter} {kind} cell>", "exec"), ns)
                except Exception as e:  # noqa: BLE001 - the learner's cell: say why, go on
                    why = f"its cell raised {type(e).__name__}: {_short(str(e))}"
                    if kind == "setup":
                        raise RuntimeError(f"the setup cell raised {type(e).__name__}") from e
                    for name in _defined(src):
                        broken[name] = why
    finally:
        vars(torch._tensor_str.PRINT_OPTS).update(printopts)
    return ns, broken


def _short(text: str, limit: int = 90) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def visible_check(chapter: str, name: str):
    """(the visible check the chapter's notebook calls for ``name``, or None; why none runs
    here, or None). The kit's stand-in for a check it leaves out (``absent``) is none."""
    try:
        module = importlib.import_module(f"autograder.checks.{chapter[3:]}")
    except ImportError:
        return None, f"the checks of chapter {chapter[:2]} are not here"
    check = getattr(module, f"check_{name}", None)
    if check is None:
        check = next((getattr(module, a) for a in dir(module)
                      if a.lower() == f"check_{name}".lower()), None)
    if check is None:
        return None, "it has no check here"
    if getattr(check, "absent", None):
        return check, "its visible check is not in this kit"
    return check, None


def check_quietly(chapter: str, name: str, fn) -> str | None:
    """None when ``fn`` passes the visible check of ``chapter``'s exercise ``name``, else why
    not (short). The check is the one the chapter's notebook calls; its output is hidden."""
    from autograder.checks._core import CheckFailed, NotImplementedYet

    check, none = visible_check(chapter, name)
    if none is not None:
        return none
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(fn)
    except NotImplementedYet:
        return "not implemented yet"
    except NotImplementedError:
        return "not implemented yet"
    except CheckFailed as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        named = next((ln for ln in lines if ln.startswith("Likely mistake")), None)
        return _short(named or (lines[0] if lines else "failed"), 110)
    except Exception as e:  # noqa: BLE001 - the learner's function raised inside the check
        return _short(f"{type(e).__name__}: {e}")
    return None


def _fallback(name: str, say, line: str, chapter: str | None = None):
    """The given ``name``, with ``line`` said; where it is left out (the student kit), say
    which exercise to finish instead of "using the given ...", and hand back the stand-in
    that raises :class:`Unfinished` (:func:`unfinished_part`)."""
    fn = given(name)
    if fn is None:
        head = line[: line.rindex(": using the given")]
        chapter = chapter or CHAPTER_OF[name]
        say(f"{head}, and the given {name} is not in this kit: finish "
            f"{exercise_label(chapter, name)} first (demos that need it are skipped)")
        return unfinished_part(name, chapter)
    say(line)
    return fn


def load(chapter: str, *names: str, namespace: dict | None = None, folder=None, say=print,
         inject: dict | None = None) -> types.SimpleNamespace:
    """Your functions ``names`` of ``chapter`` where their visible checks pass, else the given
    ones; one line each says which. ``namespace``: ``{name: function}`` of the running
    notebook when ``chapter`` is its own chapter (its functions are taken from there, not
    from the saved file). ``inject``: names set in the chapter's namespace before checking
    (an earlier chapter's function its code calls). In a graded kernel: the given parts,
    nothing read.
    """
    ch = chapter[:2]
    out = {}
    if graded():
        out["mine"] = []
        for name in names:
            out[name] = given(name)
            say(f"– graded run: using the given {name} (each chapter is graded on its own)")
        return types.SimpleNamespace(**out)
    broken: dict = {}
    yours: list = []
    out["mine"] = yours  # the names that are yours
    if namespace is None:
        path = find_notebook(chapter, folder)
        if path is None:
            for name in names:
                out[name] = _fallback(name, say, f"– chapter {ch} not found or not saved: "
                                                 f"using the given {name}", chapter)
            return types.SimpleNamespace(**out)
        try:
            namespace, broken = run_answers(path, chapter)
        except Exception as e:  # noqa: BLE001
            for name in names:
                out[name] = _fallback(name, say, f"– chapter {ch}: {_short(str(e))}: "
                                                 f"using the given {name}", chapter)
            return types.SimpleNamespace(**out)
        namespace.update(inject or {})
    for name in names:
        fn = namespace.get(name)
        unchecked = None
        if name in broken:
            problem = broken[name]
        elif not callable(fn):
            problem = "not found in the notebook"
        else:
            unchecked = visible_check(chapter, name)[1]
            problem = None if unchecked else check_quietly(chapter, name, fn)
        if unchecked is not None:  # no check can run: yours, said to be unchecked
            say(f"– using your {name} (chapter {ch}) unchecked: {unchecked}")
            out[name] = fn
            yours.append(name)
        elif problem is None:
            say(f"✔ using your {name} (chapter {ch}, its checks pass)")
            out[name] = fn
            yours.append(name)
        else:
            out[name] = _fallback(name, say, f"✘ your {name} (chapter {ch}) fails its check "
                                             f"({problem}): using the given one instead",
                                  chapter)
    return types.SimpleNamespace(**out)


def model_parts(here: str = "08_training", own: dict | None = None, folder=None,
                say=print, extra: tuple = ()) -> types.SimpleNamespace:
    """The pieces of the GPT, from your chapters before ``here`` (and ``own``, ``{name:
    function}`` of the running notebook, for ``here``'s own pieces): attention (01) inside
    multi-head attention (03), layer norm (04), FFN and the blocks (05), the forward pass
    (06); and the pieces ``extra`` names (``("apply_rope",)``: 06's RoPE, for
    ``YourGPT(config with pos="rope")``)."""
    parts: dict = {}
    mine = {n: CHAPTER_OF[n] for n in (*MODEL_PIECES, "post_ln_block", *extra)}
    wanted = {ch: [n for n, c in mine.items() if c == ch] for ch in sorted(set(mine.values()))}
    for chapter, names in wanted.items():
        if chapter > here:
            for name in names:  # a later chapter's piece: the given one, said nowhere
                parts[name] = given(name) or unfinished_part(name, chapter)
            continue
        inject = None
        if chapter == "03_multihead_attention" and here > "01_attention" and not graded():
            got = load("01_attention", "scaled_dot_product_attention", folder=folder, say=say)
            if got.mine:  # chapter 03's given `attention` is chapter 01's answer: use yours
                inject = {"attention": got.scaled_dot_product_attention}
        mine_here = (own or {}) if chapter == here else None
        got = vars(load(chapter, *names, namespace=mine_here, folder=folder, say=say,
                        inject=inject))
        parts.setdefault("mine", []).extend(got.pop("mine"))
        parts.update(got)
    return types.SimpleNamespace(**parts)


def position_scheme(parts, say=print) -> str:
    """``"rope"`` where ``parts.apply_rope`` is usable (yours, or the given one: the line of
    :func:`model_parts` said which), else ``"learned"``, said in one line: ``YourGPT`` then
    learns a position table, as ``transformer_ref.GPT``'s default."""
    if not _missing(parts, ("apply_rope",)):
        return "rope"
    say(f"– no RoPE here (finish {exercise_label(CHAPTER_OF['apply_rope'], 'apply_rope')} for "
        "it): your GPT learns a table of positions instead (learned positions, as GPT-2)")
    return "learned"


def tokenizer_parts(folder=None, say=print) -> types.SimpleNamespace:
    """Chapter 07's byte-level BPE: your ``train_bpe_fast``, ``encode`` and ``decode`` where
    their checks pass, else the given ones (``transformer_ref.bpe``), one line each."""
    return load("07_bpe", *TOKENIZER_PIECES, folder=folder, say=say)


def loop_parts(own: dict, say=print) -> types.SimpleNamespace:
    """Chapter 08's loop pieces from the running notebook (``own``: ``{name: function}``),
    each checked."""
    return load("08_training", *LOOP_PIECES, namespace=own, say=say)


def built(obj, what: str):
    """``obj``, built by an earlier demo cell; where that cell was skipped (``obj`` is None),
    raise :class:`Unfinished` saying so (this cell's ``requires`` skips it too)."""
    if obj is None:
        raise Unfinished(f"{what} was not built (its cell above was skipped and says why)")
    return obj


# ---------------------------------------------------------------- the GPT of your pieces
def _missing(parts, names) -> list[str]:
    return [n for n in names if getattr(parts, n, None) is None
            or getattr(getattr(parts, n), "unfinished", None)]


def need(parts, names, built: bool = False) -> None:
    """Raise :class:`Unfinished` naming the exercises of the parts of ``names`` that are
    neither yours nor given (a demo cell's ``requires`` says so and skips the cell).
    ``built``: only for absent parts; a stand-in raises when the object built runs it."""
    missing = [n for n in names if getattr(parts, n, None) is None] if built else _missing(
        parts, names)
    if missing:
        labels = [exercise_label(CHAPTER_OF[n], n) for n in missing]
        raise Unfinished(f"finish {', '.join(labels)} first: neither your answer nor a given "
                         "one is usable here")


class _Positions(nn.Embedding):
    """``wpe``: a learned ``(block_size, d_model)`` table; positions may come from the CPU."""

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return super().forward(positions.to(self.weight.device))


class _NoPositions(nn.Module):
    """``wpe`` of a RoPE GPT: adds nothing (zeros ``(T, d_model)``, no parameter), so a
    ``gpt_logits`` written for learned positions runs unchanged; the blocks rotate q and k."""

    def __init__(self, d_model: int):
        super().__init__()
        self.register_buffer("zero", torch.zeros(d_model), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.zero.expand(positions.shape[-1], -1)


class _Rope:
    """``rope(x, positions)``: your ``apply_rope(x, positions, base)`` (06 Ex 2.2), or the
    given one, at the model's ``rope_base``. On a GPU the tensors your function makes
    (``torch.arange`` for the angles) are made there too: x's device is the default one."""

    def __init__(self, fn, base: float = 10000.0):
        self.fn, self.base = fn, base

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu":
            return self.fn(x, positions, self.base)
        with torch.device(x.device):
            return self.fn(x, positions, self.base)


class _RopeAttention:
    """Stands in for ``attention`` in the namespace of your ``multi_head_attention`` (03): while
    ``rotate`` is set, each call rotates the heads' queries and keys ``(..., T, d_k)`` at their
    positions first, then runs your attention (01); otherwise it is your attention as is."""

    def __init__(self, inner):
        self.inner, self.rotate, self.calls = inner, None, 0

    def __call__(self, q, k, v, *args, **kwargs):
        if self.rotate is not None:
            rope, q_pos, k_pos = self.rotate
            q, k = rope(q, q_pos), rope(k, k_pos)
            self.calls += 1
        return self.inner(q, k, v, *args, **kwargs)


def _heads(x: torch.Tensor, n_head: int) -> torch.Tensor:  # (B, T, d) -> (B, H, T, d_k)
    return x.view(x.shape[0], x.shape[1], n_head, -1).transpose(1, 2)


def _merged(x: torch.Tensor) -> torch.Tensor:  # (B, H, T, d_k) -> (B, T, d)
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)


class YourNorm(nn.Module):
    """LayerNorm's parameters (``weight``, ``bias``); forward: your ``layer_norm``."""

    def __init__(self, d: int, parts, eps: float = 1e-5):
        super().__init__()
        self.parts, self.eps = parts, eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return self.parts.layer_norm(x, self.weight, self.bias, self.eps)


class YourFFN(nn.Module):
    """``w1``, ``w2`` as ``nn.Linear`` (out, in); forward: your ``feed_forward`` with the
    row-form weights ``w.weight.T``."""

    def __init__(self, d: int, d_ff: int, parts, activation: str = "gelu"):
        super().__init__()
        self.parts, self.activation = parts, activation
        self.w1, self.w2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        return self.parts.feed_forward(x, self.w1.weight.T, self.w1.bias, self.w2.weight.T,
                                       self.w2.bias, self.activation)


class YourAttention(nn.Module):
    """``q_proj, k_proj, v_proj, out_proj`` as ``nn.Linear``; forward: your
    ``multi_head_attention`` with the row-form weights. Its weights take no bias, so the
    projections' biases ride along as one more input feature that is always 1 (a row
    ``b`` under ``W``: ``[x, 1] [W; b] = x W + b``); ``out_proj``'s bias is added after."""

    def __init__(self, d: int, n_head: int, parts):
        super().__init__()
        self.parts, self.n_head = parts, n_head
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        self.route = None  # RoPE through your attention: a _RopeAttention (YourGPT sets it)

    def forward(self, x_q, x_kv, mask=None, need_weights=False, rope=None):
        """``rope``: ``(rope, q_positions, k_positions)`` rotates each head's queries and keys
        (RoPE) before the scores. Through ``route`` (your 03 function calls your 01 attention:
        the rotation happens there) or, for any other ``multi_head_attention``, on the
        projections computed here, handed to yours with identity weights (slower)."""
        if rope is not None and self.route is None:
            return self._rotated_inputs(x_q, x_kv, mask, rope)
        if rope is not None:
            self.route.rotate = rope
            try:
                return self.forward(x_q, x_kv, mask)
            finally:
                self.route.rotate = None
        ws = [lin.weight.T for lin in (self.q_proj, self.k_proj, self.v_proj)]
        ws = [torch.cat([w, lin.bias[None]], dim=0)
              for w, lin in zip(ws, (self.q_proj, self.k_proj, self.v_proj))]  # (d + 1, d)
        one = x_q.new_ones(*x_q.shape[:-1], 1)
        xq = torch.cat([x_q, one], dim=-1)
        xkv = xq if x_kv is x_q else torch.cat([x_kv, x_kv.new_ones(*x_kv.shape[:-1], 1)], -1)
        y = self.parts.multi_head_attention(xq, xkv, *ws, self.out_proj.weight.T, self.n_head,
                                            mask)
        return y + self.out_proj.bias

    def _rotated_inputs(self, x_q, x_kv, mask, rope):
        """RoPE for any ``multi_head_attention``: q, k, v projected here, q and k rotated per
        head, then yours on ``[q, 0]`` and ``[k, v]`` with ``W_Q = W_K = [I; 0]``,
        ``W_V = [0; I]``, which hands those heads to its attention unchanged."""
        fn, q_pos, k_pos = rope
        H = self.n_head
        q = _merged(fn(_heads(self.q_proj(x_q), H), q_pos))
        k = _merged(fn(_heads(self.k_proj(x_kv), H), k_pos))
        v = self.v_proj(x_kv)
        d = q.shape[-1]
        eye, zero = torch.eye(d, dtype=q.dtype, device=q.device), q.new_zeros(d, d)
        first, second = torch.cat([eye, zero]), torch.cat([zero, eye])  # (2d, d)
        y = self.parts.multi_head_attention(torch.cat([q, torch.zeros_like(q)], -1),
                                            torch.cat([k, v], -1), first, first, second,
                                            self.out_proj.weight.T, H, mask)
        return y + self.out_proj.bias


class _Cache:
    """One layer's past: the normalised inputs of the tokens seen (keys and values are
    recomputed from them by your attention)."""

    def __init__(self):
        self.h = None

    @property
    def length(self) -> int:
        return 0 if self.h is None else self.h.shape[1]

    def update(self, h):
        self.h = h if self.h is None else torch.cat([self.h, h], dim=1)
        return self.h


class YourCache:
    """``model.init_cache(B)``: one :class:`_Cache` per block; ``length`` = tokens seen."""

    def __init__(self, n_layer: int):
        self.layers = [_Cache() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        return self.layers[0].length

    def __getitem__(self, i):
        return self.layers[i]


_MASKS: dict = {}


def _causal(T_q: int, T_k: int, device) -> torch.Tensor:
    """Keep mask (T_q, T_k): query i (position T_k - T_q + i) sees keys up to itself."""
    key = (T_q, T_k, str(device))
    if key not in _MASKS:
        _MASKS[key] = torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(T_k - T_q)
    return _MASKS[key]


class YourBlock(nn.Module):
    """``attn, ffn, norm1, norm2`` laid out like ``transformer_ref``'s block; forward: your
    ``pre_ln_block`` (or ``post_ln_block`` with ``norm_first=False``) over them."""

    def __init__(self, d: int, n_head: int, parts, d_ff: int | None = None,
                 activation: str = "gelu", norm_first: bool = True, eps: float = 1e-5,
                 rope=None):
        super().__init__()
        self.parts, self.norm_first, self.rope = parts, norm_first, rope
        self.attn = YourAttention(d, n_head, parts)
        self.ffn = YourFFN(d, d_ff or 4 * d, parts, activation)
        self.norm1, self.norm2 = YourNorm(d, parts, eps), YourNorm(d, parts, eps)
        self.last_weights = None

    def forward(self, x, is_causal: bool = False, cache=None, mask=None):
        def attn(h):
            ctx = h if cache is None else cache.update(h)
            m = _causal(h.shape[1], ctx.shape[1], h.device) if is_causal else mask
            if self.rope is None:
                return self.attn(h, ctx, m)
            # the keys sit at 0 .. T_k - 1 (the cache's past first), the queries at the end
            k_pos = torch.arange(ctx.shape[1], device=h.device)
            return self.attn(h, ctx, m, rope=(self.rope, k_pos[ctx.shape[1] - h.shape[1]:],
                                              k_pos))

        block = self.parts.pre_ln_block if self.norm_first else self.parts.post_ln_block
        return block(x, attn, self.ffn, self.norm1, self.norm2)


class YourGPT(nn.Module):
    """A GPT made of your pieces, parameters laid out like ``transformer_ref.GPT`` (pre-LN,
    GELU, tied head): ``state_dict``s load into each other.

    Positions as ``config.pos`` says: ``"learned"`` (a table ``wpe``, GPT-2) or ``"rope"``
    (``wpe`` adds nothing; every block rotates its heads' queries and keys with your
    ``apply_rope`` of 06, ``parts.apply_rope``, at ``config.rope_base``, as
    ``transformer_ref.GPT(pos="rope")`` does with its own). ``forward(idx)`` is your
    ``gpt_logits(idx, self, start, cache)``.
    """

    def __init__(self, config, parts):
        super().__init__()
        need(parts, MODEL_PIECES, built=True)  # a stand-in raises when it runs
        c = self.config = config
        self.parts = parts
        pos = getattr(c, "pos", "learned")
        if pos not in ("learned", "rope"):
            raise ValueError(f"YourGPT has learned or rope positions, got pos={pos!r}")
        self.rope = None
        if pos == "rope":
            need(parts, ("apply_rope",), built=True)
            self.rope = _Rope(parts.apply_rope, getattr(c, "rope_base", 10000.0))
        self.wte = nn.Embedding(c.vocab_size, c.d_model)
        self.wpe = (_Positions(c.block_size, c.d_model) if self.rope is None
                    else _NoPositions(c.d_model))
        self.drop = nn.Dropout(0.0)  # as transformer_ref.GPT has (your gpt_logits may use it)
        eps = 1e-5 if getattr(c, "norm_eps", None) is None else c.norm_eps
        self.blocks = nn.ModuleList(
            YourBlock(c.d_model, c.n_head, parts, getattr(c, "d_ff", None),
                      getattr(c, "ffn", "gelu"), eps=eps, rope=self.rope)
            for _ in range(c.n_layer))
        self.ln_f = YourNorm(c.d_model, parts, eps)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        from transformer_ref.models import GPT

        self.apply(GPT._init_weights)  # GPT-2's initialisation, as transformer_ref.GPT's
        for blk in self.blocks:
            nn.init.normal_(blk.attn.out_proj.weight, 0.0, 0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(blk.ffn.w2.weight, 0.0, 0.02 / math.sqrt(2 * c.n_layer))
        if self.rope is not None:
            route = _rope_route(self.blocks[0].attn, self.rope)
            for blk in self.blocks:
                blk.attn.route = route

    def init_cache(self, batch_size: int) -> YourCache:
        del batch_size
        return YourCache(self.config.n_layer)

    def forward(self, idx, cache=None):
        idx = idx.to(self.wte.weight.device)
        start = 0 if cache is None else cache.length
        return self.parts.gpt_logits(idx, self, start, cache)


def _rope_route(attn: YourAttention, rope: _Rope) -> _RopeAttention | None:
    """The fast way RoPE enters your ``multi_head_attention``: where it is yours (read from
    your notebook) and calls the ``attention`` of its notebook, that name becomes a
    :class:`_RopeAttention` around it, kept if a causal attention on random inputs gives what
    the general way gives (projections rotated here); else None (the general way)."""
    mha = attn.parts.multi_head_attention
    ns = getattr(mha, "__globals__", None)
    if not (ns is not None and str(ns.get("__name__", "")).startswith("yours_")
            and callable(ns.get("attention"))):
        return None
    had = ns["attention"]
    route = had if isinstance(had, _RopeAttention) else _RopeAttention(had)
    ns["attention"] = route
    gen = torch.Generator().manual_seed(0)
    d = attn.q_proj.in_features
    x = torch.randn(2, 5, d, generator=gen).to(attn.q_proj.weight.device)
    where = (rope, torch.arange(5, device=x.device), torch.arange(5, device=x.device))
    mask = _causal(5, 5, x.device)
    try:
        with torch.no_grad():
            general = attn._rotated_inputs(x, x, mask, where)
            route.rotate, calls = where, route.calls
            fast = attn.forward(x, x, mask)
        same = route.calls > calls and torch.allclose(fast, general, rtol=1e-4, atol=1e-5)
    except Exception:  # noqa: BLE001 - your function raised on the way in: the general way
        same = False
    finally:
        route.rotate = None
    if not same:
        ns["attention"] = route.inner
        return None
    return route


# ---------------------------------------------------------------- training with your loop
class YourRun:
    """Train ``model`` with chapter 08's loop pieces ``loop`` on ``data`` (``TokenData``) under
    ``cfg`` (a ``TrainConfig``): per step your ``get_lr`` sets the rate, your ``get_batch``
    draws the batch and your ``train_step`` (your ``cross_entropy``, your clipping) steps your
    ``AdamW`` (decay on matrices only); every ``eval_interval`` steps your ``estimate_loss``
    on each split. ``fit_to_time`` fits the schedule to a budget like the reference trainer's.
    """

    def __init__(self, model, loop, data, cfg, device="cpu"):
        need(loop, LOOP_PIECES)
        self.model, self.loop, self.data, self.cfg = model, loop, data, cfg
        self.device = torch.device(device)
        self.model.to(self.device)
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.optimizer = loop.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2))
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.step, self.history, self.clock = 0, {"train": [], "eval": []}, time.perf_counter
        self.seconds = 0.0  # training time so far (evaluations included)

    def lr(self, step: int) -> float:
        c = self.cfg
        end = c.lr_decay_iters if c.lr_decay_iters is not None else c.max_iters
        return self.loop.get_lr(step, c.learning_rate, c.min_lr, c.warmup_iters, end)

    def one_step(self) -> float:
        c = self.cfg
        lr = self.lr(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.loop.get_batch(self.data.train, c.batch_size, c.block_size, generator=self.gen)
        loss = self.loop.train_step(self.model, self.optimizer, x.to(self.device),
                                    y.to(self.device), c.grad_clip)
        self.step += 1
        self.history["train"].append((self.step, float(loss)))
        return float(loss)

    def evaluate(self) -> dict:
        c = self.cfg
        gen = torch.Generator().manual_seed(c.seed + 1)  # the same batches every time
        out = {"step": self.step, "seconds": self.seconds}
        for split in ("train", "val"):
            out[split] = float(self.loop.estimate_loss(self.model, getattr(self.data, split),
                                                       c.batch_size, c.block_size, c.eval_iters,
                                                       gen))
        meta = getattr(self.data, "meta", None)
        if meta:
            out["val_bpb"] = out["val"] / math.log(2) * meta["val_tokens"] / meta["val_bytes"]
        return out

    def fit_to_time(self, seconds: float, probe_steps: int = 10, reserve: float = 0.1,
                    extra_seconds_per_eval: float = 0.0) -> dict:
        """Time ``probe_steps`` steps (after one untimed) and one evaluation here, then set
        the schedule so that warm-up and decay both fit in ``seconds`` (``plan_schedule``)."""
        from transformer_ref.train.trainer import plan_schedule

        c = self.cfg
        t0 = self.clock()
        n = min(probe_steps + 1, c.max_iters - self.step - 1)
        if n < 2:
            return {"cut": False}
        self.one_step()
        t1 = self.clock()
        for _ in range(n - 1):
            self.one_step()
        t2 = self.clock()
        self.evaluate()
        t3 = self.clock()
        self.seconds += t2 - t0
        step_s, eval_s = (t2 - t1) / (n - 1), t3 - t2
        left = (seconds - (t3 - t0)) * (1.0 - reserve)
        extra = max(0.0, extra_seconds_per_eval)
        plan = plan_schedule(c, step_s, max(left, step_s), eval_seconds=eval_s + extra,
                             done=self.step, fixed_eval_seconds=extra)
        for key in ("max_iters", "warmup_iters", "lr_decay_iters", "eval_interval", "eval_iters"):
            setattr(c, key, plan[key])
        what = ("the whole schedule fits" if not plan["cut"] else
                f"cut to {plan['max_iters']} steps (warm-up {plan['warmup_iters']}, evaluation "
                f"every {plan['eval_interval']} on {plan['eval_iters']} batches) so warm-up and "
                "decay both fit")
        print(f"measured {step_s:.3f} s per step, {eval_s:.1f} s per evaluation "
              f"({t3 - t0:.0f} s of the {seconds:.0f} s budget): {what}; the rest should take "
              f"about {plan['planned_seconds']:.0f} s", flush=True)
        return plan

    def train(self, num_steps: int | None = None, max_seconds: float | None = None) -> dict:
        """Train to ``max_iters`` (or ``num_steps`` more, or ``max_seconds``), evaluating every
        ``eval_interval`` steps and at the end; a progress line every ``progress_seconds``."""
        c = self.cfg
        end = c.max_iters if num_steps is None else min(c.max_iters, self.step + num_steps)
        self.model.train()
        t_start = t_said = self.clock()
        start, last_eval, t_tok, n_tok = self.step, None, 0.0, 0
        while self.step < end:
            t = self.clock()
            loss = self.one_step()
            now = self.clock()
            self.seconds += now - t
            t_tok, n_tok = t_tok + now - t, n_tok + c.batch_size * c.block_size
            out_of_time = max_seconds is not None and now - t_start > max_seconds
            at_end = self.step == end or out_of_time
            if c.progress_seconds > 0 and not at_end and now - t_said >= c.progress_seconds:
                t_said = now
                done = self.step - start
                print(f"  step {self.step}/{c.max_iters} (this part ends at {end}): loss "
                      f"{loss:.3f}, lr {self.lr(self.step - 1):.2e}, {now - t_start:.0f} s in, "
                      f"~{(now - t_start) / done * (end - self.step):.0f} s to go", flush=True)
            if self.step % c.eval_interval == 0 or at_end:
                t = self.clock()
                last_eval = self.evaluate()
                self.seconds += self.clock() - t
                last_eval["seconds"] = self.seconds
                self.history["eval"].append(last_eval)
                print(f"step {self.step}: train {last_eval['train']:.4f}, val "
                      f"{last_eval['val']:.4f}", flush=True)
            if out_of_time:
                break
        return {"steps": self.step - start, "step": self.step, "eval": last_eval,
                "tokens_per_s": n_tok / t_tok if t_tok else 0.0}


# ---------------------------------------------------------------- your tokenizer's token stream
class YourBPE:
    """A tokenizer of chapter 07's pieces ``tok`` (:func:`tokenizer_parts`): ``encode(text)``
    is your ``encode(text, ranks, {})``, ``decode(ids)`` your ``decode(ids, vocab)``."""

    def __init__(self, tok, vocab: dict, merges: list):
        self.tok, self.vocab, self.merges = tok, dict(vocab), list(merges)
        self.ranks = {b: i for i, b in self.vocab.items()}

    @property
    def vocab_size(self) -> int:
        return max(self.vocab) + 1

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, self.ranks, {}))

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], self.vocab)


def bpe_data(tok, train_text: str, val_text: str, vocab_size: int, folder, say=print):
    """Train chapter 07's tokenizer ``tok`` (your ``train_bpe_fast``, or the given one) to
    ``vocab_size`` tokens on ``train_text``, encode both splits with it into ``folder`` and
    return them as a ``TokenData``, with the bytes per split that bits per byte need."""
    from transformer_ref.train.data import TokenData, write_tokens

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    say(f"training the tokenizer on {len(train_text):,} characters ({vocab_size} tokens) ...")
    vocab, merges = tok.train_bpe_fast(train_text, vocab_size, [])
    bpe = YourBPE(tok, vocab, merges)
    meta: dict = {"kind": "bpe", "vocab_size": bpe.vocab_size}
    arrays = {}
    for split, text in (("train", train_text), ("val", val_text)):
        say(f"encoding the {split} split ({len(text):,} characters) ...")
        ids = bpe.encode(text)
        arrays[split] = write_tokens(folder / f"{split}.bin", ids, bpe.vocab_size)
        meta[f"{split}_tokens"], meta[f"{split}_bytes"] = len(ids), len(text.encode("utf-8"))
    say(f"your BPE: {len(vocab)} tokens, {meta['train_bytes'] / meta['train_tokens']:.2f} bytes "
        f"per token on the training text, ready in {time.perf_counter() - t0:.0f} s")
    return TokenData(arrays["train"], arrays["val"], bpe, meta)


@torch.no_grad()
def attention_weights(model: YourGPT, idx: torch.Tensor, layer: int) -> torch.Tensor:
    """The attention weights ``(H, T, T)`` of block ``layer`` of ``model`` on ``idx (1, T)``,
    computed by the attention the model runs (your chapter 01 function where it is used):
    ``attention(q, k, I)`` with the identity as the values returns the weights themselves."""
    model.eval()
    idx = idx.to(model.wte.weight.device)
    T = idx.shape[1]
    x = model.wte(idx) + model.wpe(torch.arange(T))
    rope = getattr(model, "rope", None)
    for blk in model.blocks[:layer]:
        x = blk(x, is_causal=True)
    blk = model.blocks[layer]
    h = blk.norm1(x)
    H = blk.attn.n_head

    def heads(lin):  # (1, T, d) -> (1, H, T, d_k), rotated where the model has RoPE
        y = lin(h).view(1, T, H, -1).transpose(1, 2)
        return y if rope is None else rope(y, torch.arange(T, device=y.device))

    fn = getattr(model.parts.multi_head_attention, "__globals__", {}).get("attention")
    fn = fn.inner if isinstance(fn, _RopeAttention) else fn
    if not callable(fn):
        from transformer_ref.attention import scaled_dot_product_attention as fn
    eye = torch.eye(T, device=h.device).expand(1, H, T, T)
    w = fn(heads(blk.attn.q_proj), heads(blk.attn.k_proj), eye, _causal(T, T, h.device))
    model.train()
    return w[0]


MAX_TICKS = 20  # tick labels per axis of an attention map, at most


def plot_attention(w: torch.Tensor, tokens: list[str], layer: int):
    """Small multiples: one panel per head of the weights ``w (H, T, T)`` of layer ``layer``
    (numbered from 1, as chapter 06's maps), one colour scale (0 to 1) with its colour bar,
    at most :data:`MAX_TICKS` token labels per axis. Returns the figure."""
    import matplotlib.pyplot as plt

    H, T = w.shape[0], w.shape[-1]
    every = max(1, math.ceil(T / MAX_TICKS))
    ticks = list(range(0, T, every))
    shown = ["␣" if t == " " else t for t in tokens]  # a space, visible
    fig, axes = plt.subplots(1, H, figsize=(3.4 * H + 1.0, 3.8), squeeze=False,
                             constrained_layout=True)
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(w[h].detach().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xticks(ticks, [shown[i] for i in ticks], fontsize=8)
        ax.set_yticks(ticks, [shown[i] for i in ticks], fontsize=8)
        ax.set_title(f"layer {layer}, head {h + 1}", fontsize=10)
        ax.set_xlabel("key (the character read)", fontsize=8)
        if h == 0:
            ax.set_ylabel("query (the current character)", fontsize=8)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="attention weight")
    return fig
