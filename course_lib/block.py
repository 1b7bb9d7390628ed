"""One pre-norm transformer block, built from a ModelShape:

    x = x + attention(norm_1(x))      # heads write into the residual stream
    x = x + feed_forward(norm_2(x))   # so does the feed-forward layer

(GPT-2 and Llama both put the norm before each part: Radford et al. 2019; Xiong et al. 2020,
arxiv.org/abs/2002.04745.)  Its parameters add up to ``course_lib.block_params(shape)["total"]``.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .attention import MultiHeadAttention
from .shapes import ModelShape

NORM_EPS = 1e-5
"""Epsilon of both norms (GPT-2's ``layer_norm_epsilon`` and Llama 2's ``rms_norm_eps``)."""


def make_norm(kind: str, d_model: int) -> nn.Module:
    """``layernorm``: weight and bias, 2·d_model parameters; ``rmsnorm``: weight only, d_model."""
    if kind == "layernorm":
        return nn.LayerNorm(d_model, eps=NORM_EPS)
    if kind == "rmsnorm":
        return nn.RMSNorm(d_model, eps=NORM_EPS)
    raise ValueError(f"norm={kind!r} is not one of layernorm, rmsnorm")


class FeedForward(nn.Module):
    """The feed-forward layer (MLP), applied to each position on its own.

    ``gelu`` (GPT-2): down(GELU(up(x))), GELU in GPT-2's tanh approximation.
    ``swiglu`` (Llama; Shazeer 2020, arxiv.org/abs/2002.05202): down(SiLU(gate(x)) * up(x)),
    three matrices.  x: (batch, pos, d_model) -> (batch, pos, d_model); the middle is d_ff wide.
    """

    def __init__(self, d_model: int, d_ff: int, kind: str = "gelu", bias: bool = True):
        super().__init__()
        if kind not in ("gelu", "swiglu"):
            raise ValueError(f"mlp={kind!r} is not one of gelu, swiglu")
        self.kind = kind
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if kind == "swiglu" else None
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        if self.kind == "gelu":
            h = nn.functional.gelu(self.up(x), approximate="tanh")  # (batch, pos, d_ff)
        else:
            h = nn.functional.silu(self.gate(x)) * self.up(x)       # (batch, pos, d_ff)
        return self.down(h)                                         # (batch, pos, d_model)


class BlockOutput(NamedTuple):
    x: torch.Tensor
    """(batch, pos, d_model): the residual stream after the block."""
    kv: tuple
    """(k, v) of the block's attention, each (batch, n_kv_heads, past + pos, d_head)."""
    pattern: torch.Tensor | None
    """(batch, n_heads, pos, past + pos), if asked for."""


class TransformerBlock(nn.Module):
    """A pre-norm block for ``shape`` (dense feed-forward only).

    Args:
        shape: a course_lib.ModelShape; uses d_model, n_heads, n_kv_heads, d_head, d_ff, mlp, norm,
            qkv_bias, out_bias, mlp_bias, positions (``rotary`` is applied inside attention) and
            sliding_window.
        causal: mask later positions (lesson 2 turns this off to show what goes wrong).
        attention_only: no feed-forward layer and no second norm (lesson 2's induction heads).
    Raises:
        ValueError: a mixture-of-experts shape (n_experts > 0), which this toy does not build.
    """

    def __init__(self, shape: ModelShape, causal: bool = True, attention_only: bool = False):
        super().__init__()
        if shape.n_experts:
            raise ValueError(f"n_experts={shape.n_experts}: the toy block builds a dense "
                             "feed-forward layer only")
        self.norm_1 = make_norm(shape.norm, shape.d_model)
        self.attn = MultiHeadAttention(
            shape.d_model, shape.n_heads, shape.n_kv_heads, shape.d_head, qkv_bias=shape.qkv_bias,
            out_bias=shape.out_bias, causal=causal, rotary=shape.positions == "rotary",
            sliding_window=shape.sliding_window)
        self.norm_2 = None if attention_only else make_norm(shape.norm, shape.d_model)
        self.mlp = None if attention_only else FeedForward(shape.d_model, shape.d_ff, shape.mlp,
                                                           shape.mlp_bias)

    def run(self, x, past_kv=None, return_pattern=False) -> BlockOutput:
        """x: (batch, pos, d_model); past_kv: this block's ``kv`` from an earlier call."""
        a = self.attn.run(self.norm_1(x), past_kv, return_pattern)
        x = x + a.out                             # (batch, pos, d_model)
        if self.mlp is not None:
            x = x + self.mlp(self.norm_2(x))      # (batch, pos, d_model)
        return BlockOutput(x, a.kv, a.pattern)

    def forward(self, x):
        """x: (batch, pos, d_model) -> (batch, pos, d_model)."""
        return self.run(x).x

    @torch.no_grad()
    def zero_output_projections(self) -> "TransformerBlock":
        """Zero the matrices (and biases) that write into the residual stream: attention's
        out_proj and the feed-forward down projection.  The block then returns its input exactly
        (x + 0 + 0), so it can be added to a trained model as a no-op.  Returns self."""
        for layer in (self.attn.out_proj, None if self.mlp is None else self.mlp.down):
            if layer is not None:
                layer.weight.zero_()
                if layer.bias is not None:
                    layer.bias.zero_()
        return self
