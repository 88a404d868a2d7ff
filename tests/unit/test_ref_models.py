"""transformer_ref.models: GPT (KV cache, tying, scratch vs sdpa, generate) and the
encoder-decoder Transformer (parity with torch.nn.Transformer, KV cache)."""

import pytest
import torch
import torch.nn as nn

from transformer_ref.models import GPT, GPTConfig, Transformer, TransformerConfig

V = 23


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


def small_gpt(seed=0, **kw) -> GPT:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=V, block_size=12, n_layer=2, n_head=2, d_model=16)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg)).eval()


GPT_VARIANTS = [
    dict(pos="learned"),
    dict(pos="sinusoidal", norm="rms", ffn="swiglu"),
    dict(pos="rope", ffn="relu", bias=False, tie_weights=False),
    dict(pos="rope", attn_impl="sdpa"),
    dict(pos="learned", attn_impl="sdpa", norm="rms"),
]


@pytest.mark.parametrize("kw", GPT_VARIANTS)
def test_gpt_kv_cache_matches_full_forward(kw):
    model = small_gpt(**kw).double()
    idx = torch.randint(0, V, (2, 12))
    full = model(idx)  # (B, T, V)
    assert full.shape == (2, 12, V)
    cache = model.init_cache(2)
    chunks = [idx[:, :5], idx[:, 5:6], idx[:, 6:7], idx[:, 7:10], idx[:, 10:11], idx[:, 11:]]
    inc = torch.cat([model(c, cache=cache) for c in chunks], dim=1)
    assert cache.length == 12
    assert maxerr(inc, full) <= 1e-10
    with pytest.raises(ValueError):  # positions would run past block_size
        model(idx[:, :1], cache=cache)


@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rope"])
def test_gpt_is_causal(pos):
    model = small_gpt(pos=pos).double()
    idx = torch.randint(0, V, (1, 10))
    changed = idx.clone()
    changed[0, 6:] = (idx[0, 6:] + 1) % V
    a, b = model(idx), model(changed)
    assert maxerr(a[:, :6], b[:, :6]) <= 1e-12 and maxerr(a[:, 6:], b[:, 6:]) > 1e-6


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("pos", ["learned", "rope"])
def test_gpt_scratch_and_sdpa_agree(pos, dtype):
    a = small_gpt(pos=pos, attn_impl="scratch").to(dtype)
    b = small_gpt(pos=pos, attn_impl="sdpa").to(dtype)
    b.load_state_dict(a.state_dict())
    idx = torch.randint(0, V, (3, 11))
    assert maxerr(a(idx), b(idx)) <= {torch.float64: 1e-10, torch.float32: 1e-5}[dtype]


def test_tied_weights_are_one_parameter():
    tied, untied = small_gpt(tie_weights=True), small_gpt(tie_weights=False)
    assert tied.lm_head.weight is tied.wte.weight
    assert untied.lm_head.weight is not untied.wte.weight
    idx = torch.randint(0, V, (2, 5))
    tied(idx).sum().backward()  # gradient of both uses lands in one tensor
    assert tied.wte.weight.grad is not None and tied.lm_head.weight.grad is tied.wte.weight.grad
    with torch.no_grad():
        tied.wte.weight[3].add_(1.0)
    assert torch.equal(tied.lm_head.weight[3], tied.wte.weight[3])
    n_unique = sum(p.numel() for p in tied.parameters())  # parameters() deduplicates
    assert tied.num_params(non_embedding=False) == n_unique
    assert untied.num_params(non_embedding=False) == n_unique + V * 16


def test_num_params_and_flops():
    m = small_gpt()  # learned positions, tied
    total = sum(p.numel() for p in m.parameters())
    assert m.num_params(non_embedding=False) == total
    assert m.num_params() == total - 12 * 16  # minus the position table only
    u = small_gpt(tie_weights=False, pos="rope")
    assert u.num_params() == sum(p.numel() for p in u.parameters()) - V * 16  # minus wte
    c = m.config
    assert m.flops_per_token() == 6 * m.num_params() + 12 * c.n_layer * c.d_model * c.block_size


def test_gpt2_init():
    m = small_gpt(n_layer=8, d_model=64, n_head=4, block_size=16)
    assert abs(m.wte.weight.std().item() - 0.02) < 0.002
    assert abs(m.blocks[0].ffn.w1.weight.std().item() - 0.02) < 0.002
    resid = 0.02 / (2 * 8) ** 0.5
    assert abs(m.blocks[3].ffn.w2.weight.std().item() - resid) < 0.1 * resid
    assert abs(m.blocks[3].attn.out_proj.weight.std().item() - resid) < 0.1 * resid
    assert torch.all(m.blocks[0].attn.q_proj.bias == 0)


