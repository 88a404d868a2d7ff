"""The course's diagrams, drawn as SVG text by this module: one function per diagram.

    python -m autograder.release      # writes them into solutions/NN_x/figures/ and notebooks/

Each chapter's markdown shows its diagrams as ``![caption](figures/<name>.svg)``;
:data:`FIGURES` says which chapter gets which file. The release command writes them
(:func:`write`) next to both notebooks of a chapter, and ``--check`` fails when a committed file
differs from what this module draws now, so edit a diagram here and rerun the release.

The SVG is plain text with integer coordinates and no time stamp, random id or float rounding,
so the same code gives the same bytes on every run and machine. Labels use the course's
notation (row vectors, ``X ∈ ℝ^{n×d}``, the softmax over the keys); in a label, ``_{...}`` and
``^{...}`` are drawn as a subscript and a superscript.

>>> svg = attention()
>>> svg.startswith("<svg") and svg == attention()
True
>>> sorted(FIGURES["05_feed_forward_blocks"])
['pre_post_ln.svg']
"""

from __future__ import annotations

import html
import re
from pathlib import Path

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
INK, MUTED, LINE = "#222222", "#666666", "#555555"
BOX, STREAM, HIGHLIGHT = "#eef2f8", "#2f6db3", "#d9480f"
HEADS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759")  # one colour per head
_MARKUP = re.compile(r"([_^])\{([^{}]*)\}")


def _label(s: str) -> str:
    """``s`` as SVG text content: escaped, ``_{..}`` / ``^{..}`` as shifted smaller tspans.

    Each shift is relative to the previous character (``dy``), so a part that follows a
    shifted one moves back by that much; an empty part is never emitted.

    >>> _label("d_{k} < Q^{T}")
    'd<tspan dy="4" font-size="75%">k</tspan><tspan dy="-4"> &lt; Q</tspan><tspan dy="-6" \
font-size="75%">T</tspan>'
    """
    parts, pos = [], 0
    for m in _MARKUP.finditer(s):
        parts += [(s[pos : m.start()], 0), (m[2], 4 if m[1] == "_" else -6)]
        pos = m.end()
    parts.append((s[pos:], 0))
    out, level = [], 0
    for text, shift in parts:
        if not text:
            continue
        body = html.escape(text, quote=False)
        size = ' font-size="75%"' if shift else ""
        if shift == level and not shift:
            out.append(body)
        else:
            out.append(f'<tspan dy="{shift - level}"{size}>{body}</tspan>')
        level = shift
    return "".join(out)


