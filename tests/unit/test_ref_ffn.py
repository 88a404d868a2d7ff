"""transformer_ref.ffn: FFN == Conv1d(kernel_size=1), nn.Sequential parity, SwiGLU via F.glu."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_ref.ffn import FeedForward


def maxerr(a, b) -> float:
    return (a - b).abs().max().item()


def conv_from_linear(lin: nn.Linear) -> nn.Conv1d:
    conv = nn.Conv1d(lin.in_features, lin.out_features, kernel_size=1, bias=lin.bias is not None)
    conv = conv.to(lin.weight.dtype)
    with torch.no_grad():
        conv.weight.copy_(lin.weight[:, :, None])  # (out, in) -> (out, in, 1)
        if lin.bias is not None:
            conv.bias.copy_(lin.bias)
    return conv


def test_default_d_ff_is_4_d_model():
    for act in ("relu", "gelu", "swiglu"):
        ffn = FeedForward(12, activation=act)
        assert ffn.w1.out_features == 48 and ffn.w2.in_features == 48
    assert FeedForward(12, d_ff=7).w1.out_features == 7
    with pytest.raises(ValueError):
        FeedForward(4, activation="tanh")


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
@pytest.mark.parametrize("bias", [True, False])
def test_ffn_equals_conv1d_kernel_1(activation, bias):
    torch.manual_seed(0)
    ffn = FeedForward(6, 10, activation=activation, bias=bias).double()
    x = torch.randn(3, 7, 6, dtype=torch.float64)  # (B, T, d_model)
    c1, c2 = conv_from_linear(ffn.w1), conv_from_linear(ffn.w2)
    xc = x.transpose(1, 2)  # Conv1d wants (B, channels = d_model, T)
    if activation == "swiglu":
        h = F.silu(c1(xc)) * conv_from_linear(ffn.w3)(xc)
    else:
        h = {"relu": F.relu, "gelu": F.gelu}[activation](c1(xc))
    y_conv = c2(h).transpose(1, 2)
    assert maxerr(ffn(x), y_conv) <= 1e-10
    assert all(p.bias is None for p in (ffn.w1, ffn.w2)) != bias


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_ffn_matches_nn_sequential(activation, dtype):
    torch.manual_seed(1)
    ffn = FeedForward(8, activation=activation).to(dtype)
    act = nn.ReLU() if activation == "relu" else nn.GELU()
    ref = nn.Sequential(nn.Linear(8, 32), act, nn.Linear(32, 8)).to(dtype)
    ref.load_state_dict({"0.weight": ffn.w1.weight, "0.bias": ffn.w1.bias,
                         "2.weight": ffn.w2.weight, "2.bias": ffn.w2.bias})
    x = torch.randn(2, 5, 8, dtype=dtype)
    assert maxerr(ffn(x), ref(x)) <= {torch.float64: 1e-10, torch.float32: 1e-5}[dtype]


def test_swiglu_matches_glu_form():
    # Shazeer (2020): SwiGLU(x) = (Swish(x W) * x V) W_2;  F.glu([a, b]) = a * sigmoid(b)
    torch.manual_seed(2)
    ffn = FeedForward(6, 9, activation="swiglu").double()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    a, v = ffn.w1(x), ffn.w3(x)
    ref = ffn.w2(F.glu(torch.cat((a * v, a), dim=-1), dim=-1))
    assert maxerr(ffn(x), ref) <= 1e-10


def test_ffn_is_position_wise():
    torch.manual_seed(3)
    ffn = FeedForward(4, activation="gelu").double()
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    perm = torch.randperm(6)
    assert maxerr(ffn(x[:, perm]), ffn(x)[:, perm]) <= 1e-12
