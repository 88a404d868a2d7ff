"""Reference BPE tokenizers.

* :class:`ClassicBPE` — Sennrich et al. (2016) word-level BPE with an end-of-word symbol (the
survey [S4]).
* :func:`train_bpe_naive` — byte-level BPE, recounting every pair after each merge.
* :func:`train_bpe` — the same merges, computed incrementally (pair counts + pair -> words index
  + a lazy max-heap).
* :class:`BPETokenizer` — GPT-2 style byte-level tokenizer: encode / decode / encode_iterable /
  save / load; token-for-token identical to a ``tiktoken.Encoding`` built from its ranks.

Vocabulary layout and the tie-breaking rule are documented in :mod:`transformer_ref.bpe.common`.
"""

from transformer_ref.bpe.bytelevel import BPETokenizer, bytes_to_unicode
from transformer_ref.bpe.classic import ClassicBPE
from transformer_ref.bpe.common import GPT2_PATTERN, pretokenize
from transformer_ref.bpe.naive import train_bpe_naive
from transformer_ref.bpe.train import train_bpe

__all__ = [
    "GPT2_PATTERN",
    "pretokenize",
    "train_bpe",
    "train_bpe_naive",
    "BPETokenizer",
    "bytes_to_unicode",
    "ClassicBPE",
]