class Canvas:
    """An SVG drawing built from boxes, arrows and labels (integer coordinates, in pixels)."""

    def __init__(self, width: int, height: int, title: str):
        self.width, self.height, self.title = width, height, title
        self.parts: list[str] = []

    def text(self, x, y, s, size=14, anchor="middle", fill=INK, weight="normal", italic=False):
        """A label whose baseline starts (``anchor="start"``) or is centred at ``(x, y)``."""
        style = ' font-style="italic"' if italic else ""
        bold = ' font-weight="bold"' if weight == "bold" else ""
        self.parts.append(
            f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"'
            f"{bold}{style}>{_label(s)}</text>"
        )

    def rect(self, x, y, w, h, fill=BOX, stroke=LINE, width=1, rx=4, dash=False):
        """A rectangle; ``dash`` draws its border dashed (an optional step)."""
        d = ' stroke-dasharray="5 3"' if dash else ""
        self.parts.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="{rx}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"{d}/>'
        )

    def box(self, x, y, w, h, lines, fill=BOX, stroke=LINE, width=1, dash=False, size=14):
        """A rectangle with centred lines of text, the first one in bold."""
        self.rect(x, y, w, h, fill, stroke, width, dash=dash)
        step = size + 4
        top = y + h // 2 - (len(lines) - 1) * step // 2 + size // 3
        for i, s in enumerate(lines):
            self.text(x + w // 2, top + i * step, s, size if i == 0 else size - 2,
                      weight="bold" if i == 0 else "normal", fill=INK if i == 0 else MUTED)

    def line(self, points, color=LINE, width=1.5, arrow=True):
        """A polyline through ``points``, with an arrow head at its end unless ``arrow=False``."""
        pts = " ".join(f"{x},{y}" for x, y in points)
        head = f' marker-end="url(#head-{color[1:]})"' if arrow else ""
        self.parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{width}"{head}/>'
        )

    def circle(self, x, y, r=11, fill="white", stroke=LINE, label="+"):
        """A small circle with a sign in it: the residual sum ``+``."""
        self.parts.append(
            f'<circle cx="{x}" cy="{y}" r="{r}" fill="{fill}" stroke="{stroke}" '
            'stroke-width="1.5"/>'
        )
        self.text(x, y + 5, label, 16, weight="bold")

    def svg(self) -> str:
        """The document: arrow heads for every line colour used, then the parts in order."""
        colors = sorted(set(re.findall(r"url\(#head-([0-9a-f]{6})\)", "".join(self.parts))))
        markers = "".join(
            f'<marker id="head-{c}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
            f'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="#{c}"/></marker>'
            for c in colors
        )
        title = html.escape(self.title, quote=True)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}"'
            f' viewBox="0 0 {self.width} {self.height}" role="img" aria-label="{title}"'
            f' font-family="{FONT}">\n<title>{title}</title>\n<defs>{markers}</defs>\n'
            f'<rect width="{self.width}" height="{self.height}" fill="white"/>\n'
            + "\n".join(self.parts)
            + "\n</svg>\n"
        )


def _grid(c: Canvas, x, y, keep, cell=14, fill=HIGHLIGHT):
    """A small matrix, row = query and column = key; ``keep[i][j]`` False is drawn as −∞."""
    for i, row in enumerate(keep):
        for j, k in enumerate(row):
            c.rect(x + j * cell, y + i * cell, cell, cell, fill if k else "#c8c8c8",
                   stroke="white", rx=0)


def attention(highlight_mask: bool = False) -> str:
    """Scaled dot-product attention, left to right: ``Q, K -> S = QKᵀ -> S/√d_k -> + M ->
    softmax over the keys -> A V``, with each step's shape (chapter 01, section 5).

    ``highlight_mask`` draws the mask step in colour with a causal ``M`` (chapter 02); without
    it the mask is the optional dashed step."""
    c = Canvas(1060, 300, "Scaled dot-product attention: softmax(QKᵀ/√d_k + M) V")
    c.text(530, 24, "Attention(Q, K, V) = softmax(QK^{T} / √d_{k} + M) V", 17, weight="bold")
    c.box(20, 50, 120, 50, ["Q", "T_{q} × d_{k}"])
    c.box(20, 120, 120, 50, ["K", "T_{k} × d_{k}"])
    c.box(20, 215, 120, 50, ["V", "T_{k} × d_{v}"])
    steps = [
        (["S = QK^{T}", "T_{q} × T_{k}", "row i: query i · all keys"], {}),
        (["S / √d_{k}", "T_{q} × T_{k}", "Var(q·k) = d_{k} becomes 1"], {}),
        (["S + M", "mask M: 0 keep, −∞ drop", "causal" if highlight_mask else "(optional)"],
         {"dash": not highlight_mask}),
        (["A = softmax(S)", "over the keys:", "each row sums to 1"], {}),
        (["Y = A V", "T_{q} × d_{v}", "weighted sum of values"], {}),
    ]
    for k, (lines, opts) in enumerate(steps):
        x = 180 + k * 175
        if k == 2 and highlight_mask:
            opts = {"fill": "#fde8dc", "stroke": HIGHLIGHT, "width": 2.5}
        c.box(x, 60, 155, 80, lines, **opts)
        if k:
            c.line([(x - 20, 100), (x - 2, 100)])
    c.line([(140, 75), (160, 75), (160, 90), (178, 90)])
    c.line([(140, 145), (160, 145), (160, 110), (178, 110)])
    out_x = 180 + 4 * 175 + 77
    c.line([(140, 240), (out_x, 240), (out_x, 142)])
    keep = [[j <= i for j in range(4)] for i in range(4)]
    _grid(c, 545, 152, keep, cell=16, fill=HIGHLIGHT if highlight_mask else "#8fb3dd")
    c.text(620, 166, "causal M, T = 4: query t", 12, anchor="start", fill=MUTED)
    c.text(620, 182, "(row) sees keys ≤ t (columns);", 12, anchor="start", fill=MUTED)
    c.text(620, 198, "grey: −∞, weight 0", 12, anchor="start", fill=MUTED)
    c.text(530, 290, "Rows are tokens (X ∈ ℝ^{n×d}, Q = XW_{Q}); S to A have one row per query "
           "and one column per key, Y one row per query.", 13, fill=MUTED)
    return c.svg()