@pytest.mark.parametrize("pos", ["learned", "rope"])
def test_generate_with_cache_equals_without(pos):
    model = small_gpt(pos=pos, block_size=8).double()
    idx = torch.randint(0, V, (2, 3))
    a = model.generate(idx, 14, temperature=0)  # runs past block_size: cache is rebuilt
    b = model.generate(idx, 14, temperature=0, use_cache=False)
    assert a.shape == (2, 17) and torch.equal(a[:, :3], idx)
    assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    s1 = model.generate(idx, 10, temperature=0.8, top_k=5, generator=g1)
    s2 = model.generate(idx, 10, temperature=0.8, top_k=5, generator=g2, use_cache=False)
    assert torch.equal(s1, s2)
    assert torch.equal(model.generate(idx, 6, top_k=1), model.generate(idx, 6, temperature=0))
    g = torch.Generator().manual_seed(0)
    assert torch.equal(model.generate(idx, 6, top_p=1e-9, generator=g), a[:, :9])


# --- encoder-decoder ---------------------------------------------------------------------------
def small_transformer(seed=0, **kw) -> Transformer:
    torch.manual_seed(seed)
    cfg = dict(src_vocab_size=19, tgt_vocab_size=V, max_len=16, n_encoder_layers=2,
               n_decoder_layers=2, n_head=2, d_model=8, d_ff=16, dropout=0.0)
    cfg.update(kw)
    return Transformer(TransformerConfig(**cfg)).eval()


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_stacks_match_torch(norm_first):
    torch.manual_seed(0)
    ref = nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                         norm_first=norm_first).double().train()  # train: no fused fast path
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    ours = small_transformer(norm_first=norm_first, final_norm=True, ffn="gelu").double()
    ours.load_from_torch(ref)
    src, tgt = torch.randn(2, 6, 8, dtype=torch.float64), torch.randn(2, 4, 8, dtype=torch.float64)
    pad = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])  # torch: True = padding
    causal = nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    out_ref = ref(src, tgt, tgt_mask=causal, tgt_is_causal=True, src_key_padding_mask=pad,
                  memory_key_padding_mask=pad)
    keep = ~pad[:, None, None, :]
    memory = ours.encoder(src, mask=keep)
    out = ours.decoder(tgt, memory, memory_mask=keep)
    assert maxerr(memory, ref.encoder(src, src_key_padding_mask=pad)) <= 1e-10
    assert maxerr(out, out_ref) <= 1e-10


@pytest.mark.parametrize("kw", [dict(), dict(pos="rope", norm_first=True, norm="rms"),
                                dict(pos="learned", share_embeddings=True, src_vocab_size=V)])
def test_transformer_kv_cache_and_padding(kw):
    model = small_transformer(pad_id=0, **kw).double()
    src = torch.randint(1, 19 if "src_vocab_size" not in kw else V, (2, 7))
    src[1, 4:] = 0  # padding
    tgt = torch.randint(1, V, (2, 6))
    full = model(src, tgt)
    assert full.shape == (2, 6, V)
    src_mask = src[:, None, None, :] != 0
    memory = model.encode(src)
    cache = model.init_cache(2)
    inc = torch.cat([model.decode(tgt[:, t : t + 1], memory, memory_mask=src_mask, cache=cache)
                     for t in range(6)], dim=1)
    assert maxerr(inc, full) <= 1e-10
    # tokens under the padding mask do not matter (explicit masks, so pad_id is not needed)
    other = src.clone()
    other[1, 4:] = 5
    a = model.decode(tgt, model.encode(src, src_mask), memory_mask=src_mask)
    b = model.decode(tgt, model.encode(other, src_mask), memory_mask=src_mask)
    assert maxerr(a, b) <= 1e-12
    assert maxerr(a, full) <= 1e-12  # forward derived the same masks from pad_id
    out = model.greedy_decode(src, bos_id=1, max_new_tokens=5)
    assert out.shape == (2, 6) and torch.all(out[:, 0] == 1)


def test_transformer_weight_sharing():
    m = small_transformer(share_embeddings=True, src_vocab_size=V)
    assert m.src_embed.weight is m.tgt_embed.weight is m.lm_head.weight
    with pytest.raises(ValueError):
        small_transformer(share_embeddings=True)  # vocabularies differ
