"""Attention, written out: scores, scale, mask, softmax, weighted sum (Vaswani et al. 2017,
arxiv.org/abs/1706.03762), and a multi-head layer with grouped-query attention and a KV cache.

Shapes use the course's names: ``batch``, ``pos`` (tokens), ``n_heads`` query heads,
``n_kv_heads`` key/value heads, ``d_head`` the width of one head, ``d_model`` the residual stream.
Checked in tests/test_attention.py against ``torch.nn.functional.scaled_dot_product_attention``
and ``torch.nn.MultiheadAttention``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn

from .positions import apply_rotary, rotary_cos_sin


def scaled_dot_product_attention(q, k, v, causal=False, mask=None, return_weights=False):
    """softmax(q kᵀ / sqrt(d_head) + mask) v, one line per step.

    Args:
        q: (..., n_q, d_head) queries.
        k: (..., n_k, d_head) keys.
        v: (..., n_k, d_v) values.
        causal: query i may only see keys up to its own position.  When there are fewer queries
            than keys (decoding with a KV cache) the queries are the *last* n_q positions, so query
            i sits at position n_k - n_q + i.  For n_q == n_k this is torch's ``is_causal``.
        mask: optional bool tensor broadcastable to (..., n_q, n_k); True means "may attend"
            (torch's convention for a boolean ``attn_mask``).  Combined with ``causal`` by "and".
        return_weights: also return the attention pattern.
    Returns:
        out: (..., n_q, d_v); and, if ``return_weights``, weights: (..., n_q, n_k), each row
        summing to 1.  A query allowed to see no key at all gets NaN (softmax of only -inf).
    Raises:
        ValueError: mismatched d_head or n_k, more queries than keys with ``causal``, a mask
            that is not bool.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_head of q ({q.shape[-1]}) and k ({k.shape[-1]}) differ")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} positions but v has {v.shape[-2]}")
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    if causal:
        if n_q > n_k:
            raise ValueError(f"causal attention needs n_q <= n_k, got n_q={n_q}, n_k={n_k}")
        q_pos = torch.arange(n_k - n_q, n_k, device=q.device)  # (n_q,) absolute positions
        k_pos = torch.arange(n_k, device=q.device)             # (n_k,)
        scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}")
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., n_q, n_k)
    out = weights @ v                        # (..., n_q, d_v)
    return (out, weights) if return_weights else out


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")


class AttentionOutput(NamedTuple):
    out: torch.Tensor
    """(batch, pos, d_model): what the layer adds to the residual stream."""
    kv: tuple
    """(k, v), each (batch, n_kv_heads, past + pos, d_head): the cache to pass next time."""
    pattern: torch.Tensor | None
    """(batch, n_heads, pos, past + pos) attention weights, if asked for."""


class MultiHeadAttention(nn.Module):
    """Multi-head attention with ``n_kv_heads`` key/value heads.

    ``n_kv_heads == n_heads``: multi-head attention.  ``n_kv_heads < n_heads``: grouped-query
    attention (Ainslie et al. 2023, arxiv.org/abs/2305.13245): each key/value head serves
    ``n_heads // n_kv_heads`` consecutive query heads.  ``n_kv_heads == 1``: multi-query attention
    (Shazeer 2019, arxiv.org/abs/1911.02150).

    Parameters (for the counting lessons): q_proj d_model × n_heads·d_head, k_proj and v_proj
    d_model × n_kv_heads·d_head each, out_proj n_heads·d_head × d_model, plus biases if asked.

    Args:
        causal: mask later positions (True for a decoder).
        rotary: rotate queries and keys by their positions (course_lib.positions; even d_head).
        sliding_window: each query sees at most this many positions, itself included (Mistral).
            The cache still keeps every token.
    Raises:
        ValueError: a size that is not positive, n_heads not a multiple of n_kv_heads,
            d_model not a multiple of n_heads when d_head is not given, odd d_head with rotary,
            a sliding_window that is not a positive integer.
    """

    def __init__(self, d_model, n_heads, n_kv_heads=None, d_head=None, qkv_bias=True,
                 out_bias=True, causal=True, rotary=False, sliding_window=None):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads)):
            _check_positive(name, value)
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}")
        if d_head is None and d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}; give d_head")
        d_head = d_model // n_heads if d_head is None else d_head
        _check_positive("d_head", d_head)
        if sliding_window is not None:
            _check_positive("sliding_window", sliding_window)
        if rotary and d_head % 2:
            raise ValueError(f"d_head={d_head} must be even for rotary positions")
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_head
        self.causal, self.rotary, self.sliding_window = causal, rotary, sliding_window
        self.q_proj = nn.Linear(d_model, n_heads * d_head, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=qkv_bias)
        self.out_proj = nn.Linear(n_heads * d_head, d_model, bias=out_bias)

    def _split_heads(self, x, n):
        # (batch, pos, n·d_head) -> (batch, pos, n, d_head) -> (batch, n, pos, d_head)
        return x.view(x.shape[0], x.shape[1], n, self.d_head).transpose(1, 2)

    def forward(self, x):
        """x: (batch, pos, d_model) -> (batch, pos, d_model)."""
        return self.run(x).out

    def run(self, x, past_kv=None, return_pattern=False) -> AttentionOutput:
        """x: (batch, pos, d_model), the new tokens; past_kv: None or the ``kv`` of an earlier call
        (the tokens before these).  Returns AttentionOutput(out, kv, pattern)."""
        past = 0 if past_kv is None else past_kv[0].shape[2]
        q = self._split_heads(self.q_proj(x), self.n_heads)     # (batch, n_heads, pos, d_head)
        k = self._split_heads(self.k_proj(x), self.n_kv_heads)  # (batch, n_kv_heads, pos, d_head)
        v = self._split_heads(self.v_proj(x), self.n_kv_heads)  # (batch, n_kv_heads, pos, d_head)
        if self.rotary:  # rotate by absolute position: the new tokens sit at past, past+1, ...
            positions = torch.arange(past, past + x.shape[1])
            cos, sin = rotary_cos_sin(positions, self.d_head, dtype=q.dtype)  # (pos, d_head) each
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)  # (batch, n_kv_heads, past + pos, d_head)
            v = torch.cat([past_kv[1], v], dim=2)
        group = self.n_heads // self.n_kv_heads
        # each kv head serves `group` consecutive query heads:
        k_all = k.repeat_interleave(group, dim=1)  # (batch, n_heads, past + pos, d_head)
        v_all = v.repeat_interleave(group, dim=1)
        mask = None
        if self.sliding_window is not None:
            q_pos = torch.arange(past, k.shape[2], device=x.device)  # (pos,)
            k_pos = torch.arange(k.shape[2], device=x.device)        # (past + pos,)
            mask = q_pos[:, None] - k_pos[None, :] < self.sliding_window
        z, pattern = scaled_dot_product_attention(q, k_all, v_all, causal=self.causal, mask=mask,
                                                  return_weights=True)
        # z: (batch, n_heads, pos, d_head); pattern: (batch, n_heads, pos, past + pos)
        z = z.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)  # (batch, pos, n_heads·d_head)
        return AttentionOutput(self.out_proj(z), (k, v), pattern if return_pattern else None)