def masked_attention() -> str:
    """:func:`attention` with the mask step highlighted and a causal ``M`` (chapter 02)."""
    return attention(highlight_mask=True)


def _matrix(c: Canvas, x, y, colors, band=28, height=100, rows=5):
    """A ``T × (len(colors)·band)`` matrix drawn as coloured column bands with row lines."""
    for h, col in enumerate(colors):
        c.rect(x + h * band, y, band, height, fill=col, stroke="white", rx=0)
    for r in range(1, rows):
        yy = y + r * height // rows
        c.line([(x, yy), (x + band * len(colors), yy)], color="#ffffff", width=1, arrow=False)
    c.rect(x, y, band * len(colors), height, fill="none", stroke=LINE, rx=0)


def split_merge_heads() -> str:
    """Split and merge heads with H = 4: ``(B, T, d_model) -> (B, H, T, d_k)`` and back, then
    ``W_O`` (chapter 03, section 2). Head h owns columns ``h·d_k .. (h+1)·d_k − 1``."""
    c = Canvas(1140, 330, "Splitting d_model into H heads of d_k features, and merging them back")
    c.text(570, 24, "H = 4 heads, d_{k} = d_{model} / H: each head owns d_{k} adjacent columns",
           16, weight="bold")
    top, step = 90, 240
    # 1. Q = X W_Q, all heads side by side
    _matrix(c, 40, top, HEADS)
    c.text(96, top - 12, "Q = XW_{Q}", 14, weight="bold")
    c.text(96, top + 125, "(B, T, d_{model})", 13, fill=MUTED)
    c.text(96, top + 143, "rows: T positions", 12, fill=MUTED)
    # 2., 3. one (T, d_k) matrix per head: the head axis before the time axis
    for stage, label in ((1, "Q_{h}, h = 1..H"), (2, "head_{h} = A_{h}V_{h}")):
        x0 = 40 + stage * step
        for h in reversed(range(4)):
            _matrix(c, x0 + h * 22, top + 36 - h * 12, (HEADS[h],), band=28, height=100)
        c.text(x0 + 47, top - 12, label, 14, weight="bold")
        c.text(x0 + 47, top + 160, "(B, H, T, d_{k})", 13, fill=MUTED)
    # 4. the heads side by side again
    _matrix(c, 40 + 3 * step, top, HEADS)
    c.text(96 + 3 * step, top - 12, "Concat(head_{1}, …, head_{H})", 14, weight="bold")
    c.text(96 + 3 * step, top + 125, "(B, T, H·d_{k})", 13, fill=MUTED)
    # 5. W_O mixes all heads into every output feature
    _matrix(c, 40 + 4 * step, top, ("#7b6fa8",) * 4)
    c.text(96 + 4 * step, top - 12, "Concat · W_{O}", 14, weight="bold")
    c.text(96 + 4 * step, top + 125, "(B, T, d_{model})", 13, fill=MUTED)
    c.text(96 + 4 * step, top + 143, "each feature mixes", 12, fill=MUTED)
    c.text(96 + 4 * step, top + 159, "all heads", 12, fill=MUTED)
    ops = [
        ("split_heads", ".view(B, T, H, d_{k})", ".transpose(1, 2)"),
        ("attention", "softmax(Q_{h}K_{h}^{T}/√d_{k})V_{h}", "all heads in one call"),
        ("merge_heads", ".transpose(1, 2)", ".reshape(B, T, H·d_{k})"),
        ("· W_{O}", "output projection", "W_{O}: H·d_{k} × d_{model}"),
    ]
    for k, (name, a, b) in enumerate(ops):
        x0, x1 = 40 + k * step + (106 if k in (1, 2) else 124), 40 + (k + 1) * step - 12
        mid = (x0 + x1) // 2
        c.line([(x0, top + 50), (x1, top + 50)])
        c.text(mid, top + 80, name, 13, weight="bold")
        c.text(mid, top + 96, a, 11, fill=MUTED)
        c.text(mid, top + 111, b, 11, fill=MUTED)
    c.text(570, 300, "A reshape(B, H, T, d_k) instead of view + transpose would give a head the "
           "features of several positions.", 13, fill=MUTED)
    return c.svg()


def _block(c: Canvas, cx, x_in, steps, stream_x):
    """One block top to bottom at centre ``cx``: ``steps`` are ("box", label), ("add", _),
    ("branch", _); a branch leaves the stream for the next add, drawn on the left (blue)."""
    y, branch = x_in, None
    for kind, label in steps:
        if kind == "box":
            c.line([(cx, y), (cx, y + 18)])
            c.box(cx - 70, y + 20, 140, 36, [label], fill="#fff4d6" if "LN" in label else BOX)
            y += 56
        elif kind == "branch":
            c.parts.append(f'<circle cx="{cx}" cy="{y + 10}" r="3" fill="{STREAM}"/>')
            c.line([(cx, y), (cx, y + 10)], arrow=False)
            branch = y + 10
            y += 10
        else:  # add: the skip path from the branch point joins here
            c.line([(cx, y), (cx, y + 18)])
            c.circle(cx, y + 30)
            c.line([(cx, branch), (stream_x, branch), (stream_x, y + 30), (cx - 13, y + 30)],
                   color=STREAM, width=2.5)
            y += 41
    c.line([(cx, y), (cx, y + 26)])
    return y + 26


def pre_post_ln() -> str:
    """Post-LN and pre-LN blocks side by side, top to bottom, with the residual (skip) paths
    in blue (chapters 04 and 05): where the LayerNorm sits is the only difference."""
    c = Canvas(840, 560, "Post-LN and pre-LN Transformer blocks")
    sides = (
        (210, "post-LN (the tutorial [S2], the 2017 paper)", "x ← LN_{1}(x + MHA(x))",
         "x ← LN_{2}(x + FFN(x))",
         [("branch", ""), ("box", "MHA"), ("add", ""), ("box", "LN_{1}"), ("branch", ""),
          ("box", "FFN"), ("add", ""), ("box", "LN_{2}")]),
        (630, "pre-LN (the lecture notes [S1], GPT-2)", "x ← x + MHA(LN_{1}(x))",
         "x ← x + FFN(LN_{2}(x))",
         [("branch", ""), ("box", "LN_{1}"), ("box", "MHA"), ("add", ""), ("branch", ""),
          ("box", "LN_{2}"), ("box", "FFN"), ("add", "")]),
    )
    for cx, title, f1, f2, steps in sides:
        c.text(cx, 28, title, 16, weight="bold")
        c.text(cx, 52, f1, 14)
        c.text(cx, 72, f2, 14)
        c.text(cx, 104, "x  (T × d_{model})", 13, fill=MUTED)
        end = _block(c, cx, 112, steps, cx - 110)
        c.text(cx, end + 18, "block output (T × d_{model})", 13, fill=MUTED)
    c.text(210, 530, "every sum is normalised: the stream passes through LN", 13, fill=MUTED)
    c.text(630, 530, "the stream x is never normalised inside the block;", 13, fill=MUTED)
    c.text(630, 548, "GPT-2 adds one final LN_{f} after the last block", 13, fill=MUTED)
    c.line([(400, 40), (400, 540)], color="#cccccc", width=1, arrow=False)
    return c.svg()


def gpt_forward() -> str:
    """The decoder-only GPT forward pass, top to bottom: token ids -> embedding + positions ->
    L causal pre-LN blocks -> final norm -> LM head -> logits (chapter 06, section 4)."""
    c = Canvas(760, 590, "The decoder-only GPT forward pass")
    cx = 330
    c.box(cx - 110, 20, 220, 44, ["idx", "token ids, (B, T)"])
    c.line([(cx, 64), (cx, 80), (cx - 120, 80), (cx - 120, 98)])
    c.line([(cx, 80), (cx + 120, 80), (cx + 120, 98)])
    c.box(cx - 220, 100, 200, 56, ["E_{[idx]}  (model.wte)", "token embeddings (B, T, d)"])
    c.box(cx + 20, 100, 200, 56, ["P_{[start:start+T]}  (model.wpe)",
                                  "learned positions (T, d)"])
    c.line([(cx - 120, 156), (cx - 120, 180), (cx - 14, 180)])
    c.line([(cx + 120, 156), (cx + 120, 180), (cx + 14, 180)])
    c.circle(cx, 180)
    c.line([(cx, 191), (cx, 218)])
    c.text(cx + 12, 210, "X ∈ ℝ^{T×d} per sequence, (B, T, d_{model})", 13, anchor="start",
           fill=MUTED)
    c.rect(cx - 200, 220, 400, 130, fill="#f6f6f6", stroke=LINE, dash=True)
    c.text(cx, 244, "Block_{ℓ},  ℓ = 1..L  (model.blocks)", 15, weight="bold")
    c.text(cx, 270, "x ← x + MHA(LN_{1}(x)), causal mask", 14)
    c.text(cx, 292, "x ← x + FFN(LN_{2}(x))", 14)
    c.text(cx, 318, "pre-LN (chapter 5), called with is_causal=True", 12, fill=MUTED)
    c.text(cx, 336, "token t sees tokens ≤ t", 12, fill=MUTED)
    c.text(cx + 215, 290, "× L", 20, anchor="start", weight="bold")
    c.line([(cx, 350), (cx, 378)])
    c.text(cx + 12, 370, "(B, T, d_{model})", 13, anchor="start", fill=MUTED)
    c.box(cx - 110, 380, 220, 44, ["LN_{f}  (model.ln_f)", "final norm"], fill="#fff4d6")
    c.line([(cx, 424), (cx, 452)])
    c.box(cx - 110, 454, 220, 44, ["· W_{head}^{T}  (model.lm_head)", "GPT-2 ties W_{head} = E"])
    c.line([(cx, 498), (cx, 526)])
    c.box(cx - 110, 528, 220, 44, ["logits", "(B, T, vocab_size)"])
    c.text(cx + 125, 546, "row t: scores of token t+1,", 13, anchor="start", fill=MUTED)
    c.text(cx + 125, 564, "from tokens ≤ t", 13, anchor="start", fill=MUTED)
    return c.svg()


# chapter 07's example corpus (the survey [S4]'s), from which :func:`bpe_merges` learns
BPE_TEXT = ("low low low low low lower lower newest newest newest newest newest newest "
            "widest widest widest")


def bpe_merges(word: str = "lowest", text: str = BPE_TEXT, num_merges: int = 10) -> str:
    """A word's symbols merging step by step: the merge list learned from ``text`` (left, in
    the order learned) replayed on ``word`` (right), one row per merge that changes it
    (chapter 07, section 2)."""
    from transformer_ref.bpe.classic import ClassicBPE

    bpe = ClassicBPE().train(text, num_merges)
    eow = bpe.end_of_word
    rows, symbols = [(None, (*word, eow))], (*word, eow)
    for r, pair in enumerate(bpe.merges):
        merged = ClassicBPE._merge(symbols, pair)  # the chapter's own replay step
        if merged != symbols:
            rows.append((r, merged))
            symbols = merged
    height = max(90 + 26 * len(bpe.merges), 100 + 52 * len(rows))
    c = Canvas(900, height, f"BPE merges replayed on the word {word!r}")
    c.text(20, 28, "merges, in the order learned", 15, anchor="start", weight="bold")
    c.text(20, 48, "from chapter 7's example text", 12, anchor="start", fill=MUTED)
    applied = {r for r, _ in rows}
    for r, (a, b) in enumerate(bpe.merges):
        used = r in applied
        c.text(24, 78 + 26 * r, f"{r}:  {a} + {b}  →  {a + b}", 14, anchor="start",
               fill=HIGHLIGHT if used else "#999999", weight="bold" if used else "normal")
    c.text(330, 28, f"encoding “{word}”: replay every merge, in order", 15, anchor="start",
           weight="bold")
    c.text(330, 48, "grey merges do not occur in this word; each row shows one that does",
           12, anchor="start", fill=MUTED)
    for k, (r, syms) in enumerate(rows):
        y = 70 + 52 * k
        c.text(320, y + 24, "start" if r is None else f"after {r}", 13, anchor="end",
               fill=MUTED)
        x = 335
        new = None if r is None else "".join(bpe.merges[r])
        for s in syms:
            w = 16 + 9 * len(s)
            hit = s == new
            c.rect(x, y + 4, w, 30, fill="#fde8dc" if hit else BOX,
                   stroke=HIGHLIGHT if hit else LINE, width=2 if hit else 1)
            c.text(x + w // 2, y + 24, s, 14, weight="bold" if hit else "normal")
            x += w + 6
    c.text(335, 70 + 52 * len(rows) + 14, f"result: {list(symbols)}", 14, anchor="start",
           weight="bold")
    return c.svg()


# chapter folder -> {file name: function}; a name is the same drawing in every chapter it is in
FIGURES = {
    "01_attention": {"attention.svg": attention},
    "02_masking": {"masked_attention.svg": masked_attention},
    "03_multihead_attention": {"split_merge_heads.svg": split_merge_heads},
    "04_layer_norm": {"pre_post_ln.svg": pre_post_ln},
    "05_feed_forward_blocks": {"pre_post_ln.svg": pre_post_ln},
    "06_transformer": {"gpt_forward.svg": gpt_forward},
    "07_bpe": {"bpe_merges.svg": bpe_merges},
}


def figures(chapter: str) -> dict[str, str]:
    """``{file name: SVG text}`` of a chapter's diagrams (empty for a chapter without).

    >>> list(figures("03_multihead_attention"))
    ['split_merge_heads.svg']
    """
    return {name: draw() for name, draw in FIGURES.get(chapter, {}).items()}


def write(chapter: str, folder: Path) -> list[Path]:
    """Write ``chapter``'s diagrams into ``folder`` (created; emptied of other files first)."""
    drawn = figures(chapter)
    folder = Path(folder)
    if folder.exists():
        for old in folder.iterdir():
            if old.is_file() and old.name not in drawn:
                old.unlink()
    if not drawn:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in drawn.items():
        (folder / name).write_text(text, encoding="utf-8", newline="\n")
        out.append(folder / name)
    return out
